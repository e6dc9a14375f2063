//! The Fortran interface (`scrf.h`): SCR's subroutines with the error code
//! in a last `IERROR` argument, e.g. `CALL SCR_START_OUTPUT(NAME, FLAGS,
//! IERROR)`, over the C entry points of this library.
//!
//! Calling convention (gfortran, and the compilers that follow it): every
//! argument by reference; each `CHARACTER*(*)` argument's length is passed
//! by value after all the others, in the same order. The length is read as
//! its low 32 bits, so compilers that pass a C `int` work too. Symbols are
//! exported lower case with one and with two trailing underscores
//! (`scr_init_`, `scr_init__`: gfortran's default and `-fsecond-underscore`).
//!
//! Strings: an input is the text before its trailing blanks (and before a
//! NUL, if any); a blank name where SCR allows none (SCR_START_OUTPUT) is
//! the default name. An output is written blank-padded to the variable's
//! length; a result longer than the variable is an error (IERROR /= 0),
//! never a silent truncation. Panics never cross into Fortran: each call
//! goes through the C entry point, which catches them.

use std::ffi::{c_char, c_int, CStr, CString};

use crate::{report, SCR_FAILURE, SCR_MAX_FILENAME, SCR_SUCCESS};

/// A hidden string length as the compiler passed it (see the module docs).
type Len = usize;

fn length(len: Len) -> usize {
    len & 0xffff_ffff
}

/// The text of an input `CHARACTER*(*)` argument, as a C string: trailing
/// blanks dropped, cut at a NUL. `None` (reported) when NULL or too long.
///
/// # Safety
/// `p` is NULL or readable for `len` bytes.
unsafe fn input(call: &str, arg: &str, p: *const c_char, len: Len) -> Option<CString> {
    if p.is_null() {
        report(call, &format!("{arg} is NULL"));
        return None;
    }
    // SAFETY: caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), length(len)) };
    let bytes = bytes.split(|&b| b == 0).next().unwrap_or_default();
    let end = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    if end >= SCR_MAX_FILENAME {
        report(
            call,
            &format!("{arg} is {end} characters; it must be shorter than SCR_MAX_FILENAME"),
        );
        return None;
    }
    CString::new(&bytes[..end]).ok()
}

/// A C buffer for a C entry point to fill, then copied to a Fortran output.
struct Out([u8; SCR_MAX_FILENAME]);

impl Out {
    fn new() -> Out {
        Out([0; SCR_MAX_FILENAME])
    }

    fn ptr(&mut self) -> *mut c_char {
        self.0.as_mut_ptr().cast()
    }

    fn text(&self) -> &[u8] {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        &self.0[..end]
    }
}

/// Write `text` blank-padded into the Fortran variable `dst` of `len`
/// characters. False (reported) when it does not fit or `dst` is NULL.
///
/// # Safety
/// `dst` is NULL or writable for `len` bytes.
unsafe fn output(call: &str, arg: &str, dst: *mut c_char, len: Len, text: &[u8]) -> bool {
    let len = length(len);
    if dst.is_null() {
        report(call, &format!("{arg} is NULL"));
        return false;
    }
    if text.len() > len {
        report(
            call,
            &format!(
                "{arg} holds {len} characters, the result has {}: {}",
                text.len(),
                String::from_utf8_lossy(text)
            ),
        );
        return false;
    }
    // SAFETY: caller's contract; text.len() <= len.
    unsafe {
        let d = std::slice::from_raw_parts_mut(dst.cast::<u8>(), len);
        d[..text.len()].copy_from_slice(text);
        d[text.len()..].fill(b' ');
    }
    true
}

/// Store `code` through `ierror` (when not NULL).
///
/// # Safety
/// `ierror` is NULL or a valid `INTEGER`.
unsafe fn set(ierror: *mut c_int, code: c_int) {
    if !ierror.is_null() {
        // SAFETY: caller's contract.
        unsafe { *ierror = code };
    }
}

/// Read an `INTEGER` argument (NULL reads as 0).
///
/// # Safety
/// `p` is NULL or a valid `INTEGER`.
unsafe fn int(p: *const c_int) -> c_int {
    if p.is_null() {
        0
    } else {
        // SAFETY: caller's contract.
        unsafe { *p }
    }
}

/// Define `$name` with `$body` and export it under each Fortran name.
macro_rules! fortran {
    ($name:ident => [$($sym:literal),+], fn $params:tt $body:block) => {
        fortran_body!($name, $params, $body);
        $( fortran_export!($sym, $name, $params); )+
    };
}

macro_rules! fortran_body {
    ($name:ident, ($($arg:ident : $ty:ty),*), $body:block) => {
        /// The body of the Fortran subroutine (see the module docs).
        ///
        /// # Safety
        /// Arguments as the Fortran caller passes them.
        unsafe fn $name($($arg: $ty),*) $body
    };
}

macro_rules! fortran_export {
    ($sym:literal, $name:ident, ($($arg:ident : $ty:ty),*)) => {
        const _: () = {
            /// Fortran entry point.
            ///
            /// # Safety
            /// Called by Fortran with the arguments of the subroutine.
            #[export_name = $sym]
            pub unsafe extern "C" fn entry($($arg: $ty),*) {
                // SAFETY: the same contract.
                unsafe { $name($($arg),*) }
            }
        };
    };
}

fortran!(init => ["scr_init_", "scr_init__"], fn (ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Init()) }
});

fortran!(finalize => ["scr_finalize_", "scr_finalize__"], fn (ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Finalize()) }
});

fortran!(config => ["scr_config_", "scr_config__"],
    fn (conf: *const c_char, val: *mut c_char, ierror: *mut c_int, conf_len: Len, val_len: Len) {
    const CALL: &str = "SCR_CONFIG";
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let Some(text) = input(CALL, "CONFIG", conf, conf_len) else {
            return set(ierror, SCR_FAILURE);
        };
        let answer = crate::SCR_Config(text.as_ptr());
        let value = if answer.is_null() {
            Vec::new()
        } else {
            let v = CStr::from_ptr(answer).to_bytes().to_vec();
            libc::free(answer.cast_mut().cast());
            v
        };
        // A setting (or an unset parameter) leaves VAL blank.
        let ok = val.is_null() && value.is_empty() || output(CALL, "VAL", val, val_len, &value);
        set(ierror, if ok { SCR_SUCCESS } else { SCR_FAILURE });
    }
});

fortran!(route_file => ["scr_route_file_", "scr_route_file__"],
    fn (name: *const c_char, file: *mut c_char, ierror: *mut c_int, name_len: Len, file_len: Len) {
    const CALL: &str = "SCR_ROUTE_FILE";
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let Some(n) = input(CALL, "NAME", name, name_len) else {
            return set(ierror, SCR_FAILURE);
        };
        let mut out = Out::new();
        let mut rc = crate::SCR_Route_file(n.as_ptr(), out.ptr());
        if rc == SCR_SUCCESS && !output(CALL, "FILE", file, file_len, out.text()) {
            rc = SCR_FAILURE;
        }
        set(ierror, rc);
    }
});

fortran!(have_restart => ["scr_have_restart_", "scr_have_restart__"],
    fn (flag: *mut c_int, name: *mut c_char, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let mut out = Out::new();
        let mut rc = crate::SCR_Have_restart(flag, out.ptr());
        if rc == SCR_SUCCESS && !output("SCR_HAVE_RESTART", "NAME", name, name_len, out.text()) {
            rc = SCR_FAILURE;
        }
        set(ierror, rc);
    }
});

fortran!(start_restart => ["scr_start_restart_", "scr_start_restart__"],
    fn (name: *mut c_char, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let mut out = Out::new();
        let mut rc = crate::SCR_Start_restart(out.ptr());
        if rc == SCR_SUCCESS && !output("SCR_START_RESTART", "NAME", name, name_len, out.text()) {
            rc = SCR_FAILURE;
        }
        set(ierror, rc);
    }
});

fortran!(complete_restart => ["scr_complete_restart_", "scr_complete_restart__"],
    fn (valid: *const c_int, ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Complete_restart(int(valid))) }
});

fortran!(need_checkpoint => ["scr_need_checkpoint_", "scr_need_checkpoint__"],
    fn (flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Need_checkpoint(flag)) }
});

fortran!(start_checkpoint => ["scr_start_checkpoint_", "scr_start_checkpoint__"],
    fn (ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Start_checkpoint()) }
});

fortran!(complete_checkpoint => ["scr_complete_checkpoint_", "scr_complete_checkpoint__"],
    fn (valid: *const c_int, ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Complete_checkpoint(int(valid))) }
});

fortran!(start_output => ["scr_start_output_", "scr_start_output__"],
    fn (name: *const c_char, flags: *const c_int, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let Some(n) = input("SCR_START_OUTPUT", "NAME", name, name_len) else {
            return set(ierror, SCR_FAILURE);
        };
        // A blank name is SCR's default name (C: NULL).
        let p = if n.as_bytes().is_empty() { std::ptr::null() } else { n.as_ptr() };
        set(ierror, crate::SCR_Start_output(p, int(flags)));
    }
});

fortran!(complete_output => ["scr_complete_output_", "scr_complete_output__"],
    fn (valid: *const c_int, ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Complete_output(int(valid))) }
});

fortran!(should_exit => ["scr_should_exit_", "scr_should_exit__"],
    fn (flag: *mut c_int, ierror: *mut c_int) {
    // SAFETY: caller's contract.
    unsafe { set(ierror, crate::SCR_Should_exit(flag)) }
});

/// `SCR_CURRENT`, `SCR_DELETE`, `SCR_DROP`: one input name.
///
/// # Safety
/// As the Fortran caller passes the arguments.
unsafe fn by_name(
    call: &str,
    f: unsafe extern "C" fn(*const c_char) -> c_int,
    name: *const c_char,
    ierror: *mut c_int,
    name_len: Len,
) {
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let Some(n) = input(call, "NAME", name, name_len) else {
            return set(ierror, SCR_FAILURE);
        };
        set(ierror, f(n.as_ptr()));
    }
}

fortran!(current => ["scr_current_", "scr_current__"],
    fn (name: *const c_char, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract.
    unsafe { by_name("SCR_CURRENT", crate::SCR_Current, name, ierror, name_len) }
});

fortran!(delete => ["scr_delete_", "scr_delete__"],
    fn (name: *const c_char, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract.
    unsafe { by_name("SCR_DELETE", crate::SCR_Delete, name, ierror, name_len) }
});

fortran!(drop_dataset => ["scr_drop_", "scr_drop__"],
    fn (name: *const c_char, ierror: *mut c_int, name_len: Len) {
    // SAFETY: caller's contract.
    unsafe { by_name("SCR_DROP", crate::SCR_Drop, name, ierror, name_len) }
});

fortran!(get_version => ["scr_get_version_", "scr_get_version__"],
    fn (version: *mut c_char, ierror: *mut c_int, version_len: Len) {
    // SAFETY: caller's contract for every pointer below.
    unsafe {
        let v = crate::SCR_Get_version();
        let ok = !v.is_null()
            && output("SCR_GET_VERSION", "VERSION", version, version_len, CStr::from_ptr(v).to_bytes());
        set(ierror, if ok { SCR_SUCCESS } else { SCR_FAILURE });
    }
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_drop_trailing_blanks_and_stop_at_nul() {
        let s = b"ckpt.3    ";
        // SAFETY: a live buffer of that length.
        let c = unsafe { input("T", "NAME", s.as_ptr().cast(), s.len()) }.unwrap();
        assert_eq!(c.as_bytes(), b"ckpt.3");
        let s = b"a b\0zzz";
        // SAFETY: as above.
        let c = unsafe { input("T", "NAME", s.as_ptr().cast(), s.len()) }.unwrap();
        assert_eq!(c.as_bytes(), b"a b");
        // The upper half of a 64-bit length from an `int` is ignored.
        let s = b"x ";
        // SAFETY: as above; the length is 2 after masking.
        let c = unsafe { input("T", "NAME", s.as_ptr().cast(), 0xdead_0000_0000_0002) }.unwrap();
        assert_eq!(c.as_bytes(), b"x");
        let long = vec![b'n'; SCR_MAX_FILENAME];
        // SAFETY: as above.
        assert!(unsafe { input("T", "NAME", long.as_ptr().cast(), long.len()) }.is_none());
        // SAFETY: NULL is checked.
        assert!(unsafe { input("T", "NAME", std::ptr::null(), 4) }.is_none());
    }

    #[test]
    fn outputs_are_blank_padded_and_never_truncated() {
        let mut buf = [b'?'; 8];
        // SAFETY: a live buffer of that length.
        assert!(unsafe { output("T", "NAME", buf.as_mut_ptr().cast(), 8, b"ckpt.1") });
        assert_eq!(&buf, b"ckpt.1  ");
        let mut small = [b'?'; 4];
        // SAFETY: as above.
        assert!(!unsafe { output("T", "NAME", small.as_mut_ptr().cast(), 4, b"ckpt.1") });
        assert_eq!(&small, b"????", "left as it was");
    }

    #[test]
    fn calls_before_init_set_ierror_and_never_crash() {
        let mut ierr: c_int = -7;
        let mut flag: c_int = -7;
        let mut name = [b' '; 16];
        // SAFETY: live arguments of the right lengths.
        unsafe {
            need_checkpoint(&mut flag, &mut ierr);
            assert_eq!(ierr, SCR_FAILURE);
            ierr = -7;
            have_restart(&mut flag, name.as_mut_ptr().cast(), &mut ierr, name.len());
            assert_eq!(ierr, SCR_FAILURE);
            ierr = -7;
            start_output(std::ptr::null(), &1, &mut ierr, 0);
            assert_eq!(ierr, SCR_FAILURE);
            ierr = -7;
            let mut v = [b' '; 4];
            get_version(v.as_mut_ptr().cast(), &mut ierr, v.len());
            assert_eq!(ierr, SCR_FAILURE, "the version does not fit in 4");
            let mut v = [b' '; 32];
            get_version(v.as_mut_ptr().cast(), &mut ierr, v.len());
            assert_eq!(ierr, SCR_SUCCESS);
            assert!(v.starts_with(b"v"));
        }
    }
}
