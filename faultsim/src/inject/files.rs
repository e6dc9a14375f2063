//! Damaging files: bit flips, truncation, deletion, a zeroed kvtree header,
//! and selecting the files a [`Target`] names.

use std::fs::{self, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{io_err, InjectError, Record, KVTREE_HEADER_LEN, MAX_DEPTH, MAX_FILES};
use crate::plan::{Area, Corruption, Role, Selector, Target};
use crate::seed::Seeded;

pub(super) fn len_of(path: &Path) -> Result<u64, InjectError> {
    Ok(fs::metadata(path).map_err(io_err(path, "stat"))?.len())
}

/// Flip the bits at `bit_offsets` (byte × 8 + bit) in place, fsync.
pub fn flip_bits(path: &Path, bit_offsets: &[u64]) -> Result<Record, InjectError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    let len_bytes = f.metadata().map_err(io_err(path, "stat"))?.len();
    if let Some(&bad) = bit_offsets.iter().find(|&&b| b / 8 >= len_bytes) {
        return Err(InjectError::OffsetOutOfRange {
            path: path.to_path_buf(),
            bit_offset: bad,
            len_bytes,
        });
    }
    for &bit in bit_offsets {
        let mut byte = [0u8];
        f.read_exact_at(&mut byte, bit / 8)
            .map_err(io_err(path, "read"))?;
        byte[0] ^= 1 << (bit % 8);
        f.write_all_at(&byte, bit / 8)
            .map_err(io_err(path, "write"))?;
    }
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::BitFlips {
        path: path.to_path_buf(),
        bit_offsets: bit_offsets.to_vec(),
        len_bytes,
    })
}

/// Flip `count` bits at offsets drawn from stream `stream` of `seeded`.
pub fn flip_random_bits(
    path: &Path,
    count: u32,
    seeded: &Seeded,
    stream: &str,
) -> Result<Record, InjectError> {
    let len = len_of(path)?;
    if len == 0 {
        return Err(InjectError::TooShort {
            path: path.to_path_buf(),
            len_bytes: 0,
            needed: 1,
        });
    }
    flip_bits(path, &seeded.bit_offsets(stream, len, count))
}

/// Cut the file to `to_bytes`.
pub fn truncate(path: &Path, to_bytes: u64) -> Result<Record, InjectError> {
    let len_bytes = len_of(path)?;
    if to_bytes >= len_bytes {
        return Err(InjectError::NotShorter {
            path: path.to_path_buf(),
            len_bytes,
            to_bytes,
        });
    }
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    f.set_len(to_bytes).map_err(io_err(path, "truncate"))?;
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::Truncated {
        path: path.to_path_buf(),
        from_bytes: len_bytes,
        to_bytes,
    })
}

/// Cut the file to `fraction` (in [0, 1)) of its length, rounded down.
pub fn truncate_fraction(path: &Path, fraction: f64) -> Result<Record, InjectError> {
    if !(0.0..1.0).contains(&fraction) {
        return Err(InjectError::Refused {
            path: path.to_path_buf(),
            reason: format!("truncate fraction {fraction} is not in [0, 1)"),
        });
    }
    let len = len_of(path)?;
    // Exact for every length below 2^53; metadata files are far smaller.
    let to = (len as f64 * fraction).floor() as u64;
    truncate(path, to.min(len.saturating_sub(1)))
}

/// Remove a file.
pub fn delete(path: &Path) -> Result<Record, InjectError> {
    let len_bytes = len_of(path)?;
    fs::remove_file(path).map_err(io_err(path, "remove"))?;
    Ok(Record::Deleted {
        path: path.to_path_buf(),
        len_bytes,
    })
}

/// Overwrite the 20-byte kvtree header with zeros (readers then see a bad magic).
pub fn zero_kvtree_header(path: &Path) -> Result<Record, InjectError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io_err(path, "open"))?;
    let len_bytes = f.metadata().map_err(io_err(path, "stat"))?.len();
    if len_bytes < KVTREE_HEADER_LEN as u64 {
        return Err(InjectError::TooShort {
            path: path.to_path_buf(),
            len_bytes,
            needed: KVTREE_HEADER_LEN as u64,
        });
    }
    let mut original = vec![0u8; KVTREE_HEADER_LEN];
    f.read_exact_at(&mut original, 0)
        .map_err(io_err(path, "read"))?;
    f.write_all_at(&[0u8; KVTREE_HEADER_LEN], 0)
        .map_err(io_err(path, "write"))?;
    f.sync_all().map_err(io_err(path, "fsync"))?;
    Ok(Record::ZeroedHeader {
        path: path.to_path_buf(),
        original,
    })
}

/// Apply one corruption to one file; seeded choices come from `stream`.
pub fn corrupt(
    path: &Path,
    how: &Corruption,
    seeded: &Seeded,
    stream: &str,
) -> Result<Record, InjectError> {
    match how {
        Corruption::BitFlips {
            offsets: Some(o), ..
        } => flip_bits(path, o),
        Corruption::BitFlips { count, .. } => {
            flip_random_bits(path, count.unwrap_or(1), seeded, stream)
        }
        Corruption::Truncate {
            to_bytes: Some(n), ..
        } => truncate(path, *n),
        Corruption::Truncate { fraction, .. } => truncate_fraction(path, fraction.unwrap_or(0.5)),
        Corruption::Delete => delete(path),
        Corruption::ZeroKvtreeHeader => zero_kvtree_header(path),
    }
}

/// Files below `root` that `target` selects (by role or glob on the path
/// relative to `root`, and by dataset), sorted; symlinks are not followed.
/// `target.area` and `target.node` say which `root` the caller passes.
pub fn select_files(root: &Path, target: &Target) -> Result<Vec<PathBuf>, InjectError> {
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((dir, depth)) = stack.pop() {
        for entry in fs::read_dir(&dir).map_err(io_err(&dir, "read_dir"))? {
            let entry = entry.map_err(io_err(&dir, "read_dir"))?;
            seen += 1;
            if seen > MAX_FILES {
                return Err(InjectError::Refused {
                    path: root.to_path_buf(),
                    reason: format!("more than {MAX_FILES} entries; select a narrower root"),
                });
            }
            let path = entry.path();
            let kind = entry.file_type().map_err(io_err(&path, "stat"))?;
            if kind.is_dir() && depth < MAX_DEPTH {
                stack.push((path, depth + 1));
            } else if kind.is_file() {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                if target.select.matches(rel) && in_dataset(rel, target.dataset) {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

fn in_dataset(rel: &Path, dataset: Option<u64>) -> bool {
    let Some(id) = dataset else {
        return true;
    };
    let want = format!("scr.dataset.{id}");
    rel.components()
        .any(|c| c.as_os_str().as_bytes() == want.as_bytes())
}

/// Apply a corruption to the files `target` selects below `root`: all of
/// them, or `target.files` picked by the seed. Stream names are
/// `<stream>.pick` and `<stream>.<file index>`.
pub fn corrupt_target(
    root: &Path,
    target: &Target,
    how: &Corruption,
    seeded: &Seeded,
    stream: &str,
) -> Result<Vec<Record>, InjectError> {
    let files = select_files(root, target)?;
    let chosen: Vec<usize> = match target.files {
        Some(k) => seeded.pick_indices(
            &format!("{stream}.pick"),
            files.len(),
            usize::try_from(k).unwrap_or(usize::MAX),
        ),
        None => (0..files.len()).collect(),
    };
    chosen
        .into_iter()
        .map(|i| corrupt(&files[i], how, seeded, &format!("{stream}.{i}")))
        .collect()
}

/// Delete the master filemap (`filemap.scrinfo`) below a control directory.
pub fn delete_master_filemap(control_dir: &Path) -> Result<Vec<Record>, InjectError> {
    let target = Target {
        area: Area::Control,
        node: None,
        dataset: None,
        select: Selector::Role(Role::MasterFilemap),
        files: None,
    };
    let files = select_files(control_dir, &target)?;
    if files.is_empty() {
        return Err(InjectError::Refused {
            path: control_dir.to_path_buf(),
            reason: "no filemap.scrinfo below it".into(),
        });
    }
    files.iter().map(|p| delete(p)).collect()
}
