//! Containers (developer guide "Containers", `scr_flush_identify_containers`,
//! `scr_flush_create_containers`): with SCR_USE_CONTAINERS=1 a flush packs
//! the application files of a dataset into container files
//! `ctr.<id>.scr` (ids from 0) in the dataset's metadata directory, each at
//! most SCR_CONTAINER_SIZE bytes. The dataset's bytes form one stream:
//! files of one node are contiguous (a sum on the node communicator, an
//! exclusive scan across node leaders, a scan within the node), each
//! rank's files follow one another, and a file that does not fit in the
//! rest of a container spills over into the next. The rank2file map
//! records each file's pieces as `SEG/<i>/{FILE, OFFSET, LENGTH}`; `FILE`
//! is relative to the directory the map's keys are relative to
//! ([`super::layout::Placement::key_base`]).
//!
//! A fetch reads a file back from its segments; a segment that is missing
//! or short is a [`CopyError::Container`] naming the container and offset,
//! and the CRC32 of the whole file is checked as for a plain file.

use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use std::os::unix::fs::OpenOptionsExt;

use super::{io_fail, watchdog, CopyError};
use crate::beneath::{self, How};
use crate::comm::{Comm, CommResult, ReduceOp};
use crate::durable;
use crate::records::Segment;

/// The name of container `id`: `ctr.<id>.scr`.
pub fn container_name(id: u64) -> String {
    format!("ctr.{id}.scr")
}

/// Whether `name` is a container's name (`ctr.<digits>.scr`).
pub fn is_container_name(name: &str) -> bool {
    name.strip_prefix("ctr.")
        .and_then(|r| r.strip_suffix(".scr"))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// `<dir>/ctr.<id>.scr` (`dir` relative to the map's key base; empty for
/// the base itself).
fn container_rel(dir: &str, id: u64) -> String {
    if dir.is_empty() || dir == "." {
        container_name(id)
    } else {
        format!("{dir}/{}", container_name(id))
    }
}

/// The segments of a file of `length` bytes at byte `offset` of the
/// dataset's stream, with containers of `container_bytes` (at least 1).
/// A file of 0 bytes has one segment of length 0 (so the map still says
/// it is in a container); it needs no container to exist.
pub fn segments_of(offset: u64, length: u64, container_bytes: u64, dir: &str) -> Vec<Segment> {
    let cb = container_bytes.max(1);
    if length == 0 {
        return vec![Segment {
            file: container_rel(dir, offset / cb),
            offset_bytes: offset % cb,
            length_bytes: 0,
        }];
    }
    let mut out = Vec::new();
    let (mut off, mut left) = (offset, length);
    while left > 0 {
        let within = off % cb;
        let n = (cb - within).min(left);
        out.push(Segment {
            file: container_rel(dir, off / cb),
            offset_bytes: within,
            length_bytes: n,
        });
        off += n;
        left -= n;
    }
    out
}

/// This rank's share of a dataset packed into containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// Where this rank's first byte goes in the dataset's stream.
    pub offset_bytes: u64,
    /// Bytes of the whole dataset (every rank).
    pub total_bytes: u64,
    /// The segments of each of this rank's files, in the order given.
    pub files: Vec<Vec<Segment>>,
    /// Containers this rank creates (those where one of its segments
    /// starts at offset 0), relative to the key base.
    pub create: Vec<String>,
}

/// Sum of `v` over `comm`, as `u64`.
fn sum_u64(comm: &dyn Comm, v: u64) -> CommResult<u64> {
    let mut x = [i64::try_from(v).unwrap_or(i64::MAX)];
    comm.allreduce_i64(&mut x, ReduceOp::Sum)?;
    Ok(u64::try_from(x[0]).unwrap_or(0))
}

/// Sum of the values of ranks before this one in `comm` (an exclusive
/// scan).
fn exclusive_scan(comm: &dyn Comm, v: u64) -> CommResult<u64> {
    let all = comm.allgather_bytes(&v.to_be_bytes())?;
    Ok(all
        .iter()
        .take(comm.rank())
        .map(|b| u64::from_be_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
        .sum())
}

/// Plan where this rank's files (of `sizes` bytes, in order) go
/// (`scr_flush_identify_containers`): the node's total by a reduction on
/// `node`, the node's offset by a scan across the node leaders (rank 0 of
/// each `node`, ordered by their rank in `world`), this rank's by a scan
/// within `node`. Collective over `world` and `node`.
pub fn plan(
    world: &dyn Comm,
    node: &dyn Comm,
    sizes: &[u64],
    container_bytes: u64,
    dir: &str,
) -> CommResult<ContainerPlan> {
    let mine: u64 = sizes.iter().sum();
    let total_bytes = sum_u64(world, mine)?;
    let node_total = sum_u64(node, mine)?;
    let leader = node.rank() == 0;
    let across = world.split(leader.then_some(0), world.rank() as i64)?;
    let mut node_offset = Vec::new();
    if let Some(c) = &across {
        node_offset = exclusive_scan(c.as_ref(), node_total)?
            .to_be_bytes()
            .to_vec();
    }
    node.bcast_bytes(0, &mut node_offset)?;
    let node_offset = u64::from_be_bytes(node_offset.as_slice().try_into().unwrap_or([0; 8]));
    let offset_bytes = node_offset + exclusive_scan(node, mine)?;
    let mut files = Vec::with_capacity(sizes.len());
    let mut create = Vec::new();
    let mut off = offset_bytes;
    for &s in sizes {
        let segs = segments_of(off, s, container_bytes, dir);
        for seg in &segs {
            if seg.offset_bytes == 0 && seg.length_bytes > 0 {
                create.push(seg.file.clone());
            }
        }
        files.push(segs);
        off += s;
    }
    Ok(ContainerPlan {
        offset_bytes,
        total_bytes,
        files,
        create,
    })
}

/// Create (and truncate) the containers `rels` below `base`
/// (`scr_flush_create_containers`), fsynced, with their directory.
/// Nothing below `within` (the prefix directory) is reached through a link.
pub(crate) fn create_containers(
    within: &Path,
    base: &Path,
    rels: &[String],
) -> Result<(), CopyError> {
    for rel in rels {
        let p = base.join(rel);
        let f = beneath::open_in(within, &p, How::Create)
            .map_err(|e| io_fail("create container", &p, e))?;
        f.sync_all()
            .map_err(|e| io_fail("fsync container", &p, e))?;
        crate::fault::synced(&p);
    }
    // The containers' names, durable before the map names them.
    let paths: Vec<PathBuf> = rels.iter().map(|r| base.join(r)).collect();
    durable::sync_parents(paths.iter().map(|p| p.as_path()))
        .map_err(|(d, e)| io_fail("fsync directory", &d, e))
}

/// Remove every container file in `dir` (left by an earlier flush of the
/// same directory), never through a link below `within` (the prefix
/// directory). Missing directory: nothing to do.
pub(crate) fn remove_containers(within: &Path, dir: &Path) -> std::io::Result<()> {
    let names = match beneath::read_dir_in(within, dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for name in names {
        if name.to_str().is_some_and(is_container_name) {
            beneath::remove_file_in(within, &dir.join(name))?;
        }
    }
    Ok(())
}

/// A segment with its container's real path.
#[derive(Debug, Clone)]
pub(crate) struct SegPath {
    /// The container file.
    pub path: PathBuf,
    /// The segment as the map records it.
    pub seg: Segment,
}

/// The segments of `segs` resolved below `base`.
pub(crate) fn resolve(base: &Path, segs: &[Segment]) -> Vec<SegPath> {
    segs.iter()
        .map(|s| SegPath {
            path: base.join(&s.file),
            seg: s.clone(),
        })
        .collect()
}

/// Why the containers below `base` do not hold every segment of a file of
/// `size` bytes (the lengths must add up to it, each container be there,
/// inside `base`, and long enough); `None` when they do. Reads no data: a
/// fetch checks the CRC32 as it reads.
pub(crate) fn segments_problem(base: &Path, segs: &[Segment], size: u64) -> Option<String> {
    let total = segs
        .iter()
        .try_fold(0u64, |t, s| t.checked_add(s.length_bytes));
    if total != Some(size) {
        return Some(format!(
            "its segments hold {} bytes, the file has {size}",
            total.map_or_else(|| "more than 2^64".to_owned(), |t| t.to_string())
        ));
    }
    for s in segs.iter().filter(|s| s.length_bytes > 0) {
        if !crate::records::rank2file::safe_relative(&s.file) {
            return Some(format!(
                "container {:?}: not a path inside the directory",
                s.file
            ));
        }
        let end = s.offset_bytes.saturating_add(s.length_bytes);
        match fs::metadata(base.join(&s.file)) {
            Err(e) => return Some(format!("container {}: {e}", s.file)),
            Ok(md) if !md.is_file() => return Some(format!("container {}: not a file", s.file)),
            Ok(md) if md.len() < end => {
                return Some(format!(
                    "container {} has {} bytes, a segment ends at {end}",
                    s.file,
                    md.len()
                ))
            }
            Ok(_) => {}
        }
    }
    None
}

/// Which way a copy goes through containers.
#[derive(Debug, Clone)]
pub(crate) enum Packing {
    /// Flush: the source file is written into these segments.
    Into(Vec<SegPath>),
    /// Fetch: the destination file is read from these segments.
    From(Vec<SegPath>),
}

/// The error of a segment that could not be read or written whole.
fn seg_err(s: &SegPath, op: &'static str, why: String) -> CopyError {
    CopyError::Container {
        path: s.path.clone(),
        offset: s.seg.offset_bytes,
        length: s.seg.length_bytes,
        op,
        why,
    }
}

/// Open `s`'s container to read (it must hold the whole segment) or to
/// write, positioned at the segment; below `within` (the prefix
/// directory), never through a link.
fn open_at(within: Option<&Path>, s: &SegPath, write: bool) -> Result<fs::File, CopyError> {
    let op = if write { "write" } else { "read" };
    let how = if write { How::Write } else { How::Read };
    let opened = match within.filter(|w| s.path.starts_with(w)) {
        Some(w) => beneath::open_in(w, &s.path, how),
        None => fs::OpenOptions::new()
            .read(!write)
            .write(write)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&s.path),
    };
    let mut f = opened.map_err(|e| match beneath::into_refusal(e) {
        Ok(refused) => CopyError::Beneath(refused),
        Err(e) => seg_err(s, op, format!("open: {e}")),
    })?;
    if !write {
        let len = f
            .metadata()
            .map_err(|e| seg_err(s, op, format!("stat: {e}")))?
            .len();
        let end = s.seg.offset_bytes.saturating_add(s.seg.length_bytes);
        if len < end {
            return Err(seg_err(
                s,
                op,
                format!("the container has {len} bytes, the segment ends at {end}"),
            ));
        }
    }
    f.seek(SeekFrom::Start(s.seg.offset_bytes))
        .map_err(|e| seg_err(s, op, format!("seek: {e}")))?;
    Ok(f)
}

/// Stream the bytes of `segs` in order through `sink` (fetch, read-back).
pub(crate) fn read_segments(
    within: Option<&Path>,
    segs: &[SegPath],
    buf: &mut Vec<u8>,
    watch: Option<&watchdog::Progress>,
    mut sink: impl FnMut(&[u8]) -> Result<(), CopyError>,
) -> Result<u64, CopyError> {
    if buf.is_empty() {
        buf.resize(super::CHUNK, 0);
    }
    let mut total = 0u64;
    for s in segs.iter().filter(|s| s.seg.length_bytes > 0) {
        let mut f = open_at(within, s, false)?;
        let mut left = s.seg.length_bytes;
        while left > 0 {
            if let Some(w) = watch {
                w.check_cancelled()?;
            }
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            let n = f
                .read(&mut buf[..want])
                .map_err(|e| seg_err(s, "read", e.to_string()))?;
            if n == 0 {
                let at = s.seg.offset_bytes + (s.seg.length_bytes - left);
                return Err(seg_err(s, "read", format!("end of file at byte {at}")));
            }
            sink(&buf[..n])?;
            left -= n as u64;
            total += n as u64;
            if let Some(w) = watch {
                w.advance();
            }
        }
    }
    Ok(total)
}

/// Write the bytes from `src` into `segs` in order (flush), fsyncing each
/// container written; `src` must hold exactly the segments' bytes.
/// Returns the bytes written and their CRC32 (computed when `crc`).
pub(crate) fn write_segments(
    within: Option<&Path>,
    src_path: &Path,
    src: &mut impl Read,
    segs: &[SegPath],
    buf: &mut Vec<u8>,
    watch: Option<&watchdog::Progress>,
    mut paced: impl FnMut(u64, std::time::Duration),
) -> Result<(u64, u32), CopyError> {
    if buf.is_empty() {
        buf.resize(super::CHUNK, 0);
    }
    let mut h = crc32fast::Hasher::new();
    let mut total = 0u64;
    let clock = std::time::Instant::now;
    for s in segs.iter().filter(|s| s.seg.length_bytes > 0) {
        let mut f = open_at(within, s, true)?;
        let mut left = s.seg.length_bytes;
        while left > 0 {
            if let Some(w) = watch {
                w.check_cancelled()?;
            }
            let t = clock();
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
            let n = src
                .read(&mut buf[..want])
                .map_err(|e| io_fail("read", src_path, e))?;
            if n == 0 {
                // The source is shorter than recorded: the size check
                // reports it.
                f.sync_all()
                    .map_err(|e| seg_err(s, "fsync", e.to_string()))?;
                crate::fault::synced(&s.path);
                return Ok((total, h.finalize()));
            }
            h.update(&buf[..n]);
            f.write_all(&buf[..n])
                .map_err(|e| seg_err(s, "write", e.to_string()))?;
            left -= n as u64;
            total += n as u64;
            if let Some(w) = watch {
                w.advance();
            }
            paced(n as u64, t.elapsed());
        }
        f.sync_all()
            .map_err(|e| seg_err(s, "fsync", e.to_string()))?;
        crate::fault::synced(&s.path);
    }
    // Bytes beyond the recorded size: count them so the size check fails.
    let extra = src
        .read(&mut buf[..1])
        .map_err(|e| io_fail("read", src_path, e))?;
    Ok((total + extra as u64, h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_spills_over_into_the_next_containers() {
        // The guide's example: container size 300000, a file of 524296
        // bytes at offset 224295 of container 1.
        let s = segments_of(300_000 + 224_295, 524_296, 300_000, ".scr");
        let got: Vec<(String, u64, u64)> = s
            .into_iter()
            .map(|s| (s.file, s.offset_bytes, s.length_bytes))
            .collect();
        assert_eq!(
            got,
            vec![
                (".scr/ctr.1.scr".into(), 224_295, 75_705),
                (".scr/ctr.2.scr".into(), 0, 300_000),
                (".scr/ctr.3.scr".into(), 0, 148_591),
            ]
        );
    }

    #[test]
    fn an_empty_file_has_one_empty_segment() {
        let s = segments_of(600, 0, 300, "");
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].file.as_str(), s[0].offset_bytes), ("ctr.2.scr", 0));
        assert_eq!(s[0].length_bytes, 0);
    }

    #[test]
    fn container_names_are_recognised() {
        assert!(is_container_name("ctr.0.scr"));
        assert!(is_container_name("ctr.12.scr"));
        assert!(!is_container_name("ctr..scr"));
        assert!(!is_container_name("ctr.1.scrx"));
        assert!(!is_container_name("summary.scr"));
    }
}
