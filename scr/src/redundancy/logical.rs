//! A member's dataset files seen as one logical file: concatenated in order,
//! zero padded past the end (`scr_read_pad_n()` / `scr_write_pad_n()` in
//! `scr_io.c`), so the XOR and RS layouts can treat every member as having
//! exactly one file of the set's padded length.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::RedundancyError;
use crate::storage::mapped::Mapped;

#[derive(Debug)]
struct Part {
    path: PathBuf,
    /// Offset of the file's first byte in the logical file.
    start: u64,
    size: u64,
    file: File,
    /// Set by [`LogicalFile::open_mapped`]: reads come from here.
    map: Option<Mapped>,
}

/// The logical file over an ordered list of files with recorded sizes. Reads
/// and writes use positioned I/O (`pread`/`pwrite`), so one open handle per
/// file serves any order of pieces.
#[derive(Debug)]
pub struct LogicalFile {
    parts: Vec<Part>,
    len: u64,
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RedundancyError + '_ {
    move |source| RedundancyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl LogicalFile {
    /// Opens existing files for reading, checking each has its recorded size
    /// (the SIZE of its file metadata): a truncated file must not be read as
    /// if zero padded.
    pub fn open<P: AsRef<Path>>(files: &[(P, u64)]) -> Result<Self, RedundancyError> {
        Self::build(files, |path, size| {
            let file = File::open(path).map_err(io_error(path))?;
            let actual = file.metadata().map_err(io_error(path))?.len();
            if actual != size {
                return Err(RedundancyError::FileSize {
                    path: path.to_path_buf(),
                    expected: size,
                    actual,
                });
            }
            Ok(file)
        })
    }

    /// [`LogicalFile::open`], with every file of at least `min_bytes`
    /// mapped read-only ([`crate::storage::mapped`]) so that
    /// [`LogicalFile::crcs`] and the reads after it walk the page cache
    /// once, and [`LogicalFile::bytes`] lends the bytes without copying them.
    pub fn open_mapped<P: AsRef<Path>>(
        files: &[(P, u64)],
        min_bytes: u64,
    ) -> Result<Self, RedundancyError> {
        let mut lf = Self::open(files)?;
        for part in lf.parts.iter_mut().filter(|p| p.size >= min_bytes.max(1)) {
            part.map = Some(Mapped::new(&part.file, part.size).map_err(io_error(&part.path))?);
        }
        Ok(lf)
    }

    /// Creates (or truncates) the files for writing, each set to its
    /// recorded size, as the rebuild of a lost member does before it writes
    /// the recovered logical range with [`LogicalFile::write_at`].
    pub fn create<P: AsRef<Path>>(files: &[(P, u64)]) -> Result<Self, RedundancyError> {
        Self::build(files, |path, size| {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .map_err(io_error(path))?;
            file.set_len(size).map_err(io_error(path))?;
            Ok(file)
        })
    }

    fn build<P: AsRef<Path>>(
        files: &[(P, u64)],
        mut open: impl FnMut(&Path, u64) -> Result<File, RedundancyError>,
    ) -> Result<Self, RedundancyError> {
        let mut parts = Vec::with_capacity(files.len());
        let mut start = 0u64;
        for (path, size) in files {
            let path = path.as_ref();
            let file = open(path, *size)?;
            parts.push(Part {
                path: path.to_path_buf(),
                start,
                size: *size,
                file,
                map: None,
            });
            start = start
                .checked_add(*size)
                .ok_or_else(|| RedundancyError::FileSize {
                    path: path.to_path_buf(),
                    expected: u64::MAX - start,
                    actual: *size,
                })?;
        }
        Ok(LogicalFile { parts, len: start })
    }

    /// Bytes of real data: the sum of the file sizes (before padding).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the files hold no data at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills `buf` with logical bytes `[offset, offset + buf.len())`: file
    /// contents where they exist, zeros past the end (`scr_read_pad_n()`).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), RedundancyError> {
        let end = offset.saturating_add(buf.len() as u64);
        // Past the data: padding. Zero everything first, then read over it.
        let data_end = end.min(self.len);
        if data_end < end {
            let from = data_end.saturating_sub(offset) as usize;
            buf[from..].fill(0);
        }
        for part in self.overlapping(offset, data_end) {
            let (lo, hi) = (offset.max(part.start), data_end.min(part.start + part.size));
            let dst = &mut buf[(lo - offset) as usize..(hi - offset) as usize];
            match &part.map {
                Some(m) => dst.copy_from_slice(
                    &m.bytes()[(lo - part.start) as usize..(hi - part.start) as usize],
                ),
                None => part
                    .file
                    .read_exact_at(dst, lo - part.start)
                    .map_err(io_error(&part.path))?,
            }
        }
        Ok(())
    }

    /// Writes logical bytes `[offset, offset + buf.len())` into the files;
    /// bytes past the end of the data are padding and are dropped
    /// (`scr_write_pad_n()`).
    pub fn write_at(&self, offset: u64, buf: &[u8]) -> Result<(), RedundancyError> {
        let end = offset.saturating_add(buf.len() as u64).min(self.len);
        for part in self.overlapping(offset, end) {
            let (lo, hi) = (offset.max(part.start), end.min(part.start + part.size));
            let src = &buf[(lo - offset) as usize..(hi - offset) as usize];
            part.file
                .write_all_at(src, lo - part.start)
                .map_err(io_error(&part.path))?;
        }
        Ok(())
    }

    /// Flushes every file to stable storage (SCR fsyncs rebuilt files before
    /// marking them complete in the filemap).
    pub fn sync_all(&self) -> Result<(), RedundancyError> {
        for part in &self.parts {
            part.file.sync_all().map_err(io_error(&part.path))?;
            crate::fault::synced(&part.path);
            // A file written by redundancy (a partner's copy at encode, a
            // rebuilt file at restart) is durable, not yet in the filemap.
            crate::fault_point!("redundancy.file.synced")
                .map_err(|e| io_error(&part.path)(e.into()))?;
        }
        Ok(())
    }

    /// Logical bytes `[offset, offset + len)` (zero padded past the end):
    /// borrowed from the mapping when the range lies inside one mapped
    /// file, else read into `scratch`.
    pub fn bytes<'a>(
        &'a self,
        offset: u64,
        len: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], RedundancyError> {
        let end = offset.saturating_add(len as u64);
        let first = self.parts.partition_point(|p| p.start + p.size <= offset);
        // A piece of a member's files is about to be read for redundancy
        // (an encode's or a rebuild's ring, a PARTNER copy's stream): the
        // member's transfers are under way.
        if let Err(e) = crate::fault_point!("redundancy.piece.read") {
            let part = self.parts.get(first).or(self.parts.last());
            let path = part.map(|p| p.path.as_path()).unwrap_or(Path::new(""));
            return Err(io_error(path)(e.into()));
        }
        if let Some(part) = self.parts.get(first) {
            if let Some(m) = &part.map {
                if part.start <= offset && end <= part.start + part.size {
                    let lo = (offset - part.start) as usize;
                    return Ok(&m.bytes()[lo..lo + len]);
                }
            }
        }
        scratch.resize(len, 0);
        self.read_at(offset, scratch)?;
        Ok(scratch)
    }

    /// CRC32 of each file, in order: from the mapping when mapped, else read
    /// in pieces of `piece_bytes`.
    pub fn crcs(&self, piece_bytes: usize) -> Result<Vec<u32>, RedundancyError> {
        let mut buf = Vec::new();
        self.parts
            .iter()
            .map(|part| {
                if let Some(m) = &part.map {
                    return Ok(crc32fast::hash(m.bytes()));
                }
                buf.resize(piece_bytes.max(1), 0);
                let mut h = crc32fast::Hasher::new();
                let mut off = 0u64;
                while off < part.size {
                    let take = (part.size - off).min(buf.len() as u64) as usize;
                    part.file
                        .read_exact_at(&mut buf[..take], off)
                        .map_err(io_error(&part.path))?;
                    h.update(&buf[..take]);
                    off += take as u64;
                }
                Ok(h.finalize())
            })
            .collect()
    }

    /// The files with at least one byte in logical range `[lo, hi)`; found
    /// by binary search so a piece costs O(log files + files touched).
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = &Part> {
        let first = self.parts.partition_point(|p| p.start + p.size <= lo);
        self.parts[first..]
            .iter()
            .take_while(move |p| lo < hi && p.start < hi) // empty or past-the-data range: none
            .filter(|p| p.size > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn reads_as_concatenation_with_zero_padding_and_writes_back(
            contents in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
            offset in 0u64..1200,
            len in 0usize..700,
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let files: Vec<(PathBuf, u64)> = contents
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let path = dir.path().join(format!("rank_{i}.ckpt"));
                    std::fs::write(&path, c).expect("write");
                    (path, c.len() as u64)
                })
                .collect();
            let concatenated: Vec<u8> = contents.concat();
            let logical = LogicalFile::open(&files).expect("open");
            prop_assert_eq!(logical.len(), concatenated.len() as u64);

            let mut got = vec![0xAAu8; len];
            logical.read_at(offset, &mut got).expect("read");
            for (i, b) in got.iter().enumerate() {
                let want = concatenated.get(offset as usize + i).copied().unwrap_or(0);
                prop_assert_eq!(*b, want, "logical byte {}", offset as usize + i);
            }
            // Mapped: the same bytes through read_at and with_bytes, and
            // the same CRCs as read in pieces.
            // Threshold 100: some files mapped, some read.
            let mapped = LogicalFile::open_mapped(&files, 100).expect("open mapped");
            let mut got_mapped = vec![0x55u8; len];
            mapped.read_at(offset, &mut got_mapped).expect("read mapped");
            prop_assert_eq!(&got_mapped, &got);
            let mut scratch = Vec::new();
            let lent = mapped.bytes(offset, len, &mut scratch).expect("bytes");
            prop_assert_eq!(lent, &got[..]);
            let want: Vec<u32> = contents.iter().map(|c| crc32fast::hash(c)).collect();
            prop_assert_eq!(mapped.crcs(5).expect("crcs"), want.clone());
            prop_assert_eq!(logical.crcs(5).expect("crcs"), want);

            // Write the whole padded range into fresh files: the data comes
            // back, the padding is dropped.
            let copies: Vec<(PathBuf, u64)> = files
                .iter()
                .map(|(p, s)| (p.with_extension("copy"), *s))
                .collect();
            let out = LogicalFile::create(&copies).expect("create");
            let mut padded = concatenated.clone();
            padded.resize(concatenated.len() + 17, 0);
            for piece in padded.chunks(7).enumerate() {
                out.write_at(piece.0 as u64 * 7, piece.1).expect("write");
            }
            out.sync_all().expect("sync");
            for ((copy, _), original) in copies.iter().zip(&contents) {
                prop_assert_eq!(&std::fs::read(copy).expect("read back"), original);
            }
        }
    }

    #[test]
    fn a_file_shorter_than_its_metadata_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rank_0.ckpt");
        std::fs::write(&path, b"abc").expect("write");
        let err = LogicalFile::open(&[(&path, 4)]).expect_err("size differs");
        assert!(
            matches!(
                err,
                RedundancyError::FileSize {
                    expected: 4,
                    actual: 3,
                    ..
                }
            ),
            "{err}"
        );
        let err = LogicalFile::open(&[(dir.path().join("missing"), 0)]).expect_err("no file");
        assert!(matches!(err, RedundancyError::Io { .. }), "{err}");
    }
}
