//! Rank2file map (guide section "Rank2file map" and "Containers"): which
//! rank wrote which file of a dataset on the parallel file system, with
//! sizes, CRCs and container segments. Large maps are split into a tree of
//! files so that no process reads more than [`MAX_RANK2FILE_BYTES`] at once.
//!
//! Two ways to split, [`SplitStyle`]:
//!
//! ```text
//! LLNL SCR 3.1, in .scr/scr.dataset.<id>/ (file names relative to the prefix):
//! rank2file (root)                LEVEL/<n>  RANKS/<ranks>  RANK/<reader>/FILE=.<level>.<rank>, OFFSET
//! rank2file.<level>.<rank>        same, for intermediate levels
//! rank2file.0.<rank>              LEVEL/0, RANKS, RANK/<r>/FILE/<name>
//!
//! this crate's earlier layout, in <dataset dir>/.scr/ (names relative to the dataset dir):
//! rank2file.scr (root)            LEVEL/<n>  RANKS/<ranks>  RANK/<reader>/FILE, OFFSET
//! .scr/rank2file.<level>.<rank>.scr   same, for intermediate levels
//! .scr/rank2file.0.<rank>.scr     RANK2FILE/LEVEL/0, RANKS, RANK/<r>/FILE/<name>/SIZE, CRC…
//! ```

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::{set_opt, Node, Record, RecordError};
use crate::kvtree::file::{self as kvfile, KvFileError, HEADER_LEN, MAX_FILE_LEN};
use crate::kvtree::KvTree;

/// Root file of the rank2file tree of the earlier layout, in the directory
/// given to [`Rank2File::write_split`].
pub const RANK2FILE_ROOT: &str = "rank2file.scr";

/// Root file of LLNL SCR 3.1's rank2file tree, in
/// `.scr/scr.dataset.<id>/`.
pub const RANK2FILE_BASE: &str = "rank2file";

/// Root file of this crate's per-file metadata beside LLNL's rank2file
/// (sizes, CRC32s, container segments; docs/decisions.md): the same
/// tree in the same split, under another name LLNL's tools never open.
pub const FILEMETA_BASE: &str = "filemeta";

/// How a map is split into files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitStyle {
    /// This crate's earlier layout: root [`RANK2FILE_ROOT`], parts
    /// `.scr/rank2file.<level>.<first rank>.scr` referenced by path, leaves
    /// wrapped in `RANK2FILE`.
    Legacy,
    /// LLNL SCR 3.1: root `base`, parts `<base>.<level>.<first rank>`
    /// referenced by the suffix `.<level>.<first rank>`, leaves unwrapped.
    /// With `names_only` each file is a bare name (LLNL's rank2file);
    /// otherwise sizes, CRCs and segments ride along ([`FILEMETA_BASE`]).
    Scr31 {
        /// The root file's name.
        base: &'static str,
        /// Write file names only.
        names_only: bool,
    },
}

impl SplitStyle {
    /// The root file's name.
    pub fn root(self) -> &'static str {
        match self {
            SplitStyle::Legacy => RANK2FILE_ROOT,
            SplitStyle::Scr31 { base, .. } => base,
        }
    }

    /// (file written, reference recorded in the parent) of a part.
    fn part(self, level: i64, first: i64) -> (String, String) {
        match self {
            SplitStyle::Legacy => {
                let n = format!(".scr/rank2file.{level}.{first}.scr");
                (n.clone(), n)
            }
            SplitStyle::Scr31 { base, .. } => (
                format!("{base}.{level}.{first}"),
                format!(".{level}.{first}"),
            ),
        }
    }
}

/// A reference of the form `.<level>.<rank>` (LLNL's): a suffix to the
/// root file's name rather than a path.
fn is_suffix_ref(file: &str) -> bool {
    let mut parts = file.split('.');
    parts.next() == Some("")
        && parts.clone().count() == 2
        && parts.all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Most bytes any one rank2file file holds ("currently 1MB" in the guide).
pub const MAX_RANK2FILE_BYTES: usize = 1 << 20;

/// Deepest tree [`Rank2File::read_split`] follows.
const MAX_LEVEL: i64 = 32;

/// One piece of a file stored in a container (`SEG/<i>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// `FILE`: container file, relative to the dataset directory.
    pub file: String,
    /// `OFFSET`: where the piece starts in the container.
    pub offset_bytes: u64,
    /// `LENGTH`: bytes in the piece.
    pub length_bytes: u64,
}

/// What the map says about one file (`RANK/<r>/FILE/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rank2FileEntry {
    /// `SIZE`: file size in bytes.
    pub size_bytes: Option<u64>,
    /// `CRC`: CRC32 of the contents, when computed.
    pub crc32: Option<u32>,
    /// `NOFETCH`: redundancy data a fetch skips (set by `scr_index` on XOR files).
    pub nofetch: bool,
    /// `SEG/<i>`: container segments, in order; empty without containers.
    pub segments: Vec<Segment>,
    /// `MODE`, `UID`, `GID`, `ATIME_*`, `MTIME_*`: recorded at flush with
    /// SCR_COPY_METADATA=1, restored at fetch.
    pub attrs: Option<super::attrs::FileAttrs>,
}

/// The files of one rank (`RANK/<r>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RankFiles {
    /// `FILES`: how many files the rank wrote (present in the scan hash
    /// and summary; absent from level-0 files written by SCR's flush).
    pub expected_files: Option<u64>,
    /// `FILE/<name>`: files by name relative to the dataset directory.
    pub files: BTreeMap<String, Rank2FileEntry>,
}

/// The whole rank-to-file map of a dataset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rank2File {
    /// `RANKS`: ranks in the job that wrote the dataset.
    pub ranks: u64,
    /// `RANK/<r>`: each rank's files.
    pub rank: BTreeMap<i64, RankFiles>,
}

/// The `SEG/<i>` list under a file's entry, numbered 0, 1, 2, ….
pub(crate) fn read_segments(f: &Node<'_>) -> Result<Vec<Segment>, RecordError> {
    let segs = f.int_keyed_under("SEG")?;
    if segs.iter().enumerate().any(|(i, (k, _))| *k != i as i64) {
        return Err(f.inconsistent("SEG", "segments are not numbered 0, 1, 2, …"));
    }
    segs.iter()
        .map(|(_, s)| {
            Ok(Segment {
                file: s.req_str("FILE")?,
                offset_bytes: s.req_u64("OFFSET")?,
                length_bytes: s.req_u64("LENGTH")?,
            })
        })
        .collect()
}

/// `SEG/<i>/{FILE, OFFSET, LENGTH}` under a file's entry.
pub(crate) fn write_segments(f: &mut KvTree, segments: &[Segment]) {
    for (i, s) in segments.iter().enumerate() {
        let seg = f.set_kv("SEG", i);
        seg.set_str("FILE", &s.file);
        seg.set_val("OFFSET", s.offset_bytes);
        seg.set_val("LENGTH", s.length_bytes);
    }
}

impl RankFiles {
    pub(crate) fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        set_opt(&mut t, "FILES", self.expected_files);
        for (name, e) in &self.files {
            let f = t.set_kv("FILE", name);
            set_opt(f, "SIZE", e.size_bytes);
            if let Some(crc) = e.crc32 {
                f.set_crc32("CRC", crc);
            }
            if e.nofetch {
                f.entry("NOFETCH");
            }
            if let Some(a) = &e.attrs {
                a.write_to(f);
            }
            write_segments(f, &e.segments);
        }
        t
    }

    /// `FILE/<name>` only, as LLNL SCR 3.1's rank2file lists a rank's
    /// files; a file stored in containers keeps its `SEG` list (the
    /// guide's "Containers" example), so the map alone still says where
    /// its bytes are.
    pub(crate) fn names_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        for (name, e) in &self.files {
            let f = t.set_kv("FILE", name);
            write_segments(f, &e.segments);
        }
        t
    }

    pub(crate) fn from_node(n: &Node<'_>) -> Result<Self, RecordError> {
        let mut files = BTreeMap::new();
        for (name, f) in n.keyed_under("FILE") {
            let segments = read_segments(&f)?;
            files.insert(
                name.to_owned(),
                Rank2FileEntry {
                    size_bytes: f.opt_u64("SIZE")?,
                    crc32: f.opt_crc32("CRC")?,
                    nofetch: f.flag("NOFETCH"),
                    segments,
                    attrs: super::attrs::FileAttrs::from_node(&f)?,
                },
            );
        }
        Ok(RankFiles {
            expected_files: n.opt_u64("FILES")?,
            files,
        })
    }
}

impl Rank2File {
    /// `RANKS` and `RANK` as they appear in the scan hash and summary
    /// (`RANK2FILE/…` without `LEVEL`).
    pub(crate) fn body_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        t.set_val("RANKS", self.ranks);
        let r = t.entry("RANK");
        for (rank, files) in &self.rank {
            r.set(rank.to_string(), files.to_tree());
        }
        t
    }

    pub(crate) fn from_body(n: &Node<'_>) -> Result<Self, RecordError> {
        let ranks = n.req_u64("RANKS")?;
        let mut rank = BTreeMap::new();
        for (r, c) in n.int_keyed_under("RANK")? {
            check_rank(n, r, ranks)?;
            rank.insert(r, RankFiles::from_node(&c)?);
        }
        Ok(Rank2File { ranks, rank })
    }

    /// Write the map into `dir` as a tree of files none larger than
    /// `max_file_bytes` (SCR uses [`MAX_RANK2FILE_BYTES`]): leaves
    /// `.scr/rank2file.0.<first rank>.scr`, intermediate levels
    /// `.scr/rank2file.<level>.<first rank>.scr`, root [`RANK2FILE_ROOT`].
    /// Returns every file written, root last.
    pub fn write_split(
        &self,
        dir: &Path,
        max_file_bytes: usize,
    ) -> Result<Vec<PathBuf>, RecordError> {
        self.write_split_as(dir, SplitStyle::Legacy, max_file_bytes)
    }

    /// Write the map into `dir` split as `style` says, no file larger than
    /// `max_file_bytes`. Returns every file written, root last.
    pub fn write_split_as(
        &self,
        dir: &Path,
        style: SplitStyle,
        max_file_bytes: usize,
    ) -> Result<Vec<PathBuf>, RecordError> {
        self.write_split_in(None, dir, style, max_file_bytes)
    }

    /// [`Rank2File::write_split_as`] into a directory below `within` (the
    /// prefix directory) when given: the directory and every file are
    /// reached without passing through a symbolic link below it.
    pub fn write_split_in(
        &self,
        within: Option<&Path>,
        dir: &Path,
        style: SplitStyle,
        max_file_bytes: usize,
    ) -> Result<Vec<PathBuf>, RecordError> {
        let record = Self::RECORD;
        let too_big = |what: String, bytes: usize| RecordError::Inconsistent {
            record,
            path: what,
            problem: format!("needs {bytes} bytes, more than the {max_file_bytes}-byte file limit"),
        };
        let parts_dir = match style {
            SplitStyle::Legacy => dir.join(".scr"),
            SplitStyle::Scr31 { .. } => dir.to_path_buf(),
        };
        match within {
            Some(b) => crate::beneath::create_dir_all_in(b, &parts_dir),
            None => crate::durable::create_dir_all(&parts_dir),
        }
        .map_err(|source| KvFileError::Io {
            path: parts_dir.clone(),
            op: "create directory",
            source,
        })?;
        let mut written = Vec::new();
        // Level 0: pack ranks into leaves.
        let names_only = matches!(
            style,
            SplitStyle::Scr31 {
                names_only: true,
                ..
            }
        );
        let entries: Vec<(i64, KvTree)> = self
            .rank
            .iter()
            .map(|(r, f)| {
                (
                    *r,
                    if names_only {
                        f.names_tree()
                    } else {
                        f.to_tree()
                    },
                )
            })
            .collect();
        let wrap = style == SplitStyle::Legacy;
        let leaf_base = file_len(&leaf_tree(wrap, u64::MAX, std::iter::empty()));
        let mut nodes: Vec<(i64, u64, String)> = Vec::new(); // (first rank, ranks, file)
        for chunk in pack(&entries, leaf_base, max_file_bytes, |(r, t)| {
            r.to_string().len() + 1 + t.packed_size()
        })
        .map_err(|i| {
            too_big(
                format!("RANK/{}", entries[i].0),
                leaf_base + entries[i].1.packed_size(),
            )
        })? {
            let first = entries[chunk.start].0;
            let (name, reference) = style.part(0, first);
            let tree = leaf_tree(
                wrap,
                chunk.len() as u64,
                entries[chunk.clone()].iter().map(|(r, t)| (*r, t)),
            );
            written.push(write_tree(within, dir, &name, &tree, max_file_bytes)?);
            nodes.push((first, chunk.len() as u64, reference));
        }
        // Upper levels until one root remains (the root is at least level 1).
        let mut level = 1i64;
        loop {
            let refs: Vec<(i64, KvTree)> = nodes
                .iter()
                .map(|(first, _, file)| (*first, ref_tree(file)))
                .collect();
            let base = file_len(&upper_tree(level, u64::MAX, std::iter::empty()));
            let chunks = pack(&refs, base, max_file_bytes, |(r, t)| {
                r.to_string().len() + 1 + t.packed_size()
            })
            .map_err(|_| too_big(format!("LEVEL/{level}"), base))?;
            if chunks.len() <= 1 {
                let tree = upper_tree(level, self.ranks, refs.iter().map(|(r, t)| (*r, t)));
                written.push(write_tree(
                    within,
                    dir,
                    style.root(),
                    &tree,
                    max_file_bytes,
                )?);
                return Ok(written);
            }
            if chunks.len() >= nodes.len() || level >= MAX_LEVEL {
                return Err(too_big(format!("LEVEL/{level}"), base + 2 * 64));
            }
            let mut next = Vec::with_capacity(chunks.len());
            for chunk in chunks {
                let first = nodes[chunk.start].0;
                let n: u64 = nodes[chunk.clone()].iter().map(|(_, n, _)| n).sum();
                let (name, reference) = style.part(level, first);
                let tree = upper_tree(level, n, refs[chunk].iter().map(|(r, t)| (*r, t)));
                written.push(write_tree(within, dir, &name, &tree, max_file_bytes)?);
                next.push((first, n, reference));
            }
            nodes = next;
            level += 1;
        }
    }

    /// Read a map written by [`Rank2File::write_split`] (or by SCR) from
    /// `dir`, following the tree from [`RANK2FILE_ROOT`].
    pub fn read_split(dir: &Path) -> Result<Self, RecordError> {
        Self::read_split_named(dir, RANK2FILE_ROOT)
    }

    /// Read a split map whose root is `dir/root` (either style: a part
    /// referenced as `.<level>.<rank>` is `<root>.<level>.<rank>`).
    pub fn read_split_named(dir: &Path, root: &str) -> Result<Self, RecordError> {
        Self::read_split_within(None, dir, root)
    }

    /// [`Rank2File::read_split_named`] of a map below `base` (the prefix
    /// directory): every part is opened through directory handles from
    /// `base` down, never through a link below it, even one swapped in
    /// while the map is read.
    pub fn read_split_in(base: &Path, dir: &Path, root: &str) -> Result<Self, RecordError> {
        Self::read_split_within(Some(base), dir, root)
    }

    fn read_split_within(base: Option<&Path>, dir: &Path, root: &str) -> Result<Self, RecordError> {
        let root_path = dir.join(root);
        let mut out = Rank2File::default();
        let ranks = read_level((base, dir, root), &root_path, 0, None, &mut out)?;
        out.ranks = ranks;
        for r in out.rank.keys() {
            if u64::try_from(*r).map_or(true, |r| r >= ranks) {
                return Err(RecordError::Inconsistent {
                    record: Self::RECORD,
                    path: format!("RANK/{r}"),
                    problem: format!("rank is outside 0..{ranks} (RANKS of the root)"),
                }
                .in_file(&root_path));
            }
        }
        Ok(out)
    }
}

fn check_rank(n: &Node<'_>, r: i64, ranks: u64) -> Result<(), RecordError> {
    if u64::try_from(r).is_ok_and(|r| r < ranks) {
        Ok(())
    } else {
        Err(n.inconsistent("RANK", format!("rank {r} is outside 0..{ranks}")))
    }
}

/// Split `items` greedily into runs whose file (base + item sizes) fits
/// `max`. `Err(i)`: item `i` alone does not fit.
fn pack<T>(
    items: &[T],
    base: usize,
    max: usize,
    size: impl Fn(&T) -> usize,
) -> Result<Vec<std::ops::Range<usize>>, usize> {
    let mut out = Vec::new();
    let (mut start, mut used) = (0, base);
    for (i, item) in items.iter().enumerate() {
        let s = size(item);
        if base + s > max {
            return Err(i);
        }
        if used + s > max {
            out.push(start..i);
            start = i;
            used = base;
        }
        used += s;
    }
    if start < items.len() || items.is_empty() {
        out.push(start..items.len());
    }
    Ok(out)
}

fn file_len(tree: &KvTree) -> usize {
    HEADER_LEN + tree.packed_size() + 4
}

fn leaf_tree<'a>(
    wrap: bool,
    ranks: u64,
    entries: impl Iterator<Item = (i64, &'a KvTree)>,
) -> KvTree {
    let body = upper_tree(0, ranks, entries);
    if !wrap {
        return body;
    }
    let mut t = KvTree::new();
    t.set("RANK2FILE", body);
    t
}

fn upper_tree<'a>(
    level: i64,
    ranks: u64,
    entries: impl Iterator<Item = (i64, &'a KvTree)>,
) -> KvTree {
    let mut t = KvTree::new();
    t.set_int("LEVEL", level);
    t.set_val("RANKS", ranks);
    let r = t.entry("RANK");
    for (rank, e) in entries {
        r.set(rank.to_string(), e.clone());
    }
    t
}

fn ref_tree(file: &str) -> KvTree {
    let mut t = KvTree::new();
    t.set_str("FILE", file);
    t.set_int("OFFSET", 0);
    t
}

fn write_tree(
    base: Option<&Path>,
    dir: &Path,
    name: &str,
    tree: &KvTree,
    max: usize,
) -> Result<PathBuf, RecordError> {
    let bytes = kvfile::encode(tree, true);
    assert!(
        bytes.len() <= max,
        "rank2file part {name} is {} bytes, over {max}",
        bytes.len()
    );
    let path = dir.join(name);
    kvfile::write_bytes_atomic_in(base, &path, &bytes)?;
    Ok(path)
}

/// Reject names that would leave the dataset directory (absolute, `..`,
/// empty).
pub(crate) fn safe_relative(name: &str) -> bool {
    let p = Path::new(name);
    !name.is_empty()
        && p.components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Read the rank2file file at `path` (its part starting at `offset`), add
/// its ranks to `out`, and return its RANKS. `parent_level` bounds the
/// child's level so the walk always terminates.
fn read_level(
    map: MapDir<'_>,
    path: &Path,
    offset: u64,
    parent_level: Option<i64>,
    out: &mut Rank2File,
) -> Result<u64, RecordError> {
    read_level_with(map, path, offset, parent_level, out, None)
}

/// Where a split map's parts are read: the directory below which they
/// must stay (`None`: by name), the map's directory, its root's name.
type MapDir<'a> = (Option<&'a Path>, &'a Path, &'a str);

/// One file (part) of a rank2file tree still to be read: what a
/// distributed reader hands to another process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rank2FilePart {
    /// The file, relative to the map's directory.
    pub file: String,
    /// Byte offset of the part within the file.
    pub offset: u64,
    /// Level of the file that referenced it (the part's level is lower).
    pub parent_level: i64,
}

impl Rank2File {
    /// Read one part of a split map without descending: level-0 ranks are
    /// added to `out`, references to lower levels are returned for other
    /// readers (SCR's distributed rank2file read, at most 1 MB a file).
    /// `part = None` reads the root. Returns the part's `RANKS` and its
    /// children.
    pub fn read_part(
        dir: &Path,
        part: Option<&Rank2FilePart>,
        out: &mut Rank2File,
    ) -> Result<(u64, Vec<Rank2FilePart>), RecordError> {
        Self::read_part_named(dir, RANK2FILE_ROOT, part, out)
    }

    /// [`Rank2File::read_part`] of the map whose root is `dir/root`.
    pub fn read_part_named(
        dir: &Path,
        root: &str,
        part: Option<&Rank2FilePart>,
        out: &mut Rank2File,
    ) -> Result<(u64, Vec<Rank2FilePart>), RecordError> {
        Self::read_part_within((None, dir, root), part, out)
    }

    /// [`Rank2File::read_part_named`] of a map below `base` (the prefix
    /// directory), never through a link below it.
    pub fn read_part_in(
        base: &Path,
        dir: &Path,
        root: &str,
        part: Option<&Rank2FilePart>,
        out: &mut Rank2File,
    ) -> Result<(u64, Vec<Rank2FilePart>), RecordError> {
        Self::read_part_within((Some(base), dir, root), part, out)
    }

    fn read_part_within(
        map: MapDir<'_>,
        part: Option<&Rank2FilePart>,
        out: &mut Rank2File,
    ) -> Result<(u64, Vec<Rank2FilePart>), RecordError> {
        let (_, dir, root) = map;
        let mut children = Vec::new();
        let ranks = match part {
            None => read_level_with(map, &dir.join(root), 0, None, out, Some(&mut children))?,
            Some(p) => {
                if !safe_relative(&p.file) {
                    return Err(RecordError::Inconsistent {
                        record: Self::RECORD,
                        path: "FILE".into(),
                        problem: format!("{:?} is not a path inside the dataset directory", p.file),
                    });
                }
                read_level_with(
                    map,
                    &dir.join(&p.file),
                    p.offset,
                    Some(p.parent_level),
                    out,
                    Some(&mut children),
                )?
            }
        };
        Ok((ranks, children))
    }
}

fn read_level_with(
    map: MapDir<'_>,
    path: &Path,
    offset: u64,
    parent_level: Option<i64>,
    out: &mut Rank2File,
    mut children: Option<&mut Vec<Rank2FilePart>>,
) -> Result<u64, RecordError> {
    let (base, dir, root_name) = map;
    let bytes = kvfile::read_bytes_capped_in(base, path, MAX_FILE_LEN, "rank2file file")?;
    let start = usize::try_from(offset)
        .ok()
        .filter(|o| *o <= bytes.len())
        .ok_or_else(|| {
            RecordError::Inconsistent {
                record: Rank2File::RECORD,
                path: "OFFSET".into(),
                problem: format!("offset {offset} is past the end ({} bytes)", bytes.len()),
            }
            .in_file(path)
        })?;
    let part = &bytes[start..];
    let end = super::embedded_len(part, path)?;
    let tree = kvfile::decode(&part[..end], path)?;
    let body = tree.get("RANK2FILE").unwrap_or(&tree);
    let root = if tree.get("RANK2FILE").is_some() {
        "RANK2FILE"
    } else {
        ""
    };
    let mut n = Node::root(Rank2File::RECORD, body);
    n.set_path(root.to_owned());
    let in_file = |e: RecordError| e.in_file(path);
    let level = n.req_i64("LEVEL").map_err(in_file)?;
    let ranks = n.req_u64("RANKS").map_err(in_file)?;
    if !(0..=MAX_LEVEL).contains(&level) || parent_level.is_some_and(|p| level >= p) {
        return Err(in_file(n.inconsistent(
            "LEVEL",
            format!("level {level} does not fit below {parent_level:?}"),
        )));
    }
    let entries = n.int_keyed_under("RANK").map_err(in_file)?;
    if level == 0 {
        if entries.len() as u64 != ranks && parent_level.is_some() {
            return Err(in_file(n.inconsistent(
                "RANKS",
                format!("says {ranks} but the file lists {}", entries.len()),
            )));
        }
        for (r, c) in entries {
            let files = RankFiles::from_node(&c).map_err(in_file)?;
            if out.rank.insert(r, files).is_some() {
                return Err(in_file(c.inconsistent("", "rank listed twice in the map")));
            }
        }
        return Ok(ranks);
    }
    for (_, c) in entries {
        let mut file = c.req_str("FILE").map_err(in_file)?;
        if is_suffix_ref(&file) {
            file = format!("{root_name}{file}");
        }
        let off = c.opt_u64("OFFSET").map_err(in_file)?.unwrap_or(0);
        if !safe_relative(&file) {
            return Err(in_file(c.inconsistent(
                "FILE",
                format!("{file:?} is not a path inside the dataset directory"),
            )));
        }
        match children.as_deref_mut() {
            Some(c) => c.push(Rank2FilePart {
                file,
                offset: off,
                parent_level: level,
            }),
            None => {
                read_level(map, &dir.join(&file), off, Some(level), out)?;
            }
        }
    }
    Ok(ranks)
}

impl Record for Rank2File {
    const RECORD: &'static str = "rank2file map";

    /// The map as one level-0 file (`RANK2FILE/LEVEL/0`, `RANKS`, `RANK`).
    fn to_tree(&self) -> KvTree {
        let mut body = self.body_tree();
        body.set_int("LEVEL", 0);
        let mut t = KvTree::new();
        t.set("RANK2FILE", body);
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let root = Node::root(Self::RECORD, tree);
        let body = root.req_child("RANK2FILE")?;
        let level = body.req_i64("LEVEL")?;
        if level != 0 {
            return Err(body.inconsistent(
                "LEVEL",
                format!("is {level}; use Rank2File::read_split for a tree"),
            ));
        }
        Rank2File::from_body(&body)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    /// The guide's example level-0 rank2file map.
    const SPEC_LEAF: &str = "
RANK2FILE
  LEVEL
    0
  RANKS
    4
  RANK
    0
      FILE
        rank_0.ckpt
          SIZE
            524294
          CRC
            0x6697d4ef
    1
      FILE
        rank_1.ckpt
          SIZE
            524295
          CRC
            0x28eeb9e
    2
      FILE
        rank_2.ckpt
          SIZE
            524296
          CRC
            0xb6a62246
    3
      FILE
        rank_3.ckpt
          SIZE
            524297
          CRC
            0x213c897a
";

    /// The guide's example root rank2file map.
    const SPEC_ROOT: &str = "
LEVEL
  1
RANKS
  4
RANK
  0
    OFFSET
      0
    FILE
      .scr/rank2file.0.0.scr
";

    /// The guide's container segment example.
    const SPEC_SEG: &str = "
rank_2.ckpt
  SEG
    0
      FILE
        .scr/ctr.1.scr
      OFFSET
        224295
      LENGTH
        75705
    1
      FILE
        .scr/ctr.2.scr
      OFFSET
        0
      LENGTH
        300000
    2
      FILE
        .scr/ctr.3.scr
      OFFSET
        0
      LENGTH
        148591
";

    pub(crate) fn example() -> Rank2File {
        let crcs = [0x6697_d4ef, 0x028e_eb9e, 0xb6a6_2246, 0x213c_897a];
        let mut m = Rank2File {
            ranks: 4,
            ..Rank2File::default()
        };
        for (r, crc) in crcs.into_iter().enumerate() {
            let mut files = RankFiles::default();
            files.files.insert(
                format!("rank_{r}.ckpt"),
                Rank2FileEntry {
                    size_bytes: Some(524_294 + r as u64),
                    crc32: Some(crc),
                    ..Rank2FileEntry::default()
                },
            );
            m.rank.insert(r as i64, files);
        }
        m
    }

    #[test]
    fn matches_the_guide_examples() {
        let spec = tree_from_indented(SPEC_LEAF);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Rank2File::from_tree(&spec).unwrap(), example());

        let segs = vec![
            Segment {
                file: ".scr/ctr.1.scr".into(),
                offset_bytes: 224_295,
                length_bytes: 75_705,
            },
            Segment {
                file: ".scr/ctr.2.scr".into(),
                offset_bytes: 0,
                length_bytes: 300_000,
            },
            Segment {
                file: ".scr/ctr.3.scr".into(),
                offset_bytes: 0,
                length_bytes: 148_591,
            },
        ];
        let mut rf = RankFiles::default();
        rf.files.insert(
            "rank_2.ckpt".into(),
            Rank2FileEntry {
                segments: segs,
                ..Rank2FileEntry::default()
            },
        );
        assert_eq!(
            rf.to_tree().get("FILE").unwrap(),
            &tree_from_indented(SPEC_SEG)
        );
        let t = rf.to_tree();
        assert_eq!(RankFiles::from_node(&Node::root("t", &t)).unwrap(), rf);
    }

    #[test]
    fn small_map_splits_like_the_guide() {
        let dir = tempdir();
        let files = example()
            .write_split(dir.path(), MAX_RANK2FILE_BYTES)
            .unwrap();
        assert_eq!(files.len(), 2);
        let root = kvfile::read(dir.path().join(RANK2FILE_ROOT)).unwrap();
        assert_eq!(root, tree_from_indented(SPEC_ROOT));
        let leaf = kvfile::read(dir.path().join(".scr/rank2file.0.0.scr")).unwrap();
        assert_eq!(leaf, tree_from_indented(SPEC_LEAF));
        assert_eq!(Rank2File::read_split(dir.path()).unwrap(), example());
        // The single-file form too.
        example().write_file(dir.path().join("one.scr")).unwrap();
        assert_eq!(
            Rank2File::read_file(dir.path().join("one.scr")).unwrap(),
            example()
        );
    }

    /// Below the prefix a split map is read through directory handles:
    /// a part reached through a link is refused (naming it) where the
    /// reader by name follows it, and a FIFO planted as a part is refused
    /// as not a regular file instead of blocking the read forever.
    #[test]
    fn a_map_read_below_the_prefix_never_follows_a_link_or_waits_on_a_fifo() {
        let t = tempdir();
        let base = t.path().join("prefix");
        let d = base.join("ckpt.1");
        example().write_split(&d, MAX_RANK2FILE_BYTES).unwrap();
        assert_eq!(
            Rank2File::read_split_in(&base, &d, RANK2FILE_ROOT).unwrap(),
            example()
        );
        // The map's `.scr` moved out and a link left in its place.
        let out = t.path().join("out");
        std::fs::rename(d.join(".scr"), &out).unwrap();
        std::os::unix::fs::symlink(&out, d.join(".scr")).unwrap();
        assert_eq!(Rank2File::read_split(&d).unwrap(), example());
        let e = Rank2File::read_split_in(&base, &d, RANK2FILE_ROOT).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        // A FIFO where the leaf was: a reader by name would wait for a
        // writer that never comes.
        std::fs::remove_file(d.join(".scr")).unwrap();
        std::fs::rename(&out, d.join(".scr")).unwrap();
        let leaf = d.join(".scr/rank2file.0.0.scr");
        std::fs::remove_file(&leaf).unwrap();
        let c = std::ffi::CString::new(leaf.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let (b, dd) = (base.clone(), d.clone());
        std::thread::spawn(move || {
            let _ = tx.send(Rank2File::read_split_in(&b, &dd, RANK2FILE_ROOT).map(|_| ()));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading a map with a FIFO part blocked");
        let e = r.unwrap_err();
        assert!(
            e.to_string().contains("FIFO") || e.to_string().contains("not a regular"),
            "{e}"
        );
    }

    fn big(ranks: u64) -> Rank2File {
        let mut m = Rank2File {
            ranks,
            ..Rank2File::default()
        };
        for r in 0..ranks as i64 {
            let mut files = RankFiles {
                expected_files: Some(2),
                ..RankFiles::default()
            };
            for name in [format!("ckpt/rank_{r}.ckpt"), format!("ckpt/rank_{r}.aux")] {
                files.files.insert(
                    name,
                    Rank2FileEntry {
                        size_bytes: Some(1 << 30),
                        crc32: Some(r as u32 ^ 0x5a5a_5a5a),
                        ..Rank2FileEntry::default()
                    },
                );
            }
            m.rank.insert(r, files);
        }
        m
    }

    #[test]
    fn many_ranks_split_into_files_of_at_most_1mb() {
        let dir = tempdir();
        let m = big(20_000);
        let files = m.write_split(dir.path(), MAX_RANK2FILE_BYTES).unwrap();
        assert!(files.len() > 3, "{} files", files.len());
        for f in &files {
            let len = std::fs::metadata(f).unwrap().len();
            assert!(
                len <= MAX_RANK2FILE_BYTES as u64,
                "{} is {len} bytes",
                f.display()
            );
        }
        assert_eq!(Rank2File::read_split(dir.path()).unwrap(), m);
    }

    #[test]
    fn tiny_limit_builds_several_levels() {
        let dir = tempdir();
        let m = big(300);
        let files = m.write_split(dir.path(), 1024).unwrap();
        let root = kvfile::read(dir.path().join(RANK2FILE_ROOT)).unwrap();
        assert!(root.get_int("LEVEL").unwrap().unwrap() >= 2, "{root}");
        for f in &files {
            assert!(std::fs::metadata(f).unwrap().len() <= 1024);
        }
        assert_eq!(Rank2File::read_split(dir.path()).unwrap(), m);
        // An entry larger than the limit is refused, naming the rank.
        let e = m.write_split(dir.path(), 100).unwrap_err();
        assert!(e.to_string().contains("RANK/0"), "{e}");
    }

    #[test]
    fn reads_llnl_3_1_rank2file() {
        let dir = crate::records::index::tests::llnl_fixture("xor-flushed/.scr/scr.dataset.7");
        let m = Rank2File::read_split_named(&dir, RANK2FILE_BASE).unwrap();
        assert_eq!(m.ranks, 4);
        for r in 0..4i64 {
            let names: Vec<&String> = m.rank[&r].files.keys().collect();
            assert_eq!(names, [&format!("ckpt.7/rank_{r}.ckpt")]);
        }
        // Written back LLNL's way, the files are the ones LLNL wrote.
        let out = tempdir();
        let style = SplitStyle::Scr31 {
            base: RANK2FILE_BASE,
            names_only: true,
        };
        m.write_split_as(out.path(), style, MAX_RANK2FILE_BYTES)
            .unwrap();
        for name in ["rank2file", "rank2file.0.0"] {
            assert_eq!(
                kvfile::read(out.path().join(name)).unwrap(),
                kvfile::read(dir.join(name)).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn scr31_split_with_meta_roundtrips_over_several_levels() {
        let dir = tempdir();
        let m = big(300);
        for names_only in [false, true] {
            let style = SplitStyle::Scr31 {
                base: FILEMETA_BASE,
                names_only,
            };
            let files = m.write_split_as(dir.path(), style, 1024).unwrap();
            let root = kvfile::read(dir.path().join(FILEMETA_BASE)).unwrap();
            let levels = root.get_int("LEVEL").unwrap().unwrap();
            assert!(levels >= if names_only { 1 } else { 2 }, "{root}");
            assert!(files.len() > 2, "split into several parts");
            for f in &files {
                assert!(std::fs::metadata(f).unwrap().len() <= 1024);
                let name = f.file_name().unwrap().to_str().unwrap();
                assert!(name.starts_with(FILEMETA_BASE), "{name}");
            }
            let back = Rank2File::read_split_named(dir.path(), FILEMETA_BASE).unwrap();
            if names_only {
                assert_eq!(back.rank[&7].files.len(), 2);
                assert_eq!(
                    back.rank[&7].files.values().next().unwrap().size_bytes,
                    None
                );
            } else {
                assert_eq!(back, m);
            }
        }
        assert!(is_suffix_ref(".0.12") && !is_suffix_ref(".scr/rank2file.0.1.scr"));
        assert!(!is_suffix_ref(".0.") && !is_suffix_ref("..0") && !is_suffix_ref(".1.2.3"));
    }

    #[test]
    fn reader_rejects_escapes_and_level_loops() {
        let dir = tempdir();
        let mut root = tree_from_indented(SPEC_ROOT);
        root.get_kv_int_mut("RANK", 0)
            .unwrap()
            .set_str("FILE", "../../etc/passwd");
        kvfile::write(dir.path().join(RANK2FILE_ROOT), &root).unwrap();
        let e = Rank2File::read_split(dir.path()).unwrap_err();
        assert!(e.to_string().contains("FILE"), "{e}");
        // A file that points at itself never loops: its level must drop.
        root.get_kv_int_mut("RANK", 0)
            .unwrap()
            .set_str("FILE", RANK2FILE_ROOT);
        kvfile::write(dir.path().join(RANK2FILE_ROOT), &root).unwrap();
        let e = Rank2File::read_split(dir.path()).unwrap_err();
        assert!(e.to_string().contains("LEVEL"), "{e}");
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        let body = t.get_mut("RANK2FILE").unwrap();
        body.get_mut("RANK").unwrap().entry("r9");
        let e = Rank2File::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::NonIntegerKey { path, .. } if path == "RANK2FILE/RANK"),
            "{e}"
        );
        let mut t = example().to_tree();
        let f = t
            .get_mut("RANK2FILE")
            .unwrap()
            .get_kv_int_mut("RANK", 1)
            .unwrap()
            .get_kv_mut("FILE", "rank_1.ckpt")
            .unwrap();
        f.set_val("SIZE", "-524295");
        let e = Rank2File::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == "RANK2FILE/RANK/1/FILE/rank_1.ckpt/SIZE"),
            "{e}"
        );
        let mut t = example().to_tree();
        t.get_mut("RANK2FILE").unwrap().set_val("RANKS", 2);
        assert!(matches!(
            Rank2File::from_tree(&t),
            Err(RecordError::Inconsistent { .. })
        ));
    }
}
