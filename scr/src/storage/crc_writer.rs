//! A file writer that computes the CRC32 of the bytes as they are written
//! (issue 17: SINGLE's CRC in the write's shadow). Complete_output then
//! records that CRC instead of reading the file back, when the file is
//! still exactly what the writer left: same length, same modification
//! time, same inode. Anything else (the file rewritten, appended to,
//! replaced) and the library reads it as before, so a stale CRC is never
//! recorded for bytes the writer did not see.
//!
//! The writer is sequential: it has no `Seek` (a seek would leave the CRC
//! describing bytes in another order than the file's).

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What a closed [`CrcWriter`] saw: the CRC32 and length of everything it
/// wrote, and the file's identity and modification time right after the
/// last byte, to tell later whether the file is still that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Streamed {
    /// CRC32 of the bytes written, in order.
    pub crc32: u32,
    /// Bytes written.
    pub len: u64,
    /// Device and inode of the file.
    pub dev_ino: (u64, u64),
    /// Modification time after the last write, nanoseconds since the epoch.
    pub mtime_ns: i128,
}

impl Streamed {
    /// Whether `md` (the file's metadata now) still describes exactly what
    /// the writer wrote.
    pub fn matches(&self, md: &std::fs::Metadata) -> bool {
        md.is_file()
            && md.len() == self.len
            && (md.dev(), md.ino()) == self.dev_ino
            && mtime_ns(md) == self.mtime_ns
    }
}

fn mtime_ns(md: &std::fs::Metadata) -> i128 {
    i128::from(md.mtime()) * 1_000_000_000 + i128::from(md.mtime_nsec())
}

/// A new file (created or truncated) whose bytes are CRC'd as written.
#[derive(Debug)]
pub struct CrcWriter {
    file: File,
    path: PathBuf,
    hasher: crc32fast::Hasher,
    len: u64,
}

impl CrcWriter {
    /// Create (or truncate) `path`.
    pub fn create(path: &Path) -> io::Result<CrcWriter> {
        Ok(CrcWriter {
            file: File::create(path)?,
            path: path.to_path_buf(),
            hasher: crc32fast::Hasher::new(),
            len: 0,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// fsync the file (data and metadata) before closing it.
    pub fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()?;
        crate::fault::synced(&self.path);
        Ok(())
    }

    /// Close the file and return what was written.
    pub fn finish(mut self) -> io::Result<Streamed> {
        self.file.flush()?;
        let md = self.file.metadata()?;
        Ok(Streamed {
            crc32: self.hasher.finalize(),
            len: self.len,
            dev_ino: (md.dev(), md.ino()),
            mtime_ns: mtime_ns(&md),
        })
    }
}

/// Bytes handed to the kernel in one write before they are CRC'd: the
/// size the library's CRC reads use, small enough that the bytes are still
/// in the CPU's cache when the CRC reads them after the kernel's copy, so
/// the CRC costs no second pass over memory (64 MiB to /dev/shm on this
/// machine: write+fsync then CRC of the whole buffer 0.76 of a raw write,
/// by 256 KiB pieces 0.93; results/checkpoint.md, "The CRC writer by
/// cache-sized pieces").
const PIECE: usize = super::verify::CRC_READ_BYTES;

impl Write for CrcWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        for piece in buf.chunks(PIECE) {
            let n = match self.file.write(piece) {
                Ok(n) => n,
                // What reached the file before the error is reported as
                // written; the caller's next write sees the error again.
                Err(_) if done > 0 => break,
                Err(e) => return Err(e),
            };
            // Only what reached the file counts (a short write is retried
            // by the caller with the rest).
            self.hasher.update(&piece[..n]);
            self.len += n as u64;
            done += n;
            if n < piece.len() {
                break;
            }
        }
        Ok(done)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streamed_crc_is_the_crc_of_the_file_and_goes_stale_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = CrcWriter::create(&p).unwrap();
        let data: Vec<u8> = (0..700_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for chunk in data.chunks(4097) {
            w.write_all(chunk).unwrap();
        }
        // One write larger than a piece: written and CRC'd piece by piece.
        w.write_all(&data).unwrap();
        let data = [&data[..], &data[..]].concat();
        assert_eq!(w.len(), data.len() as u64);
        w.sync_all().unwrap();
        let s = w.finish().unwrap();
        assert_eq!(s.crc32, crc32fast::hash(&data));
        assert_eq!(s.len, data.len() as u64);
        assert!(s.matches(&std::fs::metadata(&p).unwrap()));
        // Appended to: another length.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"x")
            .unwrap();
        assert!(!s.matches(&std::fs::metadata(&p).unwrap()));
        // Replaced by a file of the same length: another inode.
        let q = dir.path().join("g");
        std::fs::write(&q, &data).unwrap();
        std::fs::rename(&q, &p).unwrap();
        assert!(!s.matches(&std::fs::metadata(&p).unwrap()));
    }

    #[test]
    fn an_empty_file_has_the_crc_of_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e");
        let s = CrcWriter::create(&p).unwrap().finish().unwrap();
        assert_eq!((s.crc32, s.len), (crc32fast::hash(&[]), 0));
        assert!(s.matches(&std::fs::metadata(&p).unwrap()));
    }
}
