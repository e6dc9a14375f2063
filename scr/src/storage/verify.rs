//! Whole-file integrity in cache: the CRC32 of a file, the check of a
//! cached file against the size and CRC32 recorded at complete, and a
//! durable whole-file write.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::records::meta::Meta;

/// Why a cached file does not match what was recorded for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The meta data says the file was never completed.
    #[error("{}: marked incomplete", path.display())]
    Incomplete {
        /// The file (real path).
        path: PathBuf,
    },
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file (real path).
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Its size differs from the recorded one.
    #[error("{}: size {len}, meta says {recorded:?}", path.display())]
    Size {
        /// The file (real path).
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The recorded length.
        recorded: Option<u64>,
    },
    /// Its CRC32 differs from the recorded one.
    #[error("{}: CRC32 {crc:#x}, meta says {recorded:#x}", path.display())]
    Crc {
        /// The file (real path).
        path: PathBuf,
        /// The CRC32 of its bytes.
        crc: u32,
        /// The recorded CRC32.
        recorded: u32,
    },
}

/// Bytes of each read of [`crc_of_file`]: a buffer that stays in the
/// core's cache while the CRC runs over it.
pub const CRC_READ_BYTES: usize = 256 << 10;

/// CRC32 and length of a file, read front to back through one
/// [`CRC_READ_BYTES`] buffer: the pass adds that buffer to the resident
/// set, never the file. Read rather than mapped: with 4 threads over
/// 64 MiB files in /dev/shm the reads took 0.039–0.040 s against
/// 0.073–0.075 s for 16 MiB mapped windows (populating and unmapping
/// every window; results/checkpoint.md, "SINGLE's CRC read through a
/// buffer", `cargo bench -p benches --bench crc_read`).
pub fn crc_of_file(path: &Path) -> std::io::Result<(u32, u64)> {
    crc_of_open(&mut fs::File::open(path)?)
}

/// [`crc_of_file`] of a file already open (at its start): the bytes of
/// the file that was opened, whatever its name points at by now.
pub fn crc_of_open(f: &mut fs::File) -> std::io::Result<(u32, u64)> {
    let len = f.metadata()?.len();
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; CRC_READ_BYTES];
    let mut n_total = 0u64;
    // Bounded: a file that keeps growing while it is read is cut at twice
    // its length (plus a buffer), and then fails the size check.
    let bound = len.saturating_mul(2).saturating_add(buf.len() as u64);
    while n_total <= bound {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        n_total += n as u64;
    }
    Ok((h.finalize(), n_total))
}

/// Check one cached file against its meta: complete, readable, size and
/// CRC32 as recorded.
pub fn verify_file(real: &Path, meta: &Meta) -> Result<(), VerifyError> {
    let path = || real.to_path_buf();
    if !meta.is_complete() {
        return Err(VerifyError::Incomplete { path: path() });
    }
    let (crc, len) = crc_of_file(real).map_err(|source| VerifyError::Read {
        path: path(),
        source,
    })?;
    if !meta.size_matches(len) {
        return Err(VerifyError::Size {
            path: path(),
            len,
            recorded: meta.size_bytes,
        });
    }
    match meta.crc32 {
        Some(c) if c != crc => Err(VerifyError::Crc {
            path: path(),
            crc,
            recorded: c,
        }),
        _ => Ok(()),
    }
}

/// Check one cached file against its meta without reading it: complete,
/// present, and the size recorded (its CRC32 is left to a later read of
/// the same bytes).
pub fn verify_size(real: &Path, meta: &Meta) -> Result<(), VerifyError> {
    let path = || real.to_path_buf();
    if !meta.is_complete() {
        return Err(VerifyError::Incomplete { path: path() });
    }
    let len = fs::metadata(real)
        .map_err(|source| VerifyError::Read {
            path: path(),
            source,
        })?
        .len();
    if !meta.size_matches(len) {
        return Err(VerifyError::Size {
            path: path(),
            len,
            recorded: meta.size_bytes,
        });
    }
    Ok(())
}

/// Write a whole file and fsync it.
pub fn write_synced(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    f.write_all(data)?;
    f.sync_all()?;
    crate::fault::synced(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crc_of_a_file_of_several_reads_is_the_crc_of_its_bytes() {
        // Two whole buffers and a part, so every read boundary is crossed;
        // an empty file and one of a single partial read too.
        let dir = tempfile::tempdir().unwrap();
        for n in [0, 1, CRC_READ_BYTES - 1, 2 * CRC_READ_BYTES + 12_345] {
            let p = dir.path().join(format!("f{n}"));
            let data: Vec<u8> = (0..n as u64).map(|i| (i ^ (i >> 13)) as u8).collect();
            fs::write(&p, &data).unwrap();
            assert_eq!(
                crc_of_file(&p).unwrap(),
                (crc32fast::hash(&data), n as u64),
                "{n} bytes"
            );
        }
    }
}
