//! Read-only memory mappings of cached files.
//!
//! Why map: on node-local RAM disks (tmpfs, /dev/shm) a `pread` copies every
//! byte out of the page cache, and that copy costs about as much as reading
//! the pages at all. Completing a checkpoint needs each application file's
//! bytes twice — for its CRC32 (recorded in the redundancy headers, which
//! precede the parity data) and for the redundancy arithmetic. A mapping
//! pays the page-cache walk once: the CRC pass populates the page tables,
//! and the encode then reads the same pages at memory speed
//! (benches/checkpoint.rs, results/checkpoint.md).
//!
//! Cache files are private to the job (0700 directories that refuse foreign
//! owners, `storage::dirs`) and SCR reads them only between the
//! application's write and the next phase, when nothing may truncate them.
//! Truncating a file while it is mapped would raise SIGBUS on access; that
//! is the one thing the callers rely on not happening.

use std::fs::File;
use std::os::fd::AsRawFd;

/// Files smaller than this are read rather than mapped: below it the
/// mmap/munmap calls (and, in a multithreaded process, the TLB shootdown
/// of the unmap) cost more than the copy they save.
pub const MAP_MIN_BYTES: u64 = 1 << 20;

/// A read-only shared mapping of a whole file (empty files map nothing).
#[derive(Debug)]
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; sharing the
// pointer across threads is no different from sharing a `&[u8]`.
unsafe impl Send for Mapped {}
// SAFETY: as above, only shared reads go through it.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Maps the first `len` bytes of `file` (its length, checked by the
    /// caller), with the page tables populated up front (one walk of the
    /// page cache instead of a fault per 64 KiB).
    pub fn new(file: &File, len: u64) -> std::io::Result<Self> {
        let len = usize::try_from(len).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "file larger than the address space",
            )
        })?;
        if len == 0 {
            return Ok(Mapped {
                ptr: std::ptr::null_mut(),
                len: 0,
            });
        }
        // SAFETY: a fresh read-only mapping of `len` bytes of an open file;
        // the kernel picks the address; the result is checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // Readahead hint only; failure changes nothing.
        // SAFETY: `ptr`/`len` is exactly the mapping just created.
        unsafe { libc::madvise(ptr, len, libc::MADV_SEQUENTIAL) };
        Ok(Mapped { ptr, len })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `ptr` is a live read-only mapping of `len` bytes owned by
        // `self`, so the slice cannot outlive it.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping created in `new`; no slice
            // borrowed from it can outlive `self`.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_what_was_written_and_empty_files_map_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 31) as u8).collect();
        File::create(&p).unwrap().write_all(&data).unwrap();
        let f = File::open(&p).unwrap();
        let m = Mapped::new(&f, data.len() as u64).unwrap();
        assert_eq!(m.bytes(), &data[..]);
        let e = dir.path().join("e");
        File::create(&e).unwrap();
        let m = Mapped::new(&File::open(&e).unwrap(), 0).unwrap();
        assert!(m.bytes().is_empty());
    }
}
