//! kvtree files (developer guide, "File format").
//!
//! ```text
//! offset size field
//!      0    4 magic 0x951fc3f5           (big-endian, like every integer)
//!      4    2 file type, 1 = hash file
//!      6    2 file version, 1
//!      8    8 file size: the whole file, header to the last byte (CRC included)
//!     16    4 flags: 0x1 = a CRC32 trailer follows the data
//!     20    … packed hash
//!    end    4 CRC32 (zlib) of every byte before it, when flagged
//! ```
//!
//! Facts checked on files written by LLNL's SCR: the CRC flag is 0x1, the
//! size field counts the whole file including the trailer, and the CRC is the
//! standard CRC-32 of every byte before the trailer.
//!
//! Writes are atomic: a temporary file in the same directory is written and
//! fsynced, renamed over the target, and the directory is fsynced. Files that
//! several processes update (halt, index, flush files) go through
//! [`update_locked`], which holds an advisory lock on a sibling `.lock` file
//! for the whole read-modify-write.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{KvTree, UnpackError};

/// Magic number at the start of every kvtree file.
pub const MAGIC: u32 = 0x951f_c3f5;
/// File type of a hash file.
pub const FILE_TYPE_HASH: u16 = 1;
/// Version of the hash file format.
pub const FILE_VERSION: u16 = 1;
/// Flag bit: a CRC32 trailer follows the packed data.
pub const FLAG_CRC32: u32 = 0x1;
/// Bytes in the fixed header.
pub const HEADER_LEN: usize = 20;
/// Largest kvtree file read; metadata files are far smaller, so anything
/// larger is damage, not data.
pub const MAX_FILE_LEN: u64 = 1 << 30;

/// Why a kvtree file could not be read or written. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KvFileError {
    /// The operating system refused an operation on the file.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done ("open", "read", "rename", …).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Fewer bytes than a header (or than a header and the CRC trailer it
    /// announces). The file ends at offset `len`.
    #[error("{path}: offset {len}: truncated: the file ends after {len} byte(s), a kvtree file has at least {HEADER_LEN}")]
    TooShort {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
    },
    /// Larger than any file of its kind can legitimately be (its size, or
    /// the size its header records); not read.
    #[error("{path}: {len} bytes is larger than the {limit}-byte limit for {kind}s: not read (a damaged file or another file in its place; move it aside)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its length (or the length its header records).
        len: u64,
        /// The limit for its kind.
        limit: u64,
        /// The kind of file expected ("halt file", "kvtree file", …).
        kind: &'static str,
    },
    /// Not a regular file (a pipe, a device, a directory): kvtree files are
    /// regular files, and reading a pipe or `/dev/zero` would block or
    /// never end.
    #[error("{path}: is a {what}, not a regular file: not read")]
    NotRegular {
        /// The path.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// The first four bytes are not the kvtree magic number.
    #[error(
        "{path}: offset 0: bad magic {found:#010x}, expected {MAGIC:#010x} (not a kvtree file)"
    )]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// What was found.
        found: u32,
    },
    /// A file type or version this reader does not know.
    #[error("{path}: offset 4: unsupported file type {file_type} version {version} (expected type 1 version 1)")]
    UnsupportedType {
        /// The file.
        path: PathBuf,
        /// File type field.
        file_type: u16,
        /// Version field.
        version: u16,
    },
    /// The size field disagrees with the real size.
    #[error("{path}: offset 8: size field says {recorded} bytes but the file has {actual}")]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// Size field.
        recorded: u64,
        /// Real size.
        actual: u64,
    },
    /// Flag bits this reader does not know.
    #[error("{path}: offset 16: unknown flag bits {flags:#x}")]
    UnknownFlags {
        /// The file.
        path: PathBuf,
        /// The flags field.
        flags: u32,
    },
    /// The CRC32 trailer does not match the bytes before it.
    #[error("{path}: offset {offset}: CRC32 mismatch: trailer {recorded:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// The file.
        path: PathBuf,
        /// Offset of the trailer.
        offset: u64,
        /// Trailer value.
        recorded: u32,
        /// CRC of the bytes before the trailer.
        computed: u32,
    },
    /// The packed hash inside is malformed. `offset` is from the start of the file.
    #[error("{path}: offset {offset}: {source}")]
    Unpack {
        /// The file.
        path: PathBuf,
        /// File offset of the problem.
        offset: u64,
        /// The decoding error (its own offsets are relative to the data).
        source: UnpackError,
    },
}

impl KvFileError {
    /// The file this error is about.
    pub fn path(&self) -> &Path {
        match self {
            KvFileError::Io { path, .. }
            | KvFileError::TooShort { path, .. }
            | KvFileError::TooLarge { path, .. }
            | KvFileError::NotRegular { path, .. }
            | KvFileError::BadMagic { path, .. }
            | KvFileError::UnsupportedType { path, .. }
            | KvFileError::SizeMismatch { path, .. }
            | KvFileError::UnknownFlags { path, .. }
            | KvFileError::CrcMismatch { path, .. }
            | KvFileError::Unpack { path, .. } => path,
        }
    }

    /// The byte offset in the file where the problem was found, for errors
    /// about the file's contents (`None` for I/O errors and oversized files).
    pub fn offset(&self) -> Option<u64> {
        match self {
            KvFileError::Io { .. }
            | KvFileError::TooLarge { .. }
            | KvFileError::NotRegular { .. } => None,
            KvFileError::TooShort { len, .. } => Some(*len),
            KvFileError::BadMagic { .. } => Some(0),
            KvFileError::UnsupportedType { .. } => Some(4),
            KvFileError::SizeMismatch { .. } => Some(8),
            KvFileError::UnknownFlags { .. } => Some(16),
            KvFileError::CrcMismatch { offset, .. } | KvFileError::Unpack { offset, .. } => {
                Some(*offset)
            }
        }
    }

    /// True when the file simply does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, KvFileError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> KvFileError + 'a {
    move |source| KvFileError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Encode `tree` as the bytes of a kvtree file, with a CRC32 trailer when
/// `with_crc` (SCR writes its files with the trailer).
pub fn encode(tree: &KvTree, with_crc: bool) -> Vec<u8> {
    // One walk of the tree: pack, then patch the size field (a separate
    // packed_size walk cost as much as packing for filemaps).
    let mut out = Vec::with_capacity(HEADER_LEN + 4096);
    out.extend_from_slice(&MAGIC.to_be_bytes());
    out.extend_from_slice(&FILE_TYPE_HASH.to_be_bytes());
    out.extend_from_slice(&FILE_VERSION.to_be_bytes());
    let size_at = out.len();
    out.extend_from_slice(&0u64.to_be_bytes());
    let flags = if with_crc { FLAG_CRC32 } else { 0 };
    out.extend_from_slice(&flags.to_be_bytes());
    assert_eq!(out.len(), HEADER_LEN, "header layout");
    tree.pack_into(&mut out);
    let total = out.len() + if with_crc { 4 } else { 0 };
    out[size_at..size_at + 8].copy_from_slice(&(total as u64).to_be_bytes());
    if with_crc {
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    assert_eq!(out.len(), total, "encoded length matches the size field");
    out
}

/// Decode the bytes of a kvtree file; `path` only names the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<KvTree, KvFileError> {
    let p = || path.to_path_buf();
    let len = bytes.len() as u64;
    if bytes.len() < HEADER_LEN {
        return Err(KvFileError::TooShort { path: p(), len });
    }
    let be32 = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
    let be16 = |o: usize| u16::from_be_bytes(bytes[o..o + 2].try_into().expect("2 bytes"));
    let magic = be32(0);
    if magic != MAGIC {
        return Err(KvFileError::BadMagic {
            path: p(),
            found: magic,
        });
    }
    let (file_type, version) = (be16(4), be16(6));
    if file_type != FILE_TYPE_HASH || version != FILE_VERSION {
        return Err(KvFileError::UnsupportedType {
            path: p(),
            file_type,
            version,
        });
    }
    let recorded = u64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if recorded != len {
        return Err(KvFileError::SizeMismatch {
            path: p(),
            recorded,
            actual: len,
        });
    }
    let flags = be32(16);
    if flags & !FLAG_CRC32 != 0 {
        return Err(KvFileError::UnknownFlags { path: p(), flags });
    }
    let data_end = if flags & FLAG_CRC32 != 0 {
        if bytes.len() < HEADER_LEN + 4 {
            return Err(KvFileError::TooShort { path: p(), len });
        }
        let end = bytes.len() - 4;
        let recorded_crc = be32(end);
        let computed = crc32fast::hash(&bytes[..end]);
        if recorded_crc != computed {
            return Err(KvFileError::CrcMismatch {
                path: p(),
                offset: end as u64,
                recorded: recorded_crc,
                computed,
            });
        }
        end
    } else {
        bytes.len()
    };
    KvTree::unpack_exact(&bytes[HEADER_LEN..data_end]).map_err(|source| KvFileError::Unpack {
        path: p(),
        offset: (HEADER_LEN + source.offset()) as u64,
        source,
    })
}

/// What a non-regular file is, for [`KvFileError::NotRegular`].
fn file_kind(ft: fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "named pipe (FIFO)"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else if ft.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Open `path` for reading, refusing anything but a regular file before a
/// byte is read. The open does not block: a FIFO is opened non-blocking,
/// then refused. Returns the file and its length.
fn open_regular(path: &Path) -> Result<(File, u64), KvFileError> {
    open_regular_in(None, path)
}

/// [`open_regular`] below `base`, never through a link below it.
fn open_regular_in(base: Option<&Path>, path: &Path) -> Result<(File, u64), KvFileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = match base.filter(|b| path.starts_with(b)) {
        Some(b) => crate::beneath::open_in(b, path, crate::beneath::How::Read),
        None => OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path),
    }
    .map_err(io_err(path, "open"))?;
    let md = f.metadata().map_err(io_err(path, "stat"))?;
    if !md.is_file() {
        return Err(KvFileError::NotRegular {
            path: path.to_path_buf(),
            what: file_kind(md.file_type()),
        });
    }
    Ok((f, md.len()))
}

/// A file of `kind` of `len` bytes, over its `limit`.
fn too_large(path: &Path, len: u64, limit: u64, kind: &'static str) -> KvFileError {
    KvFileError::TooLarge {
        path: path.to_path_buf(),
        len,
        limit,
        kind,
    }
}

/// Check the fixed header's magic number, type and version, and the size it
/// records against `limit`: the first 20 bytes decide whether the rest is
/// read at all.
fn check_head(
    head: &[u8; HEADER_LEN],
    path: &Path,
    len: u64,
    limit: u64,
    kind: &'static str,
) -> Result<u64, KvFileError> {
    let magic = u32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
    if magic != MAGIC {
        return Err(KvFileError::BadMagic {
            path: path.to_path_buf(),
            found: magic,
        });
    }
    let file_type = u16::from_be_bytes(head[4..6].try_into().expect("2 bytes"));
    let version = u16::from_be_bytes(head[6..8].try_into().expect("2 bytes"));
    if file_type != FILE_TYPE_HASH || version != FILE_VERSION {
        return Err(KvFileError::UnsupportedType {
            path: path.to_path_buf(),
            file_type,
            version,
        });
    }
    let recorded = u64::from_be_bytes(head[8..16].try_into().expect("8 bytes"));
    if recorded > limit && len <= limit {
        // A file of a plausible size whose size field is damaged.
        return Err(KvFileError::SizeMismatch {
            path: path.to_path_buf(),
            recorded,
            actual: len,
        });
    }
    if recorded > limit {
        return Err(too_large(path, recorded, limit, kind));
    }
    Ok(recorded)
}

/// Read a kvtree file (`scr_hash_read`), of at most [`MAX_FILE_LEN`] bytes.
pub fn read(path: impl AsRef<Path>) -> Result<KvTree, KvFileError> {
    read_capped(path, MAX_FILE_LEN, "kvtree file")
}

/// Read a kvtree file of a kind whose files are at most `limit` bytes
/// (`kind` names it in errors). Only a regular file is opened; its header
/// is checked (magic, type, version, recorded size within `limit`) before
/// the rest is read, and no more than the recorded size is ever read.
pub fn read_capped(
    path: impl AsRef<Path>,
    limit: u64,
    kind: &'static str,
) -> Result<KvTree, KvFileError> {
    read_capped_in(None, path.as_ref(), limit, kind)
}

/// [`read_capped`] of a file below `base` (the prefix directory), never
/// through a symbolic link below it.
pub fn read_capped_in(
    base: Option<&Path>,
    path: &Path,
    limit: u64,
    kind: &'static str,
) -> Result<KvTree, KvFileError> {
    let limit = limit.min(MAX_FILE_LEN);
    let (mut f, len) = open_regular_in(base, path)?;
    if len < HEADER_LEN as u64 {
        return Err(KvFileError::TooShort {
            path: path.to_path_buf(),
            len,
        });
    }
    let mut head = [0u8; HEADER_LEN];
    f.read_exact(&mut head).map_err(io_err(path, "read"))?;
    let recorded = check_head(&head, path, len, limit, kind)?;
    if len > limit {
        return Err(too_large(path, len, limit, kind));
    }
    if recorded != len {
        return Err(KvFileError::SizeMismatch {
            path: path.to_path_buf(),
            recorded,
            actual: len,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&head);
    // Read at most one byte past the size: a file growing under us is
    // caught by the size check in decode, never by an unbounded read.
    Read::by_ref(&mut f)
        .take(len + 1 - HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(io_err(path, "read"))?;
    decode(&bytes, path)
}

/// The whole of a regular file below `base` (by name when `base` is
/// `None`) of at most `limit` bytes, for files holding several kvtrees
/// one after another (a split rank2file map): opened as [`read_capped_in`]
/// opens (never through a link below `base`, never a FIFO or device),
/// refused unread when larger than `limit`, and never read past one byte
/// more than its size.
pub fn read_bytes_capped_in(
    base: Option<&Path>,
    path: &Path,
    limit: u64,
    kind: &'static str,
) -> Result<Vec<u8>, KvFileError> {
    let limit = limit.min(MAX_FILE_LEN);
    let (f, len) = open_regular_in(base, path)?;
    if len > limit {
        return Err(too_large(path, len, limit, kind));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err(path, "read"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(path, bytes.len() as u64, limit, kind));
    }
    Ok(bytes)
}

/// A kvtree header read from the front of a file that may go on with
/// payload (redundancy files: the header, then parity or data).
#[derive(Debug, Clone, PartialEq)]
pub struct WithPayload {
    /// The tree of the header.
    pub tree: KvTree,
    /// Bytes of the header (its size field).
    pub header_bytes: u64,
    /// Bytes after the header.
    pub payload_bytes: u64,
}

/// Read the kvtree at the front of a file, stopping at the size its header
/// records; whatever follows is payload, counted but not read. A file
/// shorter than its size field is damaged, as in [`read`]. Only a regular
/// file is opened, and its header (magic first) is checked before more is
/// read.
pub fn read_with_payload(path: impl AsRef<Path>) -> Result<WithPayload, KvFileError> {
    let path = path.as_ref();
    let (mut f, len) = open_regular(path)?;
    let mut head = [0u8; HEADER_LEN];
    if len < HEADER_LEN as u64 {
        return Err(KvFileError::TooShort {
            path: path.to_path_buf(),
            len,
        });
    }
    f.read_exact(&mut head).map_err(io_err(path, "read"))?;
    let recorded = check_head(&head, path, len, MAX_FILE_LEN, "kvtree file")?;
    if recorded > len || recorded < HEADER_LEN as u64 {
        return Err(KvFileError::SizeMismatch {
            path: path.to_path_buf(),
            recorded,
            actual: len,
        });
    }
    let mut bytes = head.to_vec();
    Read::by_ref(&mut f)
        .take(recorded - HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(io_err(path, "read"))?;
    Ok(WithPayload {
        tree: decode(&bytes, path)?,
        header_bytes: recorded,
        payload_bytes: len - recorded,
    })
}

/// Read a kvtree file; a missing file reads as an empty tree.
pub fn read_or_empty(path: impl AsRef<Path>) -> Result<KvTree, KvFileError> {
    read_or_empty_capped(path, MAX_FILE_LEN, "kvtree file")
}

/// [`read_or_empty`] of a file below `base` (the prefix directory), never
/// through a link below it.
pub fn read_or_empty_in(base: &Path, path: &Path) -> Result<KvTree, KvFileError> {
    match read_capped_in(Some(base), path, MAX_FILE_LEN, "kvtree file") {
        Err(e) if e.is_not_found() => Ok(KvTree::new()),
        other => other,
    }
}

/// [`read_or_empty`] for a kind of file of at most `limit` bytes.
pub fn read_or_empty_capped(
    path: impl AsRef<Path>,
    limit: u64,
    kind: &'static str,
) -> Result<KvTree, KvFileError> {
    match read_capped(path, limit, kind) {
        Err(e) if e.is_not_found() => Ok(KvTree::new()),
        other => other,
    }
}

/// Write `tree` to `path` atomically with a CRC32 trailer (`scr_hash_write`).
pub fn write(path: impl AsRef<Path>, tree: &KvTree) -> Result<(), KvFileError> {
    write_bytes_atomic(path.as_ref(), &encode(tree, true))
}

/// [`write`] to a file below `base` (the prefix directory), never through
/// a symbolic link below it, even one swapped in while this runs
/// ([`write_bytes_atomic_in`]).
pub fn write_in(base: &Path, path: &Path, tree: &KvTree) -> Result<(), KvFileError> {
    write_bytes_atomic_in(Some(base), path, &encode(tree, true))
}

/// Replace `path` with `bytes`: temp file, fsync, rename, fsync of the directory.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), KvFileError> {
    write_bytes_atomic_in(None, path, bytes)
}

/// [`write_bytes_atomic`], with the directory holding `path` opened once
/// and the temporary file created, renamed and removed relative to that
/// handle (`openat`, `renameat`, `unlinkat`), so all steps act on one
/// directory. With `base`, that directory is reached from `base` by
/// `beneath`'s walk, never through a link below `base`.
pub fn write_bytes_atomic_in(
    base: Option<&Path>,
    path: &Path,
    bytes: &[u8],
) -> Result<(), KvFileError> {
    use crate::beneath;
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp_name = format!(".{name}.tmp.{}.{}", std::process::id(), unique_suffix());
    let tmp = dir.join(&tmp_name);
    let handle = match base.filter(|b| dir.starts_with(b)) {
        Some(b) => beneath::open_dir_in(b, &dir),
        None => beneath::open_dir(&dir),
    }
    .map_err(io_err(&dir, "open directory"))?;
    let result = (|| {
        let mut f = beneath::create_new_at(&handle, &tmp_name).map_err(io_err(&tmp, "create"))?;
        f.write_all(bytes).map_err(io_err(&tmp, "write"))?;
        f.sync_all().map_err(io_err(&tmp, "fsync"))?;
        drop(f);
        crate::fault::synced(&tmp);
        meta_point(Stage::Synced, &name).map_err(io_err(&tmp, "fsync"))?;
        crate::fault::renaming(&tmp, path);
        beneath::rename_at(&handle, &tmp_name, &name).map_err(io_err(path, "rename"))?;
        meta_point(Stage::Renamed, &name).map_err(io_err(path, "rename"))?;
        beneath::sync_dir_handle(&handle, &dir).map_err(io_err(&dir, "fsync directory"))
    })();
    if result.is_err() {
        let _ = beneath::unlink_at(&handle, &tmp_name);
    }
    result
}

/// Where [`write_bytes_atomic`] is when its injection point is reached.
#[derive(Clone, Copy)]
enum Stage {
    /// The temporary file is written and fsynced, not yet renamed.
    Synced,
    /// Renamed into place; the directory is not yet fsynced.
    Renamed,
}

/// The injection point of a metadata write, named by the kind of file
/// (`meta.<kind>.synced`, `meta.<kind>.renamed`), so a crash-point sweep
/// can kill at each step of each kind of metadata update: the cache's
/// filemaps, the prefix's summary, rank2file maps and index, the flush
/// file, the halt file, the nodes file, and the rest (`meta.other`).
fn meta_point(stage: Stage, name: &str) -> Result<(), io::Error> {
    let kind = if name.starts_with("filemap") {
        "filemap"
    } else if name.starts_with("rank2file") {
        "rank2file"
    } else {
        match name {
            "summary.scr" => "summary",
            "index.scr" => "index",
            "flush.scr" => "flush",
            "halt.scr" => "halt",
            "nodes.scr" => "nodes",
            "transfer.scr" => "transfer",
            _ => "other",
        }
    };
    let hit = match (stage, kind) {
        (Stage::Synced, "filemap") => crate::fault_point!("meta.filemap.synced"),
        (Stage::Renamed, "filemap") => crate::fault_point!("meta.filemap.renamed"),
        (Stage::Synced, "rank2file") => crate::fault_point!("meta.rank2file.synced"),
        (Stage::Renamed, "rank2file") => crate::fault_point!("meta.rank2file.renamed"),
        (Stage::Synced, "summary") => crate::fault_point!("meta.summary.synced"),
        (Stage::Renamed, "summary") => crate::fault_point!("meta.summary.renamed"),
        (Stage::Synced, "index") => crate::fault_point!("meta.index.synced"),
        (Stage::Renamed, "index") => crate::fault_point!("meta.index.renamed"),
        (Stage::Synced, "flush") => crate::fault_point!("meta.flush.synced"),
        (Stage::Renamed, "flush") => crate::fault_point!("meta.flush.renamed"),
        (Stage::Synced, "halt") => crate::fault_point!("meta.halt.synced"),
        (Stage::Renamed, "halt") => crate::fault_point!("meta.halt.renamed"),
        (Stage::Synced, "nodes") => crate::fault_point!("meta.nodes.synced"),
        (Stage::Renamed, "nodes") => crate::fault_point!("meta.nodes.renamed"),
        (Stage::Synced, "transfer") => crate::fault_point!("meta.transfer.synced"),
        (Stage::Renamed, "transfer") => crate::fault_point!("meta.transfer.renamed"),
        (Stage::Synced, _) => crate::fault_point!("meta.other.synced"),
        (Stage::Renamed, _) => crate::fault_point!("meta.other.renamed"),
    };
    hit.map_err(io::Error::from)
}

/// fsync a directory so a rename or creation inside it is durable.
pub fn sync_dir(dir: &Path) -> Result<(), KvFileError> {
    crate::durable::sync_dir(dir).map_err(io_err(dir, "fsync directory"))
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn unique_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // The wall clock's nanoseconds only make names of different processes
    // differ; correctness rests on the lock and the rename.
    let nanos = u64::from(crate::clock::Clock::unix(&crate::clock::SystemClock).subsec_nanos());
    (COUNTER.fetch_add(1, Ordering::Relaxed) << 32) ^ nanos
}

/// The lock file guarding read-modify-write of `path`: `<path>.lock`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    parent_dir(path).join(name)
}

/// An exclusive advisory lock on `<path>.lock`, released on drop.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

impl FileLock {
    /// Block until the exclusive lock for `path` is held.
    pub fn acquire(path: &Path) -> Result<FileLock, KvFileError> {
        FileLock::acquire_in(None, path)
    }

    /// [`FileLock::acquire`] for a file below `base`: the lock file is
    /// opened without passing through a symbolic link below `base`.
    pub fn acquire_in(base: Option<&Path>, path: &Path) -> Result<FileLock, KvFileError> {
        let lp = lock_path(path);
        let file = match base.filter(|b| lp.starts_with(b)) {
            Some(b) => crate::beneath::open_in(b, &lp, crate::beneath::How::Lock),
            None => OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lp),
        }
        .map_err(io_err(&lp, "open lock file"))?;
        file.lock().map_err(io_err(&lp, "lock"))?;
        Ok(FileLock { file })
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// Read `path` (missing = empty), let `f` modify the tree, and write it back
/// atomically, all under the file's exclusive lock (`scr_hash_lock_open_read`
/// + `scr_hash_write_close_unlock`). When `f` fails nothing is written.
pub fn update_locked<R, E>(
    path: impl AsRef<Path>,
    f: impl FnOnce(&mut KvTree) -> Result<R, E>,
) -> Result<R, E>
where
    E: From<KvFileError>,
{
    update_locked_capped(path, (MAX_FILE_LEN, "kvtree file"), f)
}

/// [`update_locked`] for a kind of file of at most `limit.0` bytes
/// (`limit.1` names the kind in errors).
pub fn update_locked_capped<R, E>(
    path: impl AsRef<Path>,
    limit: (u64, &'static str),
    f: impl FnOnce(&mut KvTree) -> Result<R, E>,
) -> Result<R, E>
where
    E: From<KvFileError>,
{
    update_locked_capped_in(None, path.as_ref(), limit, f)
}

/// [`update_locked_capped`] of a file below `base` (the prefix directory):
/// the lock file, the read and the write never pass through a symbolic
/// link below `base`.
pub fn update_locked_capped_in<R, E>(
    base: Option<&Path>,
    path: &Path,
    limit: (u64, &'static str),
    f: impl FnOnce(&mut KvTree) -> Result<R, E>,
) -> Result<R, E>
where
    E: From<KvFileError>,
{
    let _lock = FileLock::acquire_in(base, path)?;
    let mut tree = match read_capped_in(base, path, limit.0, limit.1) {
        Err(e) if e.is_not_found() => KvTree::new(),
        other => other?,
    };
    let r = f(&mut tree)?;
    write_bytes_atomic_in(base, path, &encode(&tree, true))?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KvTree {
        let mut t = KvTree::new();
        t.set_int("VERSION", 1);
        t.set_kv_int("DSET", 3).set_int("COMPLETE", 1);
        t
    }

    #[test]
    fn header_layout() {
        let bytes = encode(&sample(), true);
        assert_eq!(&bytes[0..4], &[0x95, 0x1f, 0xc3, 0xf5]);
        assert_eq!(&bytes[4..8], &[0, 1, 0, 1]);
        assert_eq!(
            u64::from_be_bytes(bytes[8..16].try_into().unwrap()),
            bytes.len() as u64
        );
        assert_eq!(&bytes[16..20], &[0, 0, 0, 1]);
        let end = bytes.len() - 4;
        assert_eq!(
            u32::from_be_bytes(bytes[end..].try_into().unwrap()),
            crc32fast::hash(&bytes[..end])
        );
        assert_eq!(decode(&bytes, Path::new("x")).unwrap(), sample());
        assert_eq!(
            decode(&encode(&sample(), false), Path::new("x")).unwrap(),
            sample()
        );
    }

    #[test]
    fn write_read_roundtrip_and_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("index.scr");
        write(&p, &sample()).unwrap();
        assert_eq!(read(&p).unwrap(), sample());
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("index.scr")]);
    }

    /// A sparse 2 GiB file starting with `head`.
    fn sparse(path: &Path, head: &[u8]) {
        let mut f = File::create(path).unwrap();
        f.write_all(head).unwrap();
        f.set_len(2 << 30).unwrap();
    }

    #[test]
    fn the_header_is_checked_before_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        sparse(&p, b"definitely not a kvtree");
        for e in [read(&p).unwrap_err(), read_with_payload(&p).unwrap_err()] {
            assert!(matches!(e, KvFileError::BadMagic { .. }), "{e:?}");
        }
        // A good header recording 2 GiB: too large, from the header alone.
        let mut head = encode(&KvTree::new(), false);
        head[8..16].copy_from_slice(&(2u64 << 30).to_be_bytes());
        sparse(&p, &head);
        for e in [read(&p).unwrap_err(), read_with_payload(&p).unwrap_err()] {
            assert!(
                matches!(e, KvFileError::TooLarge { len, limit: MAX_FILE_LEN, kind: "kvtree file", .. } if len == 2 << 30),
                "{e:?}"
            );
        }
    }

    #[test]
    fn each_kind_has_its_limit_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("halt.scr");
        let mut t = KvTree::new();
        for i in 0..200 {
            t.set_kv("K", format!("{i:04}"));
        }
        write(&p, &t).unwrap();
        let len = fs::metadata(&p).unwrap().len();
        assert_eq!(read_capped(&p, len, "halt file").unwrap(), t);
        let e = read_capped(&p, len - 1, "halt file").unwrap_err();
        assert!(
            matches!(&e, KvFileError::TooLarge { len: l, limit, kind: "halt file", .. } if *l == len && *limit == len - 1),
            "{e:?}"
        );
        assert!(e.to_string().contains("limit for halt files"), "{e}");
        // update_locked_capped refuses it too, and writes nothing.
        let r = update_locked_capped(&p, (len - 1, "halt file"), |_t: &mut KvTree| {
            Ok::<(), KvFileError>(())
        });
        assert!(matches!(r, Err(KvFileError::TooLarge { .. })), "{r:?}");
        assert_eq!(read(&p).unwrap(), t);
    }

    #[test]
    fn devices_and_fifos_are_refused_without_blocking() {
        for e in [
            read("/dev/zero").unwrap_err(),
            read_with_payload("/dev/zero").unwrap_err(),
        ] {
            assert!(
                matches!(
                    e,
                    KvFileError::NotRegular {
                        what: "character device",
                        ..
                    }
                ),
                "{e:?}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo only creates a node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // No writer: a blocking open would never return.
        let e = read(&fifo).unwrap_err();
        assert!(
            matches!(
                e,
                KvFileError::NotRegular {
                    what: "named pipe (FIFO)",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .ends_with("is a named pipe (FIFO), not a regular file: not read"),
            "{e}"
        );
        assert!(matches!(
            read(dir.path()),
            Err(KvFileError::NotRegular {
                what: "directory",
                ..
            })
        ));
    }

    #[test]
    fn errors_name_file_and_offset() {
        let p = Path::new("/some/halt.scr");
        let mut bytes = encode(&sample(), true);
        bytes[0] ^= 1;
        let e = decode(&bytes, p).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/some/halt.scr: offset 0: bad magic"),
            "{e}"
        );
        let mut bytes = encode(&sample(), true);
        bytes[25] ^= 0x10;
        assert!(matches!(
            decode(&bytes, p),
            Err(KvFileError::CrcMismatch { .. })
        ));
        let bytes = encode(&sample(), true);
        assert!(matches!(
            decode(&bytes[..bytes.len() - 1], p),
            Err(KvFileError::SizeMismatch { .. })
        ));
        assert!(matches!(
            decode(&bytes[..10], p),
            Err(KvFileError::TooShort { .. })
        ));
    }

    #[test]
    fn update_locked_is_read_modify_write() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("halt.scr");
        for i in 0..3 {
            update_locked::<_, KvFileError>(&p, |t| {
                let n = t.get_int("N").unwrap_or(None).unwrap_or(0);
                t.set_int("N", n + 1);
                Ok(i)
            })
            .unwrap();
        }
        assert_eq!(read(&p).unwrap().get_int("N").unwrap(), Some(3));
        let failed: Result<(), KvFileError> = update_locked(&p, |t| {
            t.set_int("N", 99);
            Err(KvFileError::TooShort {
                path: p.clone(),
                len: 0,
            })
        });
        assert!(failed.is_err());
        assert_eq!(read(&p).unwrap().get_int("N").unwrap(), Some(3));
    }

    /// Reads race the same swapper: a directory of the prefix exchanged
    /// with a link to a directory outside it that holds a planted file of
    /// the same name. A read through handles returns the prefix's file or
    /// a refusal, never the planted one; a read by name after the check
    /// returns the planted file in some rounds.
    #[test]
    fn metadata_read_below_a_base_never_passes_a_link_swapped_in_meanwhile() {
        let t = tempfile::tempdir().unwrap();
        let (base, out) = crate::beneath::swap::prefix_with_a_link_out(t.path());
        write(base.join("meta/index.scr"), &sample()).unwrap();
        let mut planted = sample();
        planted.set_int("PLANTED", 1);
        write(out.join("index.scr"), &planted).unwrap();
        assert!(read_capped_in(Some(&base), &base.join("alt/index.scr"), 1 << 20, "t").is_err());
        let path = base.join("meta/index.scr");
        let mut wrong = 0u32;
        let (read, refused) = crate::beneath::swap::race_with_swapper(&base, |i| {
            let r = if i % 2 == 0 {
                read_capped_in(Some(&base), &path, 1 << 20, "t")
            } else {
                read_bytes_capped_in(Some(&base), &path, 1 << 20, "t")
                    .and_then(|b| decode(&b, &path))
            };
            match r {
                Ok(got) if got == sample() => true,
                Ok(_) => {
                    wrong += 1;
                    true
                }
                Err(_) => false,
            }
        });
        assert_eq!(wrong, 0, "read the planted file {wrong} times");
        assert!(
            read > 0 && refused > 0,
            "no race seen: {read} read, {refused} refused"
        );
    }

    /// The prefix's metadata files go through directory handles: a
    /// directory exchanged with a link out of the prefix, without pause,
    /// while the index-like file is updated under its lock and rewritten,
    /// never lets a lock, temporary or metadata file out. With the writes
    /// by path after a check, files land in the link's target.
    #[test]
    fn metadata_written_below_a_base_never_passes_a_link_swapped_in_meanwhile() {
        let t = tempfile::tempdir().unwrap();
        let (base, out) = crate::beneath::swap::prefix_with_a_link_out(t.path());
        // Refused outright when the directory is a link.
        let linked = base.join("alt/index.scr");
        assert!(write_in(&base, &linked, &sample()).is_err());
        assert!(fs::read_dir(&out).unwrap().next().is_none());
        let path = base.join("meta/index.scr");
        let (wrote, refused) = crate::beneath::swap::race_with_swapper(&base, |i| {
            if i % 2 == 0 {
                write_in(&base, &path, &sample()).is_ok()
            } else {
                update_locked_capped_in(Some(&base), &path, (1 << 20, "test"), |t| {
                    t.set_int("N", i);
                    Ok::<(), KvFileError>(())
                })
                .is_ok()
            }
        });
        let leaked: Vec<_> = fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(leaked.is_empty(), "written through the link: {leaked:?}");
        assert!(
            wrote > 0 && refused > 0,
            "no race seen: {wrote} written, {refused} refused"
        );
    }
}
