//! kvtree: SCR's "hash" (developer guide, section "Hash").
//!
//! A tree whose every node maps string keys to child trees. Values are
//! stored the SCR way: a field `SIZE = 1024` is the key `SIZE` whose child
//! tree has the single key `1024` with an empty tree below it.
//!
//! Children are kept in a [`BTreeMap`], so iteration, printing and packing
//! are deterministic (sorted by key bytes). Element order in a packed hash
//! carries no meaning (LLNL's SCR writes reverse insertion order), so a
//! reader never depends on it.
//!
//! - [`KvTree::pack`] / [`KvTree::unpack`]: the "Packed hash" binary format.
//! - [`file`](mod@file): the kvtree file format (magic, type, version, size, flags, CRC32).
//! - [`print`](mod@print): the indented form printed by `scr_hash_print`.

use std::collections::btree_map::{self, BTreeMap};
use std::fmt;
use std::str::FromStr;

pub mod file;
pub mod print;

/// Deepest nesting [`KvTree::unpack`] accepts. SCR's own records nest at
/// most about a dozen levels; the bound keeps a hostile file from exhausting
/// the stack.
pub const MAX_DEPTH: usize = 64;

/// A node of SCR's hash: an ordered map from string keys to child trees.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct KvTree {
    children: BTreeMap<String, KvTree>,
}

/// Why a packed hash could not be decoded. Offsets are byte offsets into the
/// buffer given to [`KvTree::unpack`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnpackError {
    /// The buffer ended inside an element count or a key.
    #[error("packed hash truncated at offset {offset}: {needed} more byte(s) needed")]
    Truncated {
        /// Where the missing bytes should have started.
        offset: usize,
        /// How many bytes were still needed.
        needed: usize,
    },
    /// An element count that cannot fit in the bytes that remain (each
    /// element needs at least a NUL and a 4-byte count).
    #[error("element count {count} at offset {offset} exceeds what the remaining {remaining} byte(s) can hold")]
    CountTooLarge {
        /// Offset of the count field.
        offset: usize,
        /// The count read.
        count: u32,
        /// Bytes left after the count field.
        remaining: usize,
    },
    /// A key without a terminating NUL before the end of the buffer.
    #[error("key at offset {offset} has no terminating NUL")]
    KeyNotTerminated {
        /// Offset of the key's first byte.
        offset: usize,
    },
    /// A key that is not valid UTF-8.
    #[error("key at offset {offset} is not valid UTF-8")]
    KeyNotUtf8 {
        /// Offset of the key's first byte.
        offset: usize,
    },
    /// The same key twice in one hash.
    #[error("duplicate key {key:?} at offset {offset}")]
    DuplicateKey {
        /// Offset of the second occurrence.
        offset: usize,
        /// The repeated key.
        key: String,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("hash nested deeper than {max} levels at offset {offset}")]
    TooDeep {
        /// Offset of the count that would exceed the bound.
        offset: usize,
        /// The bound.
        max: usize,
    },
    /// Bytes left over after a complete hash where none were expected.
    #[error("{extra} unexpected byte(s) after the packed hash at offset {offset}")]
    TrailingBytes {
        /// End of the hash.
        offset: usize,
        /// Bytes after it.
        extra: usize,
    },
}

impl UnpackError {
    /// The byte offset, relative to the start of the packed hash, where the
    /// problem was found.
    pub fn offset(&self) -> usize {
        match self {
            UnpackError::Truncated { offset, .. }
            | UnpackError::CountTooLarge { offset, .. }
            | UnpackError::KeyNotTerminated { offset }
            | UnpackError::KeyNotUtf8 { offset }
            | UnpackError::DuplicateKey { offset, .. }
            | UnpackError::TooDeep { offset, .. }
            | UnpackError::TrailingBytes { offset, .. } => *offset,
        }
    }
}

/// A typed field of a kvtree could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FieldError {
    /// The field's value does not parse as the expected type.
    #[error("field {key} has value {value:?}, which is not {expected}")]
    BadValue {
        /// The field's key.
        key: String,
        /// The text found.
        value: String,
        /// What was expected, e.g. "an integer".
        expected: &'static str,
    },
    /// A single-valued field holds several values.
    #[error("field {key} should hold one value but holds {count}")]
    MultipleValues {
        /// The field's key.
        key: String,
        /// How many values it holds.
        count: usize,
    },
    /// A key expected to be an integer (a rank, a dataset id) is not.
    #[error("key {key:?} under {parent} is not an integer")]
    NonIntegerKey {
        /// The parent key, or "&lt;root&gt;" for the top level.
        parent: String,
        /// The offending key.
        key: String,
    },
}

impl KvTree {
    /// An empty tree (`scr_hash_new`).
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the tree has no elements.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// Number of elements (`scr_hash_size`).
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// Iterate over `(key, child)` pairs in key order.
    pub fn iter(&self) -> btree_map::Iter<'_, String, KvTree> {
        self.children.iter()
    }

    /// Iterate over keys in key order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.children.keys().map(String::as_str)
    }

    /// The child tree under `key` (`scr_hash_get`).
    pub fn get(&self, key: &str) -> Option<&KvTree> {
        self.children.get(key)
    }

    /// Mutable child tree under `key`.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut KvTree> {
        self.children.get_mut(key)
    }

    /// Set `key` to `value`, replacing any previous value (`scr_hash_set`).
    /// Returns the stored child.
    pub fn set(&mut self, key: impl Into<String>, value: KvTree) -> &mut KvTree {
        match self.children.entry(key.into()) {
            btree_map::Entry::Occupied(mut e) => {
                e.insert(value);
                e.into_mut()
            }
            btree_map::Entry::Vacant(e) => e.insert(value),
        }
    }

    /// The child under `key`, created empty when missing.
    pub fn entry(&mut self, key: impl Into<String>) -> &mut KvTree {
        self.children.entry(key.into()).or_default()
    }

    /// Remove `key` and return its subtree (`scr_hash_unset`).
    pub fn unset(&mut self, key: &str) -> Option<KvTree> {
        self.children.remove(key)
    }

    /// Remove every element (`scr_hash_unset_all`).
    pub fn clear(&mut self) {
        self.children.clear();
    }

    /// Add the value `val` under `key`, keeping values already there, and
    /// return the (possibly new) tree below `val` (`scr_hash_set_kv`).
    pub fn set_kv(&mut self, key: impl Into<String>, val: impl fmt::Display) -> &mut KvTree {
        self.entry(key).entry(val.to_string())
    }

    /// The tree below `key`/`val` (`scr_hash_get_kv`).
    pub fn get_kv(&self, key: &str, val: &str) -> Option<&KvTree> {
        self.get(key)?.get(val)
    }

    /// Mutable tree below `key`/`val`.
    pub fn get_kv_mut(&mut self, key: &str, val: &str) -> Option<&mut KvTree> {
        self.get_mut(key)?.get_mut(val)
    }

    /// Remove the value `val` from under `key`; removes `key` too when it
    /// becomes empty (`scr_hash_unset_kv`).
    pub fn unset_kv(&mut self, key: &str, val: &str) -> Option<KvTree> {
        let child = self.children.get_mut(key)?;
        let removed = child.unset(val);
        if child.is_empty() {
            self.children.remove(key);
        }
        removed
    }

    /// Set `key` to the single value `val`, replacing earlier values
    /// (`scr_hash_util_set_*`). Returns the tree below the value.
    pub fn set_val(&mut self, key: impl Into<String>, val: impl fmt::Display) -> &mut KvTree {
        let child = self.set(key, KvTree::new());
        child.entry(val.to_string())
    }

    /// The first value stored under `key` (`scr_hash_elem_get_first_val`):
    /// `None` when the key is missing or has no value.
    pub fn val(&self, key: &str) -> Option<&str> {
        self.get(key)?.keys().next()
    }

    /// The single value under `key`, parsed as `T`. Missing key: `Ok(None)`;
    /// several values or an unparsable one: a [`FieldError`].
    pub fn get_parsed<T: FromStr>(
        &self,
        key: &str,
        expected: &'static str,
    ) -> Result<Option<T>, FieldError> {
        let Some(child) = self.get(key) else {
            return Ok(None);
        };
        if child.len() > 1 {
            return Err(FieldError::MultipleValues {
                key: key.to_owned(),
                count: child.len(),
            });
        }
        let Some(text) = child.keys().next() else {
            return Ok(None);
        };
        text.parse().map(Some).map_err(|_| FieldError::BadValue {
            key: key.to_owned(),
            value: text.to_owned(),
            expected,
        })
    }

    /// Set an integer field (`scr_hash_util_set_int`).
    pub fn set_int(&mut self, key: impl Into<String>, v: i64) -> &mut KvTree {
        self.set_val(key, v)
    }

    /// Read an integer field.
    pub fn get_int(&self, key: &str) -> Result<Option<i64>, FieldError> {
        self.get_parsed(key, "an integer")
    }

    /// Set a byte count (`scr_hash_util_set_bytecount`, an unsigned 64-bit value).
    pub fn set_bytecount(&mut self, key: impl Into<String>, v: u64) -> &mut KvTree {
        self.set_val(key, v)
    }

    /// Read a byte count.
    pub fn get_bytecount(&self, key: &str) -> Result<Option<u64>, FieldError> {
        self.get_parsed(key, "a byte count")
    }

    /// Set a CRC32 field, written as SCR does with `0x%x`.
    pub fn set_crc32(&mut self, key: impl Into<String>, crc: u32) -> &mut KvTree {
        self.set_val(key, format_args!("{crc:#x}"))
    }

    /// Read a CRC32 field (`0x` hex as SCR writes it; plain decimal accepted).
    pub fn get_crc32(&self, key: &str) -> Result<Option<u32>, FieldError> {
        let Some(text) = self.get_parsed::<String>(key, "a CRC32")? else {
            return Ok(None);
        };
        let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => text.parse().ok(),
        };
        parsed.map(Some).ok_or(FieldError::BadValue {
            key: key.to_owned(),
            value: text,
            expected: "a CRC32 (0x hex)",
        })
    }

    /// Set a floating-point field. Written in the shortest form that reads
    /// back to the same `f64` (SCR writes `%f`; both parse the same way).
    pub fn set_f64(&mut self, key: impl Into<String>, v: f64) -> &mut KvTree {
        self.set_val(key, v)
    }

    /// Read a floating-point field.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>, FieldError> {
        self.get_parsed(key, "a number")
    }

    /// Set a string field.
    pub fn set_str(&mut self, key: impl Into<String>, v: &str) -> &mut KvTree {
        self.set_val(key, v)
    }

    /// Add an integer value under `key` (`scr_hash_set_kv_int`), keeping the
    /// values already there, and return the tree below it.
    pub fn set_kv_int(&mut self, key: impl Into<String>, v: i64) -> &mut KvTree {
        self.set_kv(key, v)
    }

    /// The tree below `key`/`v` for an integer value (`scr_hash_get_kv_int`).
    pub fn get_kv_int(&self, key: &str, v: i64) -> Option<&KvTree> {
        self.get_kv(key, &v.to_string())
    }

    /// Mutable tree below `key`/`v` for an integer value.
    pub fn get_kv_int_mut(&mut self, key: &str, v: i64) -> Option<&mut KvTree> {
        self.get_kv_mut(key, &v.to_string())
    }

    /// Remove integer value `v` from under `key` (`scr_hash_unset_kv_int`).
    pub fn unset_kv_int(&mut self, key: &str, v: i64) -> Option<KvTree> {
        self.unset_kv(key, &v.to_string())
    }

    /// Merge `other` into `self` recursively: keys missing here are copied,
    /// keys present in both are merged (`scr_hash_merge`).
    pub fn merge(&mut self, other: &KvTree) {
        for (key, theirs) in &other.children {
            match self.children.get_mut(key) {
                Some(ours) => ours.merge(theirs),
                None => {
                    self.children.insert(key.clone(), theirs.clone());
                }
            }
        }
    }

    /// Keys sorted as integers, ascending (`scr_hash_list_int` /
    /// `scr_hash_sort_int`). A key that is not an integer is an error naming
    /// it; `parent` names this tree in that error.
    pub fn list_int(&self, parent: &str) -> Result<Vec<i64>, FieldError> {
        let mut out = Vec::with_capacity(self.len());
        for key in self.keys() {
            let v = key.parse::<i64>().map_err(|_| FieldError::NonIntegerKey {
                parent: parent.to_owned(),
                key: key.to_owned(),
            })?;
            out.push(v);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// Integer keys of the child `key`, ascending; empty when `key` is missing.
    pub fn list_int_under(&self, key: &str) -> Result<Vec<i64>, FieldError> {
        match self.get(key) {
            Some(child) => child.list_int(key),
            None => Ok(Vec::new()),
        }
    }

    /// `(key, child)` pairs with keys sorted as integers, ascending or
    /// descending (`scr_hash_sort_int`). Non-integer keys sort last, by string.
    pub fn sorted_int(&self, descending: bool) -> Vec<(&str, &KvTree)> {
        let mut v: Vec<(&str, &KvTree)> = self.iter().map(|(k, c)| (k.as_str(), c)).collect();
        v.sort_by(|a, b| {
            let (ka, kb) = (a.0.parse::<i64>().ok(), b.0.parse::<i64>().ok());
            let ord = match (ka, kb) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => a.0.cmp(b.0),
            };
            if descending {
                ord.reverse()
            } else {
                ord
            }
        });
        v
    }

    /// `(key, child)` pairs sorted by key as strings, ascending or
    /// descending (`scr_hash_sort`).
    pub fn sorted_str(&self, descending: bool) -> Vec<(&str, &KvTree)> {
        let mut v: Vec<(&str, &KvTree)> = self.iter().map(|(k, c)| (k.as_str(), c)).collect();
        if descending {
            v.reverse();
        }
        v
    }

    /// Size in bytes of [`KvTree::pack`]'s output (`scr_hash_pack_size`).
    pub fn packed_size(&self) -> usize {
        4 + self
            .children
            .iter()
            .map(|(k, c)| k.len() + 1 + c.packed_size())
            .sum::<usize>()
    }

    /// Serialise as a "Packed hash": big-endian u32 count, then each element
    /// as a NUL-terminated key followed by its packed hash.
    ///
    /// # Panics
    /// When a key contains a NUL byte: the format cannot represent it, and
    /// writing it anyway would produce a file that decodes to another tree.
    pub fn pack(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.packed_size());
        self.pack_into(&mut out);
        out
    }

    /// Append the packed form to `out`. Panics like [`KvTree::pack`].
    pub fn pack_into(&self, out: &mut Vec<u8>) {
        let count =
            u32::try_from(self.children.len()).expect("a hash holds fewer than 2^32 elements");
        out.extend_from_slice(&count.to_be_bytes());
        for (key, child) in &self.children {
            // A NUL inside a key would be read back as a shorter key followed
            // by garbage: a CRC-valid file that decodes to a different tree.
            // That silent corruption is worse than stopping, so this is
            // checked in release builds too.
            assert!(
                !key.as_bytes().contains(&0),
                "kvtree key {key:?} contains NUL, which the packed format cannot represent"
            );
            out.extend_from_slice(key.as_bytes());
            out.push(0);
            child.pack_into(out);
        }
    }

    /// Decode a packed hash from the start of `buf`. Returns the tree and
    /// the number of bytes consumed.
    pub fn unpack(buf: &[u8]) -> Result<(KvTree, usize), UnpackError> {
        let mut pos = 0;
        let tree = unpack_at(buf, &mut pos, 0)?;
        Ok((tree, pos))
    }

    /// Decode a packed hash that must span all of `buf`.
    pub fn unpack_exact(buf: &[u8]) -> Result<KvTree, UnpackError> {
        let (tree, used) = Self::unpack(buf)?;
        if used != buf.len() {
            return Err(UnpackError::TrailingBytes {
                offset: used,
                extra: buf.len() - used,
            });
        }
        Ok(tree)
    }
}

/// Smallest packed element: an empty key's NUL plus an empty hash's count.
const MIN_ELEMENT_BYTES: usize = 5;

fn unpack_at(buf: &[u8], pos: &mut usize, depth: usize) -> Result<KvTree, UnpackError> {
    let count_offset = *pos;
    if depth > MAX_DEPTH {
        return Err(UnpackError::TooDeep {
            offset: count_offset,
            max: MAX_DEPTH,
        });
    }
    let Some(count_bytes) = buf.get(*pos..*pos + 4) else {
        return Err(UnpackError::Truncated {
            offset: *pos,
            needed: *pos + 4 - buf.len(),
        });
    };
    let count = u32::from_be_bytes(count_bytes.try_into().expect("4 bytes"));
    *pos += 4;
    let remaining = buf.len() - *pos;
    // Never trust the count for allocation or iteration beyond what the
    // buffer can physically hold.
    if (count as usize) > remaining / MIN_ELEMENT_BYTES {
        return Err(UnpackError::CountTooLarge {
            offset: count_offset,
            count,
            remaining,
        });
    }
    let mut tree = KvTree::new();
    for _ in 0..count {
        let key_offset = *pos;
        let rest = &buf[*pos..];
        let Some(nul) = rest.iter().position(|&b| b == 0) else {
            return Err(UnpackError::KeyNotTerminated { offset: key_offset });
        };
        let key = std::str::from_utf8(&rest[..nul])
            .map_err(|_| UnpackError::KeyNotUtf8 { offset: key_offset })?
            .to_owned();
        *pos += nul + 1;
        let child = unpack_at(buf, pos, depth + 1)?;
        if tree.children.contains_key(&key) {
            return Err(UnpackError::DuplicateKey {
                offset: key_offset,
                key,
            });
        }
        tree.children.insert(key, child);
    }
    Ok(tree)
}

impl fmt::Debug for KvTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.children.iter()).finish()
    }
}

impl fmt::Display for KvTree {
    /// The indented form of `scr_hash_print(hash, 2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print::to_indented(self, 2))
    }
}

impl<'a> IntoIterator for &'a KvTree {
    type Item = (&'a String, &'a KvTree);
    type IntoIter = btree_map::Iter<'a, String, KvTree>;
    fn into_iter(self) -> Self::IntoIter {
        self.children.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> KvTree {
        let mut t = KvTree::new();
        let r0 = t.set_kv_int("RANK", 0);
        r0.set_int("FILES", 2);
        r0.set_kv("FILE", "foo_0.txt").set_bytecount("SIZE", 1024);
        r0.set_kv("FILE", "foo_0.txt").set_int("COMPLETE", 1);
        r0.set_kv("FILE", "bar_0.txt").set_bytecount("SIZE", 2048);
        t
    }

    #[test]
    fn pack_layout_matches_the_guide() {
        let mut t = KvTree::new();
        t.set_val("A", "1");
        // count=1, "A\0", count=1, "1\0", count=0
        assert_eq!(
            t.pack(),
            [0, 0, 0, 1, b'A', 0, 0, 0, 0, 1, b'1', 0, 0, 0, 0, 0]
        );
        assert_eq!(t.packed_size(), 16);
    }

    #[test]
    fn pack_unpack_roundtrip() {
        let t = example();
        let packed = t.pack();
        assert_eq!(packed.len(), t.packed_size());
        assert_eq!(KvTree::unpack_exact(&packed).unwrap(), t);
    }

    #[test]
    fn set_val_replaces_set_kv_adds() {
        let mut t = KvTree::new();
        t.set_kv("K", 1);
        t.set_kv("K", 2);
        assert_eq!(t.get("K").unwrap().len(), 2);
        assert!(matches!(
            t.get_int("K"),
            Err(FieldError::MultipleValues { .. })
        ));
        t.set_int("K", 3);
        assert_eq!(t.get_int("K").unwrap(), Some(3));
        assert_eq!(t.val("K"), Some("3"));
    }

    #[test]
    fn crc_is_written_as_hex() {
        let mut t = KvTree::new();
        t.set_crc32("CRC", 0xdead_beef);
        assert_eq!(t.val("CRC"), Some("0xdeadbeef"));
        assert_eq!(t.get_crc32("CRC").unwrap(), Some(0xdead_beef));
        t.set_val("CRC", "0xzz");
        assert!(t.get_crc32("CRC").is_err());
    }

    #[test]
    fn list_int_sorts_numerically() {
        let mut t = KvTree::new();
        for r in [10, 9, 100, 0] {
            t.set_kv_int("RANK", r);
        }
        assert_eq!(t.list_int_under("RANK").unwrap(), vec![0, 9, 10, 100]);
        t.set_kv("RANK", "x");
        assert!(t.list_int_under("RANK").is_err());
    }

    #[test]
    fn unset_kv_removes_empty_parent() {
        let mut t = KvTree::new();
        t.set_kv_int("DSET", 5);
        assert!(t.unset_kv_int("DSET", 5).is_some());
        assert!(t.get("DSET").is_none());
    }

    #[test]
    fn merge_is_recursive() {
        let mut a = example();
        let mut b = KvTree::new();
        b.set_kv_int("RANK", 1).set_int("FILES", 0);
        b.set_kv_int("RANK", 0).set_kv("FILE", "baz");
        a.merge(&b);
        assert_eq!(a.list_int_under("RANK").unwrap(), vec![0, 1]);
        assert!(a
            .get_kv_int("RANK", 0)
            .unwrap()
            .get_kv("FILE", "baz")
            .is_some());
        assert!(a
            .get_kv_int("RANK", 0)
            .unwrap()
            .get_kv("FILE", "foo_0.txt")
            .is_some());
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        let buf = [0xff, 0xff, 0xff, 0xff, 0, 0];
        assert!(matches!(
            KvTree::unpack(&buf),
            Err(UnpackError::CountTooLarge { offset: 0, .. })
        ));
        assert!(matches!(
            KvTree::unpack(&[0, 0]),
            Err(UnpackError::Truncated {
                offset: 0,
                needed: 2
            })
        ));
        assert!(matches!(
            KvTree::unpack(&[0, 0, 0, 1, b'a', b'b', b'c', b'd', b'e']),
            Err(UnpackError::KeyNotTerminated { offset: 4 })
        ));
        assert!(matches!(
            KvTree::unpack(&[0, 0, 0, 1, 0xff, 0, 0, 0, 0, 0]),
            Err(UnpackError::KeyNotUtf8 { offset: 4 })
        ));
    }

    #[test]
    fn nesting_is_bounded() {
        let mut buf = Vec::new();
        for _ in 0..(MAX_DEPTH + 2) {
            buf.extend_from_slice(&[0, 0, 0, 1, b'k', 0]);
        }
        buf.extend_from_slice(&[0, 0, 0, 0]);
        assert!(matches!(
            KvTree::unpack(&buf),
            Err(UnpackError::TooDeep { .. })
        ));
    }

    #[test]
    #[should_panic(expected = "contains NUL")]
    fn packing_a_nul_in_a_key_stops_instead_of_corrupting() {
        let mut t = KvTree::new();
        t.set_val("FILE", "a\0b");
        t.pack();
    }

    #[test]
    fn duplicate_keys_are_rejected() {
        let buf = [0, 0, 0, 2, b'a', 0, 0, 0, 0, 0, b'a', 0, 0, 0, 0, 0];
        assert!(matches!(
            KvTree::unpack(&buf),
            Err(UnpackError::DuplicateKey { offset: 10, .. })
        ));
    }
}
