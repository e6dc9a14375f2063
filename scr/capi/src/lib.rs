//! The C API of SCR 3.1 (`scr.h`): `libscr.so` / `libscr.a`, so existing
//! C and C++ applications relink against this library unchanged.
//!
//! Every entry point catches panics and returns an error code (`SCR_FAILURE`,
//! 1; SCR 3.1 defines only `SCR_SUCCESS`, 0), printing the typed error to
//! stderr with the rank. NULL pointers and over-long names are errors, never
//! crashes. The application initialises MPI itself; SCR_Init duplicates
//! `MPI_COMM_WORLD`.
//!
//! `SCR_Configf` is C-variadic, so it lives in `csrc/configf.c` (built by
//! build.rs) and calls [`SCR_Config`].
//!
//! The Fortran interface (`include/scrf.h`, `SCR_INIT(IERROR)`, ...) is in
//! the `fortran` module, over these entry points.

use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt::Display;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use scr_core::comm::mpi::MpiComm;
use scr_core::comm::{Comm, CommError};
use scr_core::config::{Config, ConfigError, LoadOptions, ProcessEnv};
use scr_core::{Flags, InitOptions, Scr, ScrError};

mod fortran;

/// `SCR_SUCCESS`.
pub const SCR_SUCCESS: c_int = 0;
/// What every failing call returns (SCR 3.1's header names no failure value).
pub const SCR_FAILURE: c_int = 1;
/// `SCR_MAX_FILENAME`: names and returned paths, NUL included, fit in this.
pub const SCR_MAX_FILENAME: usize = 1024;

/// Why a C call failed.
#[derive(Debug, thiserror::Error)]
enum CapiError {
    #[error(transparent)]
    Scr(#[from] ScrError),
    #[error("MPI: {0}")]
    Comm(#[from] CommError),
    #[error("{arg} is NULL")]
    Null { arg: &'static str },
    #[error("{arg} is not valid UTF-8")]
    NotUtf8 { arg: &'static str },
    #[error(
        "{arg} is at least {SCR_MAX_FILENAME} bytes; it must be shorter than SCR_MAX_FILENAME"
    )]
    TooLong { arg: &'static str },
    #[error("result {what} is {len} bytes and does not fit in SCR_MAX_FILENAME ({SCR_MAX_FILENAME}) with its NUL")]
    ResultTooLong { what: &'static str, len: usize },
    #[error("SCR is not initialized (call SCR_Init first)")]
    NotInitialized,
    #[error("SCR is already initialized")]
    AlreadyInitialized,
    #[error("internal error (panic): {0}")]
    Panic(String),
}

impl From<ConfigError> for CapiError {
    fn from(e: ConfigError) -> CapiError {
        CapiError::Scr(ScrError::from(e))
    }
}

/// The library between SCR_Init and SCR_Finalize.
struct Library(Scr);

// SAFETY: `Scr` holds an `MpiComm`, which is not `Send` because MPI handles
// belong to the thread that uses them. SCR's C API is for MPI_THREAD_SINGLE
// and MPI_THREAD_FUNNELED applications: every SCR call comes from the one
// thread that makes MPI calls, so the value is only ever used on that
// thread. The Mutex exists only to give the global a safe interior; it is
// never contended across threads in a conforming application.
unsafe impl Send for Library {}

static STATE: Mutex<Option<Library>> = Mutex::new(None);
/// SCR_Config settings made before SCR_Init, applied by it in order.
static PRE_CONFIGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// This process's rank in MPI_COMM_WORLD once SCR_Init ran, for messages.
static RANK: AtomicI64 = AtomicI64::new(-1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic caught while the lock was held leaves the data as it was at
    // the panic; the call that panicked already returned an error.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn report(call: &str, msg: &dyn Display) {
    let rank = RANK.load(Ordering::Relaxed);
    if rank >= 0 {
        eprintln!("SCR: rank {rank}: {call}: {msg}");
    } else {
        eprintln!("SCR: {call}: {msg}");
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_owned()
    }
}

/// Run an entry point's body: errors and panics become `SCR_FAILURE`.
fn entry(call: &'static str, f: impl FnOnce() -> Result<c_int, CapiError>) -> c_int {
    let result = catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(CapiError::Panic(panic_message(p))));
    match result {
        Ok(code) => code,
        Err(e) => {
            report(call, &e);
            SCR_FAILURE
        }
    }
}

fn with_scr<T>(f: impl FnOnce(&mut Scr) -> Result<T, CapiError>) -> Result<T, CapiError> {
    let mut state = lock(&STATE);
    let lib = state.as_mut().ok_or(CapiError::NotInitialized)?;
    f(&mut lib.0)
}

/// A name argument: not NULL, UTF-8, shorter than SCR_MAX_FILENAME. Reads at
/// most SCR_MAX_FILENAME bytes.
///
/// # Safety
/// `p` is NULL or points to memory readable up to its NUL or
/// SCR_MAX_FILENAME bytes, whichever comes first.
unsafe fn name_arg<'a>(p: *const c_char, arg: &'static str) -> Result<&'a str, CapiError> {
    if p.is_null() {
        return Err(CapiError::Null { arg });
    }
    // SAFETY: caller's contract; strnlen reads no further than the bound.
    let len = unsafe { libc::strnlen(p, SCR_MAX_FILENAME) };
    if len >= SCR_MAX_FILENAME {
        return Err(CapiError::TooLong { arg });
    }
    // SAFETY: the `len` bytes before the NUL are readable (checked above).
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    std::str::from_utf8(bytes).map_err(|_| CapiError::NotUtf8 { arg })
}

/// Copy `bytes` and a NUL into the caller's SCR_MAX_FILENAME buffer.
///
/// # Safety
/// `dst` is NULL or writable for SCR_MAX_FILENAME bytes.
unsafe fn copy_out(dst: *mut c_char, what: &'static str, bytes: &[u8]) -> Result<(), CapiError> {
    if dst.is_null() {
        return Err(CapiError::Null { arg: what });
    }
    if bytes.len() >= SCR_MAX_FILENAME {
        return Err(CapiError::ResultTooLong {
            what,
            len: bytes.len(),
        });
    }
    // SAFETY: caller's contract; bytes.len() + 1 <= SCR_MAX_FILENAME.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.cast::<u8>(), bytes.len());
        *dst.add(bytes.len()) = 0;
    }
    Ok(())
}

/// Store `value` through `flag`.
///
/// # Safety
/// `flag` is NULL or a valid `int*`.
unsafe fn set_flag(flag: *mut c_int, value: bool) {
    // SAFETY: caller's contract; checked non-NULL by every caller first.
    unsafe { *flag = c_int::from(value) };
}

fn code(ok: bool) -> c_int {
    if ok {
        SCR_SUCCESS
    } else {
        SCR_FAILURE
    }
}

/// `int SCR_Init(void)`: collective over MPI_COMM_WORLD, after MPI_Init.
/// Applies the SCR_Config settings made before it.
#[no_mangle]
pub extern "C" fn SCR_Init() -> c_int {
    entry("SCR_Init", || {
        let mut state = lock(&STATE);
        if state.is_some() {
            return Err(CapiError::AlreadyInitialized);
        }
        let world = MpiComm::world()?;
        RANK.store(world.rank() as i64, Ordering::Relaxed);
        let configs = std::mem::take(&mut *lock(&PRE_CONFIGS));
        let scr = Scr::init_with(
            Box::new(world),
            InitOptions {
                configs,
                ..InitOptions::default()
            },
        )?;
        *state = Some(Library(scr));
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Finalize(void)`: collective, before MPI_Finalize. A phase still
/// open is completed as invalid.
#[no_mangle]
pub extern "C" fn SCR_Finalize() -> c_int {
    entry("SCR_Finalize", || {
        let lib = lock(&STATE).take().ok_or(CapiError::NotInitialized)?;
        lib.0.finalize()?;
        Ok(SCR_SUCCESS)
    })
}

/// Apply or answer an SCR_Config string before SCR_Init: queries answer from
/// the configuration the environment and files give plus earlier settings;
/// settings are checked and kept for SCR_Init.
fn config_before_init(text: &str) -> Result<Option<String>, CapiError> {
    let mut pre = lock(&PRE_CONFIGS);
    let mut cfg = Config::load(&ProcessEnv, &LoadOptions::default())?;
    for c in pre.iter() {
        cfg.apply_scr_config(c)?;
    }
    // A query succeeds on an initialised copy; a setting is refused there.
    let mut probe = cfg.clone();
    probe.mark_initialized();
    match probe.apply_scr_config(text) {
        Ok(v) => Ok(v),
        Err(ConfigError::AfterInit { .. }) => {
            cfg.apply_scr_config(text)?;
            pre.push(text.to_owned());
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// `const char* SCR_Config(const char* config)`: `KEY=VALUE` sets, `KEY=`
/// unsets (both return NULL), `KEY` queries: a `malloc`'d string the caller
/// frees, or NULL when unset. Settings are only allowed before SCR_Init.
/// Errors print a message and return NULL.
///
/// # Safety
/// `config` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn SCR_Config(config: *const c_char) -> *const c_char {
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<*const c_char, CapiError> {
        if config.is_null() {
            return Err(CapiError::Null { arg: "config" });
        }
        // SAFETY: caller's contract.
        let text = unsafe { CStr::from_ptr(config) }
            .to_str()
            .map_err(|_| CapiError::NotUtf8 { arg: "config" })?;
        let initialized = lock(&STATE).is_some();
        let answer = if initialized {
            with_scr(|scr| Ok(scr.config(text)?))?
        } else {
            config_before_init(text)?
        };
        let Some(value) = answer else {
            return Ok(std::ptr::null());
        };
        // SAFETY: malloc of len + 1 bytes, filled below before use.
        let out = unsafe { libc::malloc(value.len() + 1) }.cast::<u8>();
        if out.is_null() {
            return Err(CapiError::Panic("malloc failed".into()));
        }
        // SAFETY: `out` holds value.len() + 1 bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), out, value.len());
            *out.add(value.len()) = 0;
        }
        Ok(out.cast::<c_char>().cast_const())
    }))
    .unwrap_or_else(|p| Err(CapiError::Panic(panic_message(p))));
    match result {
        Ok(p) => p,
        Err(e) => {
            report("SCR_Config", &e);
            std::ptr::null()
        }
    }
}

unsafe extern "C" {
    /// The C body of SCR_Configf (csrc/configf.c).
    fn scr_capi_configf_impl(format: *const c_char, ...) -> *const c_char;
}

/// `const char* SCR_Configf(const char* format, ...)`: SCR_Config with a
/// printf-style format. Defined in C (a C-variadic function cannot be
/// defined in stable Rust); this naked function only tail-jumps there, so
/// that the symbol is exported from libscr.so (rustc exports only Rust
/// definitions from a cdylib) with every variadic argument untouched.
///
/// # Safety
/// As `printf`: `format` is NULL or a format string matching the arguments.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn SCR_Configf() {
    core::arch::naked_asm!("jmp {0}", sym scr_capi_configf_impl)
}

/// See the x86_64 definition.
///
/// # Safety
/// As `printf`: `format` is NULL or a format string matching the arguments.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn SCR_Configf() {
    core::arch::naked_asm!("b {0}", sym scr_capi_configf_impl)
}

/// Called by the C side of SCR_Configf to report its own errors.
///
/// # Safety
/// Both arguments are NULL or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn scr_capi_report_error(call: *const c_char, message: *const c_char) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::from("(null)")
        } else {
            // SAFETY: caller's contract.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let (call, message) = (text(call), text(message));
    let _ = catch_unwind(|| report(&call, &message));
}

/// `int SCR_Route_file(const char* name, char* file)`: within an output
/// phase, the path in cache to write `name` at; within a restart phase, the
/// path to read it from (an error when it is not there); outside a phase,
/// `name` itself. `file` receives at most SCR_MAX_FILENAME bytes.
///
/// # Safety
/// `name` is NULL or NUL-terminated; `file` is NULL or writable for
/// SCR_MAX_FILENAME bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Route_file(name: *const c_char, file: *mut c_char) -> c_int {
    entry("SCR_Route_file", || {
        // SAFETY: caller's contract.
        let name = unsafe { name_arg(name, "name") }?;
        if file.is_null() {
            return Err(CapiError::Null { arg: "file" });
        }
        let path = with_scr(|scr| Ok(scr.route_file_dyn(name)?))?;
        // SAFETY: caller's contract.
        unsafe { copy_out(file, "file", path.as_os_str().as_bytes()) }?;
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Start_output(const char* name, int flags)`: collective; `name`
/// may be NULL for a default name.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn SCR_Start_output(name: *const c_char, flags: c_int) -> c_int {
    entry("SCR_Start_output", || {
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: caller's contract.
            Some(unsafe { name_arg(name, "name") }?)
        };
        let flags = Flags::from_bits(flags as u32);
        with_scr(|scr| Ok(scr.start_output_dyn(name, flags)?))?;
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Complete_output(int valid)`: collective; SCR_SUCCESS only when
/// every rank passed a nonzero `valid`.
#[no_mangle]
pub extern "C" fn SCR_Complete_output(valid: c_int) -> c_int {
    entry("SCR_Complete_output", || {
        with_scr(|scr| Ok(code(scr.complete_output_dyn(valid != 0)?)))
    })
}

/// Deprecated `int SCR_Start_checkpoint(void)`: an unnamed checkpoint.
#[no_mangle]
pub extern "C" fn SCR_Start_checkpoint() -> c_int {
    entry("SCR_Start_checkpoint", || {
        with_scr(|scr| Ok(scr.start_output_dyn(None, Flags::CHECKPOINT)?))?;
        Ok(SCR_SUCCESS)
    })
}

/// Deprecated `int SCR_Complete_checkpoint(int valid)`.
#[no_mangle]
pub extern "C" fn SCR_Complete_checkpoint(valid: c_int) -> c_int {
    entry("SCR_Complete_checkpoint", || {
        with_scr(|scr| Ok(code(scr.complete_output_dyn(valid != 0)?)))
    })
}

/// `int SCR_Need_checkpoint(int* flag)`: collective.
///
/// # Safety
/// `flag` is NULL or a valid `int*`.
#[no_mangle]
pub unsafe extern "C" fn SCR_Need_checkpoint(flag: *mut c_int) -> c_int {
    entry("SCR_Need_checkpoint", || {
        if flag.is_null() {
            return Err(CapiError::Null { arg: "flag" });
        }
        let need = with_scr(|scr| Ok(scr.need_checkpoint()?))?;
        // SAFETY: checked non-NULL; caller's contract.
        unsafe { set_flag(flag, need) };
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Have_restart(int* flag, char* name)`: `name` may be NULL; when
/// there is no checkpoint it receives the empty string.
///
/// # Safety
/// `flag` is NULL or a valid `int*`; `name` is NULL or writable for
/// SCR_MAX_FILENAME bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Have_restart(flag: *mut c_int, name: *mut c_char) -> c_int {
    entry("SCR_Have_restart", || {
        if flag.is_null() {
            return Err(CapiError::Null { arg: "flag" });
        }
        let have = with_scr(|scr| Ok(scr.have_restart()?))?;
        // SAFETY: checked non-NULL; caller's contract.
        unsafe { set_flag(flag, have.is_some()) };
        if !name.is_null() {
            let text = have.unwrap_or_default();
            // SAFETY: caller's contract.
            unsafe { copy_out(name, "name", text.as_bytes()) }?;
        }
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Start_restart(char* name)`: collective; `name` (may be NULL)
/// receives the checkpoint's name.
///
/// # Safety
/// `name` is NULL or writable for SCR_MAX_FILENAME bytes.
#[no_mangle]
pub unsafe extern "C" fn SCR_Start_restart(name: *mut c_char) -> c_int {
    entry("SCR_Start_restart", || {
        let dname = with_scr(|scr| Ok(scr.start_restart_dyn()?))?;
        if !name.is_null() {
            // SAFETY: caller's contract.
            unsafe { copy_out(name, "name", dname.as_bytes()) }?;
        }
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Complete_restart(int valid)`: collective; SCR_SUCCESS only when
/// every rank passed a nonzero `valid`. On failure the next older
/// checkpoint (if any) becomes the one SCR_Have_restart reports.
#[no_mangle]
pub extern "C" fn SCR_Complete_restart(valid: c_int) -> c_int {
    entry("SCR_Complete_restart", || {
        with_scr(|scr| Ok(code(scr.complete_restart_dyn(valid != 0)?)))
    })
}

/// `int SCR_Should_exit(int* flag)`: collective.
///
/// # Safety
/// `flag` is NULL or a valid `int*`.
#[no_mangle]
pub unsafe extern "C" fn SCR_Should_exit(flag: *mut c_int) -> c_int {
    entry("SCR_Should_exit", || {
        if flag.is_null() {
            return Err(CapiError::Null { arg: "flag" });
        }
        let exit = with_scr(|scr| Ok(scr.should_exit()?))?;
        // SAFETY: checked non-NULL; caller's contract.
        unsafe { set_flag(flag, exit) };
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Current(const char* name)`: collective.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn SCR_Current(name: *const c_char) -> c_int {
    entry("SCR_Current", || {
        // SAFETY: caller's contract.
        let name = unsafe { name_arg(name, "name") }?;
        with_scr(|scr| Ok(scr.current(name)?))?;
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Delete(const char* name)`: collective.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn SCR_Delete(name: *const c_char) -> c_int {
    entry("SCR_Delete", || {
        // SAFETY: caller's contract.
        let name = unsafe { name_arg(name, "name") }?;
        with_scr(|scr| Ok(scr.delete(name)?))?;
        Ok(SCR_SUCCESS)
    })
}

/// `int SCR_Drop(const char* name)`: collective.
///
/// # Safety
/// `name` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn SCR_Drop(name: *const c_char) -> c_int {
    entry("SCR_Drop", || {
        // SAFETY: caller's contract.
        let name = unsafe { name_arg(name, "name") }?;
        with_scr(|scr| Ok(scr.drop_dataset(name)?))?;
        Ok(SCR_SUCCESS)
    })
}

/// `char* SCR_Get_version(void)`: a static string; the caller must neither
/// free nor modify it.
#[no_mangle]
pub extern "C" fn SCR_Get_version() -> *mut c_char {
    static VERSION: OnceLock<CString> = OnceLock::new();
    catch_unwind(|| {
        VERSION
            .get_or_init(|| CString::new(Scr::version()).unwrap_or_default())
            .as_ptr()
            .cast_mut()
    })
    .unwrap_or(std::ptr::null_mut())
}
