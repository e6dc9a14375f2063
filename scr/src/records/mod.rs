//! SCR's records: typed views of the kvtree files SCR keeps (developer
//! guide, sections "Filemap", "Datasets", "Meta data", "Redundancy
//! descriptors", "XOR file", "Scavenge", "Index file", "Summary file",
//! "Flush file", "Halt file", "Nodes file", "Transfer file").
//!
//! Each record converts to and from a [`KvTree`] with the key names and
//! nesting of the guide ([`Record::to_tree`], [`Record::from_tree`]) and
//! reads and writes its file through [`crate::kvtree::file`]
//! ([`Record::read_file`], [`Record::write_file`]). Readers validate: every
//! problem is a [`RecordError`] naming the record, the key path (`RANK/20/
//! DSET/10/FILES`) and, for files, the file.
//!
//! Fields a reader does not know are kept (`extra`) and written back, so a
//! record written by another SCR version survives a read–modify–write.

use std::path::{Path, PathBuf};

use crate::kvtree::file::{self as kvfile, KvFileError, HEADER_LEN, MAX_FILE_LEN};
use crate::kvtree::KvTree;

pub mod attrs;

/// The hidden metadata directory of a prefix: `<prefix>/.scr` (index,
/// flush file, summaries, maps). Applications may not route files there.
pub const PREFIX_META_DIR: &str = ".scr";
pub mod dataset;
pub mod filemap;
pub mod flush;
pub mod halt;
pub mod index;
pub mod meta;
pub mod nodes;
pub mod rank2file;
pub mod rank_filemap;
pub mod reddesc;
pub mod summary;
pub mod transfer;
pub mod xor_header;

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(crate) mod testutil;

pub use dataset::Dataset;
pub use filemap::{Filemap, MasterFilemap};
pub use flush::{FlushEntry, FlushFile, Location};
pub use halt::Halt;
pub use index::{Index, IndexEntry};
pub use meta::{FileType, Meta};
pub use nodes::Nodes;
pub use rank2file::{Rank2File, Rank2FileEntry, RankFiles, Segment};
pub use rank_filemap::RankFilemap;
pub use reddesc::{CopyType, RedDesc};
pub use summary::Summary;
pub use transfer::{Transfer, TransferCommand, TransferFile, TransferState};
pub use xor_header::{XorHeader, XorMember};

/// Why a record could not be read, validated or written. Messages name the
/// record, the key path inside it and, once read from disk, the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// A field the record cannot do without is absent.
    #[error("{record}: required field {path} is missing")]
    Missing {
        /// Which record, e.g. "dataset descriptor".
        record: &'static str,
        /// Key path of the missing field.
        path: String,
    },
    /// A field's value does not parse as its type.
    #[error("{record}: field {path} has value {value:?}, which is not {expected}")]
    BadValue {
        /// Which record.
        record: &'static str,
        /// Key path of the field.
        path: String,
        /// The text found.
        value: String,
        /// What was expected, e.g. "a non-negative integer".
        expected: &'static str,
    },
    /// A single-valued field holds several values.
    #[error("{record}: field {path} should hold one value but holds {count}")]
    MultipleValues {
        /// Which record.
        record: &'static str,
        /// Key path of the field.
        path: String,
        /// How many values it holds.
        count: usize,
    },
    /// A key that must be an integer (a rank, a dataset id, an index) is not.
    #[error("{record}: key {key:?} under {path} is not an integer")]
    NonIntegerKey {
        /// Which record.
        record: &'static str,
        /// Key path of the parent.
        path: String,
        /// The offending key.
        key: String,
    },
    /// Fields that parse but contradict each other or the format's rules.
    #[error("{record}: {path}: {problem}")]
    Inconsistent {
        /// Which record.
        record: &'static str,
        /// Key path where the contradiction was found.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// A record read from (or written to) a file was invalid; wraps the
    /// cause with the file's name.
    #[error("{file}: {source}")]
    InFile {
        /// The file.
        file: PathBuf,
        /// What was wrong with its contents.
        source: Box<RecordError>,
    },
    /// The kvtree file itself could not be read or written (names the file).
    #[error(transparent)]
    File(#[from] KvFileError),
}

impl RecordError {
    /// Attach the file name to a content error.
    pub fn in_file(self, file: &Path) -> RecordError {
        match self {
            e @ (RecordError::InFile { .. } | RecordError::File(_)) => e,
            e => RecordError::InFile {
                file: file.to_path_buf(),
                source: Box::new(e),
            },
        }
    }

    /// True when the error is a missing file (reading a record that was
    /// never written).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RecordError::File(e) if e.is_not_found())
    }
}

/// A typed SCR record stored as a kvtree.
pub trait Record: Sized {
    /// Name of the record in error messages, e.g. "halt file".
    const RECORD: &'static str;

    /// Largest file of this kind read: a larger one is refused before it
    /// is read (its header is checked first), with a message saying so.
    const MAX_FILE_BYTES: u64 = MAX_FILE_LEN;

    /// The record as a kvtree, keys and nesting as in the developer guide.
    fn to_tree(&self) -> KvTree;

    /// Read and validate the record from a kvtree.
    fn from_tree(tree: &KvTree) -> Result<Self, RecordError>;

    /// Read the record from a kvtree file (`scr_hash_read` followed by the
    /// record's getters). Errors name the file.
    fn read_file(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let tree = kvfile::read_capped(path, Self::MAX_FILE_BYTES, Self::RECORD)?;
        Self::from_tree(&tree).map_err(|e| e.in_file(path))
    }

    /// [`Record::read_file`] of a file below `base` (the prefix
    /// directory), never through a symbolic link below `base`.
    fn read_file_in(base: &Path, path: impl AsRef<Path>) -> Result<Self, RecordError> {
        let path = path.as_ref();
        let tree = kvfile::read_capped_in(Some(base), path, Self::MAX_FILE_BYTES, Self::RECORD)?;
        Self::from_tree(&tree).map_err(|e| e.in_file(path))
    }

    /// Write the record to a kvtree file atomically, with a CRC32 trailer
    /// (`scr_hash_write`).
    fn write_file(&self, path: impl AsRef<Path>) -> Result<(), RecordError> {
        kvfile::write(path.as_ref(), &self.to_tree())?;
        Ok(())
    }

    /// [`Record::write_file`] to a file below `base` (the prefix
    /// directory), never through a symbolic link below `base`
    /// (`kvtree::file::write_in`).
    fn write_file_in(&self, base: &Path, path: impl AsRef<Path>) -> Result<(), RecordError> {
        kvfile::write_in(base, path.as_ref(), &self.to_tree())?;
        Ok(())
    }

    /// Read–modify–write the record's file under its lock
    /// (`scr_hash_lock_open_read` … `scr_hash_write_close_unlock`), for
    /// files several processes update (halt, flush, index). A missing or
    /// empty file starts from `Self::default()`. Nothing is written when
    /// the file's contents are invalid.
    fn update_file<R>(
        path: impl AsRef<Path>,
        f: impl FnOnce(&mut Self) -> R,
    ) -> Result<R, RecordError>
    where
        Self: Default,
    {
        Self::update_file_within(None, path.as_ref(), f)
    }

    /// [`Record::update_file`] of a file below `base` (the prefix
    /// directory): lock, read and write never pass through a symbolic link
    /// below `base`.
    fn update_file_in<R>(
        base: &Path,
        path: impl AsRef<Path>,
        f: impl FnOnce(&mut Self) -> R,
    ) -> Result<R, RecordError>
    where
        Self: Default,
    {
        Self::update_file_within(Some(base), path.as_ref(), f)
    }

    /// [`Record::update_file`], below `base` when there is one.
    fn update_file_within<R>(
        base: Option<&Path>,
        path: &Path,
        f: impl FnOnce(&mut Self) -> R,
    ) -> Result<R, RecordError>
    where
        Self: Default,
    {
        let limit = (Self::MAX_FILE_BYTES, Self::RECORD);
        kvfile::update_locked_capped_in(base, path, limit, |tree: &mut KvTree| {
            let mut rec = if tree.is_empty() {
                Self::default()
            } else {
                Self::from_tree(tree).map_err(|e| e.in_file(path))?
            };
            let r = f(&mut rec);
            *tree = rec.to_tree();
            Ok::<R, RecordError>(r)
        })
    }
}

/// A position inside a record being read: the tree there, its key path and
/// the record's name, so every accessor can report where a problem is.
#[derive(Clone)]
pub(crate) struct Node<'a> {
    record: &'static str,
    path: String,
    tree: &'a KvTree,
}

pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}/{key}")
    }
}

impl<'a> Node<'a> {
    /// The root of a record.
    pub(crate) fn root(record: &'static str, tree: &'a KvTree) -> Self {
        Node {
            record,
            path: String::new(),
            tree,
        }
    }

    /// Give this node the key path `path` (for subtrees read on their own).
    pub(crate) fn set_path(&mut self, path: String) {
        self.path = path;
    }

    pub(crate) fn tree(&self) -> &'a KvTree {
        self.tree
    }

    pub(crate) fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub(crate) fn missing(&self, key: &str) -> RecordError {
        RecordError::Missing {
            record: self.record,
            path: self.path_of(key),
        }
    }

    pub(crate) fn inconsistent(&self, key: &str, problem: impl Into<String>) -> RecordError {
        RecordError::Inconsistent {
            record: self.record,
            path: if key.is_empty() {
                self.path.clone()
            } else {
                self.path_of(key)
            },
            problem: problem.into(),
        }
    }

    fn bad(&self, key: &str, value: &str, expected: &'static str) -> RecordError {
        RecordError::BadValue {
            record: self.record,
            path: self.path_of(key),
            value: value.to_owned(),
            expected,
        }
    }

    /// The single value text under `key`, `None` when the key is absent.
    pub(crate) fn text(&self, key: &str) -> Result<Option<&'a str>, RecordError> {
        let Some(child) = self.tree.get(key) else {
            return Ok(None);
        };
        match child.len() {
            0 => Err(self.bad(key, "", "a value (the key has none)")),
            1 => Ok(child.keys().next()),
            count => Err(RecordError::MultipleValues {
                record: self.record,
                path: self.path_of(key),
                count,
            }),
        }
    }

    fn parsed<T>(
        &self,
        key: &str,
        expected: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, RecordError> {
        match self.text(key)? {
            None => Ok(None),
            Some(t) => parse(t).map(Some).ok_or_else(|| self.bad(key, t, expected)),
        }
    }

    fn required<T>(&self, key: &str, v: Result<Option<T>, RecordError>) -> Result<T, RecordError> {
        v?.ok_or_else(|| self.missing(key))
    }

    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<String>, RecordError> {
        Ok(self.text(key)?.map(str::to_owned))
    }
    pub(crate) fn req_str(&self, key: &str) -> Result<String, RecordError> {
        self.required(key, self.opt_str(key))
    }
    pub(crate) fn opt_i64(&self, key: &str) -> Result<Option<i64>, RecordError> {
        self.parsed(key, "an integer", |t| t.parse().ok())
    }
    pub(crate) fn req_i64(&self, key: &str) -> Result<i64, RecordError> {
        self.required(key, self.opt_i64(key))
    }
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, RecordError> {
        self.parsed(key, "a non-negative integer", |t| t.parse().ok())
    }
    pub(crate) fn req_u64(&self, key: &str) -> Result<u64, RecordError> {
        self.required(key, self.opt_u64(key))
    }
    pub(crate) fn opt_f64(&self, key: &str) -> Result<Option<f64>, RecordError> {
        self.parsed(key, "a finite number", |t| {
            t.parse::<f64>().ok().filter(|v| v.is_finite())
        })
    }
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, RecordError> {
        self.parsed(key, "0 or 1", |t| match t {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
    }
    pub(crate) fn req_bool(&self, key: &str) -> Result<bool, RecordError> {
        self.required(key, self.opt_bool(key))
    }
    /// A CRC32 as SCR writes it (`0x%x`); plain decimal is accepted too.
    pub(crate) fn opt_crc32(&self, key: &str) -> Result<Option<u32>, RecordError> {
        self.parsed(key, "a CRC32 (0x followed by hex digits)", |t| {
            match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(hex) if !hex.is_empty() && hex.len() <= 8 => u32::from_str_radix(hex, 16).ok(),
                Some(_) => None,
                None => t.parse().ok(),
            }
        })
    }
    /// Parse the single value with `parse`, naming `expected` on failure.
    pub(crate) fn opt_with<T>(
        &self,
        key: &str,
        expected: &'static str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, RecordError> {
        self.parsed(key, expected, parse)
    }

    /// True when the flag key is present (SCR's valueless flags: `NOFETCH`).
    pub(crate) fn flag(&self, key: &str) -> bool {
        self.tree.get(key).is_some()
    }

    /// The child under `key`, if present.
    pub(crate) fn child(&self, key: &str) -> Option<Node<'a>> {
        self.tree.get(key).map(|tree| Node {
            record: self.record,
            path: self.path_of(key),
            tree,
        })
    }

    /// The child under `key`, or a [`RecordError::Missing`].
    pub(crate) fn req_child(&self, key: &str) -> Result<Node<'a>, RecordError> {
        self.child(key).ok_or_else(|| self.missing(key))
    }

    /// Children of this node keyed by integers, ascending. A non-integer
    /// key is an error naming it.
    pub(crate) fn int_keyed(&self) -> Result<Vec<(i64, Node<'a>)>, RecordError> {
        let mut out = Vec::with_capacity(self.tree.len());
        for (key, tree) in self.tree {
            let id = key.parse::<i64>().map_err(|_| RecordError::NonIntegerKey {
                record: self.record,
                path: self.path.clone(),
                key: key.clone(),
            })?;
            out.push((
                id,
                Node {
                    record: self.record,
                    path: self.path_of(key),
                    tree,
                },
            ));
        }
        out.sort_by_key(|(id, _)| *id);
        Ok(out)
    }

    /// Integer-keyed children under `key` (empty when `key` is absent).
    pub(crate) fn int_keyed_under(&self, key: &str) -> Result<Vec<(i64, Node<'a>)>, RecordError> {
        match self.child(key) {
            Some(c) => c.int_keyed(),
            None => Ok(Vec::new()),
        }
    }

    /// String-keyed children under `key` (empty when `key` is absent).
    pub(crate) fn keyed_under(&self, key: &str) -> Vec<(&'a str, Node<'a>)> {
        let base = self.path_of(key);
        match self.tree.get(key) {
            Some(t) => t
                .iter()
                .map(|(k, tree)| {
                    (
                        k.as_str(),
                        Node {
                            record: self.record,
                            path: join(&base, k),
                            tree,
                        },
                    )
                })
                .collect(),
            None => Vec::new(),
        }
    }

    /// The keys of this node not in `known`, copied (fields this version
    /// does not interpret, kept so a rewrite does not lose them).
    pub(crate) fn extra(&self, known: &[&str]) -> KvTree {
        let mut out = KvTree::new();
        for (k, v) in self.tree {
            if !known.contains(&k.as_str()) {
                out.set(k.clone(), v.clone());
            }
        }
        out
    }
}

/// Length of the kvtree file at the start of `bytes`, from its size field,
/// bounded by the buffer and [`MAX_FILE_LEN`].
pub(crate) fn embedded_len(bytes: &[u8], path: &Path) -> Result<usize, RecordError> {
    let Some(size) = bytes.get(8..16) else {
        return Err(KvFileError::TooShort {
            path: path.to_path_buf(),
            len: bytes.len() as u64,
        }
        .into());
    };
    let size = u64::from_be_bytes(size.try_into().expect("8 bytes"));
    if size > MAX_FILE_LEN || size < HEADER_LEN as u64 {
        return Err(KvFileError::SizeMismatch {
            path: path.to_path_buf(),
            recorded: size,
            actual: bytes.len() as u64,
        }
        .into());
    }
    // On a full buffer the header cannot extend past its end; a 20-byte
    // probe (read_from) only bounds by MAX_FILE_LEN.
    if bytes.len() > HEADER_LEN && size > bytes.len() as u64 {
        return Err(KvFileError::SizeMismatch {
            path: path.to_path_buf(),
            recorded: size,
            actual: bytes.len() as u64,
        }
        .into());
    }
    Ok(size as usize)
}

/// Write `Some(v)` as a single value; `None` writes nothing.
pub(crate) fn set_opt(tree: &mut KvTree, key: &str, v: Option<impl std::fmt::Display>) {
    if let Some(v) = v {
        tree.set_val(key, v);
    }
}

/// Write a boolean the SCR way, as 0 or 1.
pub(crate) fn set_bool(tree: &mut KvTree, key: &str, v: bool) {
    tree.set_int(key, i64::from(v));
}
