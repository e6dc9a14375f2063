//! Read-only memory mappings of cached files.
//!
//! Why map: on node-local RAM disks (tmpfs, /dev/shm) a `pread` copies every
//! byte out of the page cache; a mapping lends the bytes without that copy
//! (`redundancy::logical::LogicalFile::open_mapped`). The checkpoint and
//! restart paths do not map: the redundancy encode and rebuild and the
//! whole-file check (`storage::verify`) read each file once in bounded
//! pieces (`redundancy::apply`, "One pass"), which keeps the file's pages
//! out of the rank's resident set and, with several threads in the
//! process, is faster than populating and unmapping mappings
//! (results/checkpoint.md, "SINGLE's CRC read through a buffer").
//!
//! Cache files are private to the job (0700 directories that refuse foreign
//! owners, `storage::dirs`) and SCR reads them only between the
//! application's write and the next phase, when nothing may truncate them.
//! Truncating a file while it is mapped would raise SIGBUS on access; that
//! is the one thing the callers rely on not happening.

use std::fs::File;

/// Files smaller than this are read rather than mapped: below it the
/// mmap/munmap calls (and, in a multithreaded process, the TLB shootdown
/// of the unmap) cost more than the copy they save.
pub const MAP_MIN_BYTES: u64 = 1 << 20;

/// A read-only shared mapping of a whole file (empty files map nothing),
/// made and unmapped by the `memmap2` crate.
#[derive(Debug)]
pub struct Mapped {
    map: Option<memmap2::Mmap>,
}

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
            return Ok(Mapped { map: None });
        }
        #[cfg(test)]
        test_hook::record(file);
        // SAFETY: a read-only mapping of `len` bytes of an open file. The
        // mapping is undefined behaviour only if the file is truncated or
        // written while mapped; the module's callers map cache files only
        // between the application's write and the next phase, when nothing
        // may change them (see the module documentation).
        let map = unsafe { memmap2::MmapOptions::new().len(len).populate().map(file)? };
        // Readahead hint only; failure changes nothing.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(Mapped { map: Some(map) })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

/// Which files were mapped, for tests that must prove a path maps nothing
/// (the encode's single pass, `redundancy::apply`): every mapping records
/// the file's (device, inode), so concurrent tests do not disturb a check
/// about one's own files.
#[cfg(test)]
pub(crate) mod test_hook {
    use std::fs::File;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;
    use std::sync::Mutex;

    static MAPPED: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

    pub(super) fn record(file: &File) {
        if let Ok(m) = file.metadata() {
            MAPPED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((m.dev(), m.ino()));
        }
    }

    /// Whether the file at `path` was ever mapped by [`super::Mapped`].
    pub(crate) fn was_mapped(path: &Path) -> bool {
        let Ok(m) = std::fs::metadata(path) else {
            return false;
        };
        MAPPED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&(m.dev(), m.ino()))
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
