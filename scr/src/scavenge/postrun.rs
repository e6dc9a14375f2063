//! `scr postrun` (SCR's `scr_postrun` and `scr_scavenge`): after the last
//! run of an allocation, save to the prefix what only the cache holds.
//!
//! 1. Read the flush file. The newest checkpoint is scavenged when it is in
//!    cache and not in the prefix (`LOCATION` CACHE without PFS); so is
//!    every output dataset in that state (output must reach the prefix).
//!    An older checkpoint is never scavenged in place of a newer one that
//!    is already safe.
//! 2. Round 1: on every node that is up, [`copy`](super::copy) copies the
//!    originals it holds. Round 2: for ranks round 1 did not save, the
//!    nodes that reported holding their PARTNER copies restore them.
//! 3. [`index::add_dir`](super::index::add_dir) checks the directory,
//!    rebuilds missing ranks from XOR/RS parity and indexes it; a complete
//!    checkpoint becomes CURRENT, and the flush file records it in the
//!    prefix (PFS) so it is not scavenged twice.
//!
//! How nodes are reached ([`NodeAccess`]):
//! - simulated nodes (one directory tree per node, `SCR_NODE_ROOT`): node
//!   `n`'s tree is found from a template and copied in this process;
//! - this machine alone (real node-local paths), in this process;
//! - real clusters: a launcher argument vector (`ssh {node}`, `srun -N1 -w
//!   {node}`, `pdsh -w {node}`) runs `scr copy … --json` on each node and
//!   its report is read back. Arguments are passed as a vector; `{node}`
//!   is replaced in each. The prefix must be visible from where postrun
//!   runs (it indexes the directory itself).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::copy::{copy_dataset, CopyOptions, CopyReport};
use super::index::{self, AddReport, RebuildIndexReport};
use super::{LaunchCopyError, NothingToScavenge, Progress, ScavengeError, ScavengeResult};
use crate::clock::{Clock, SystemClock};
use crate::exit::Code;
use crate::launch::{LaunchError, Launcher};
use crate::log::writer::{Entry, EventType, Logger};
use crate::prefix::layout::{Placement, META_DIR};
use crate::records::flush::{FlushEntry, FlushFile, Location, FLUSH_FILE};
use crate::records::index::index_path;
use crate::records::{Index, Record};
use crate::storage::dirs::NodeIdentity;

/// The placeholder replaced by a node's name in templates and launcher
/// arguments.
pub use crate::launch::NODE_PLACEHOLDER;

/// How postrun reaches each node's cache.
#[derive(Debug, Clone)]
pub enum NodeAccess {
    /// Node `n`'s node-local paths live below a directory named by this
    /// template: `{node}` is replaced by the node name; a template without
    /// `{node}` is a directory holding one tree per node (`<dir>/<node>`,
    /// the layout of the harness's simulated clusters). Copies run here.
    Roots(String),
    /// This machine is the only node, with real node-local paths.
    Local,
    /// Run `scr copy` on each node through a launcher.
    Launch(RemoteCopy),
}

/// `scr copy` run on each node through a [`Launcher`] (e.g. a
/// [`crate::launch::TemplateLauncher`] of `["ssh", "{node}"]`).
#[derive(Debug, Clone)]
pub struct RemoteCopy {
    /// How a command reaches a node.
    pub launcher: Arc<dyn Launcher>,
    /// The `scr` binary as the node sees it.
    pub scr: PathBuf,
    /// Bound on each remote copy (killed when it overruns).
    pub timeout: Duration,
}

impl NodeAccess {
    /// The real root of node `node`'s node-local paths (`Roots` only).
    pub fn root_of(template: &str, node: &str) -> PathBuf {
        if template.contains(NODE_PLACEHOLDER) {
            PathBuf::from(template.replace(NODE_PLACEHOLDER, node))
        } else {
            Path::new(template).join(node)
        }
    }
}

/// What `scr postrun` is asked to do.
#[derive(Debug, Clone)]
pub struct PostrunOptions {
    /// The prefix directory (absolute, as the job saw it).
    pub prefix: PathBuf,
    /// Every node of the allocation.
    pub nodes: Vec<String>,
    /// Nodes known to be down (skipped).
    pub down: BTreeSet<String>,
    /// How nodes are reached.
    pub access: NodeAccess,
    /// The job's control directory (logical, `<cntl_base>/<user>/scr.<jobid>`).
    pub cntl_dir: PathBuf,
    /// CRC32 while copying (SCR_CRC_ON_FLUSH).
    pub crc: bool,
    /// Bytes each read and write of the copies takes (SCR_FILE_BUF_SIZE;
    /// 0 for the default), passed to every node's `scr copy`.
    pub buf_bytes: usize,
    /// SCR_USE_CONTAINERS=1: pack each saved dataset into containers of
    /// this many bytes (SCR_CONTAINER_SIZE) once it is indexed.
    pub containers: Option<u64>,
}

/// One `scr copy` on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeCopy {
    /// The node.
    pub node: String,
    /// `originals` or `partner`.
    pub round: String,
    /// Its report, when it ran.
    pub report: Option<CopyReport>,
    /// The dataset is not in this node's cache (not an error by itself).
    pub not_cached: bool,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

/// What happened to one dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DatasetScavenge {
    /// Dataset id.
    pub id: i64,
    /// Its name.
    pub name: Option<String>,
    /// `checkpoint` or `output`.
    pub kind: String,
    /// Where it went.
    pub placement: Option<Placement>,
    /// Every copy, both rounds.
    pub copies: Vec<NodeCopy>,
    /// The index step.
    pub index: Option<AddReport>,
    /// The packing into containers (SCR_USE_CONTAINERS=1).
    pub containers: Option<super::pack::PackReport>,
    /// Complete in the prefix now.
    pub complete: bool,
    /// Made CURRENT.
    pub current: bool,
    /// Why the dataset could not be scavenged at all.
    pub error: Option<String>,
}

/// What `scr postrun` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PostrunReport {
    /// Nodes copied from.
    pub up_nodes: Vec<String>,
    /// Nodes skipped.
    pub down_nodes: Vec<String>,
    /// Datasets handled.
    pub datasets: Vec<DatasetScavenge>,
    /// Why there was nothing to do, when so.
    pub nothing_to_do: Option<String>,
    /// The index was damaged and rebuilt on the way.
    pub index_rebuilt: Option<RebuildIndexReport>,
}

impl PostrunReport {
    /// Every dataset handled is complete in the prefix.
    pub fn all_complete(&self) -> bool {
        self.datasets.iter().all(|d| d.complete)
    }
}

fn is_checkpoint(e: &FlushEntry) -> bool {
    e.checkpoint
        .or_else(|| {
            e.dataset
                .as_ref()
                .map(|d| d.flag_checkpoint.unwrap_or(d.ckpt.is_some()))
        })
        .unwrap_or(e.output != Some(true))
}

fn is_output(e: &FlushEntry) -> bool {
    e.output
        .or_else(|| e.dataset.as_ref().and_then(|d| d.flag_output))
        .unwrap_or(false)
}

/// The datasets to scavenge, ascending: the newest checkpoint when it
/// needs it, and every output dataset that needs it. `Err` says why none.
fn targets(ff: &FlushFile) -> Result<Vec<i64>, NothingToScavenge> {
    let mut out = BTreeSet::new();
    let newest_ckpt = ff
        .datasets
        .iter()
        .rev()
        .find(|(_, e)| is_checkpoint(e))
        .map(|(id, _)| *id);
    if let Some(id) = newest_ckpt {
        if ff.need_flush(id) {
            out.insert(id);
        }
    }
    for (id, e) in &ff.datasets {
        if is_output(e) && ff.need_flush(*id) {
            out.insert(*id);
        }
    }
    if out.is_empty() {
        return Err(match newest_ckpt {
            Some(id) if ff.location_test(id, Location::Pfs) => {
                NothingToScavenge::AlreadyFlushed { id }
            }
            Some(id) => NothingToScavenge::NotCached { id },
            None => NothingToScavenge::Empty,
        });
    }
    Ok(out.into_iter().collect())
}

/// Run one copy on `node`.
fn copy_on(
    opts: &PostrunOptions,
    node: &str,
    id: i64,
    pl: &Placement,
    partner: Option<&BTreeSet<i64>>,
    progress: &dyn Progress,
) -> NodeCopy {
    let round = if partner.is_some() {
        "partner"
    } else {
        "originals"
    };
    let mut out = NodeCopy {
        node: node.to_string(),
        round: round.into(),
        report: None,
        not_cached: false,
        error: None,
    };
    let identity = match &opts.access {
        NodeAccess::Roots(t) => {
            let root = NodeAccess::root_of(t, node);
            if !root.is_dir() {
                out.error = Some(format!(
                    "{}: the node's tree is gone (node lost?)",
                    root.display()
                ));
                return out;
            }
            NodeIdentity {
                name: node.to_string(),
                root: Some(root),
            }
        }
        NodeAccess::Local => NodeIdentity {
            name: node.to_string(),
            root: None,
        },
        NodeAccess::Launch(l) => {
            match launch_copy(opts, l, node, id, pl, partner) {
                Ok(Some(r)) => out.report = Some(r),
                Ok(None) => out.not_cached = true,
                Err(e) => out.error = Some(e.to_string()),
            }
            return out;
        }
    };
    let copy = CopyOptions {
        cntl_dir: opts.cntl_dir.clone(),
        node: identity,
        dataset: id,
        prefix: opts.prefix.clone(),
        placement: Some(pl.clone()),
        partner: partner.is_some(),
        ranks: partner.cloned(),
        crc: opts.crc,
        buf_bytes: opts.buf_bytes,
    };
    match copy_dataset(&copy, progress) {
        Ok(r) => out.report = Some(r),
        Err(ScavengeError::NotInCache { .. }) => out.not_cached = true,
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

/// Exit code of `scr copy` when the dataset is not in the node's cache
/// (from the table of [`crate::exit`]).
pub const COPY_EXIT_NOT_CACHED: i32 = Code::NotCached as i32;
/// Exit code of `scr copy` when some file was not copied.
pub const COPY_EXIT_PARTIAL: i32 = Code::Incomplete as i32;

/// The argument vector of `scr copy` for one node.
pub fn copy_argv(
    scr: &Path,
    opts: &PostrunOptions,
    id: i64,
    pl: &Placement,
    partner: Option<&BTreeSet<i64>>,
) -> Vec<String> {
    let mut v = vec![
        scr.to_string_lossy().into_owned(),
        "copy".into(),
        "--cntldir".into(),
        opts.cntl_dir.to_string_lossy().into_owned(),
        "--id".into(),
        id.to_string(),
        "--prefix".into(),
        opts.prefix.to_string_lossy().into_owned(),
    ];
    // SCR 3.1's layout has no dataset directory: `scr copy` finds the
    // placement from the flush file (an entry without DIR).
    if pl.meta_of.is_none() {
        v.push("--dir".into());
        v.push(pl.dir.clone());
    }
    if let Some(o) = pl.orig_dir.as_ref().filter(|_| pl.meta_of.is_none()) {
        v.push("--origdir".into());
        v.push(o.clone());
    }
    if let Some(ranks) = partner {
        v.push("--partner".into());
        if !ranks.is_empty() {
            v.push("--ranks".into());
            v.push(
                ranks
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
    }
    if !opts.crc {
        v.push("--no-crc".into());
    }
    if opts.buf_bytes != 0 {
        v.push("--buf-size".into());
        v.push(opts.buf_bytes.to_string());
    }
    v.push("--json".into());
    v
}

/// Run `scr copy` on `node` through the launcher, bounded by its timeout
/// (the copy is killed when it overruns). `Ok(None)`: the dataset is not
/// cached there.
fn launch_copy(
    opts: &PostrunOptions,
    rc: &RemoteCopy,
    node: &str,
    id: i64,
    pl: &Placement,
    partner: Option<&BTreeSet<i64>>,
) -> Result<Option<CopyReport>, LaunchCopyError> {
    let cmd: Vec<OsString> = copy_argv(&rc.scr, opts, id, pl, partner)
        .into_iter()
        .map(OsString::from)
        .collect();
    let out = match rc.launcher.run_on_node(node, &cmd, rc.timeout) {
        Ok(out) => out,
        Err(LaunchError::Timeout { .. }) => {
            return Err(LaunchCopyError::Timeout {
                node: node.to_string(),
                timeout_s: rc.timeout.as_secs(),
            })
        }
        Err(source) => {
            return Err(LaunchCopyError::Launch {
                node: node.to_string(),
                launcher: rc.launcher.name().to_string(),
                source,
            })
        }
    };
    let code = out.status.code();
    if code == Some(COPY_EXIT_NOT_CACHED) {
        return Ok(None);
    }
    if code == Some(0) || code == Some(COPY_EXIT_PARTIAL) {
        return match serde_json::from_str::<CopyReport>(out.stdout.trim()) {
            Ok(r) => Ok(Some(r)),
            Err(source) => Err(LaunchCopyError::Report {
                node: node.to_string(),
                source,
                stdout: out.stdout,
            }),
        };
    }
    let tail: String = out
        .stderr
        .lines()
        .rev()
        .take(5)
        .collect::<Vec<_>>()
        .join(" | ");
    Err(LaunchCopyError::Failed {
        node: node.to_string(),
        code,
        stderr_tail: tail,
    })
}

/// Ranks saved whole by the copies so far.
fn saved_ranks(copies: &[NodeCopy]) -> BTreeSet<i64> {
    copies
        .iter()
        .filter_map(|c| c.report.as_ref())
        .flat_map(|r| r.ranks.iter())
        .filter(|r| r.complete)
        .map(|r| r.rank)
        .collect()
}

fn update_flush_file(prefix: &Path, f: impl FnOnce(&mut FlushFile)) -> ScavengeResult<()> {
    let path = prefix.join(META_DIR).join(FLUSH_FILE);
    FlushFile::update_file_in(prefix, &path, f)?;
    Ok(())
}

/// Scavenge one dataset: both copy rounds, index, CURRENT, flush file.
fn scavenge_one(
    opts: &PostrunOptions,
    up: &[String],
    id: i64,
    entry: &FlushEntry,
    progress: &dyn Progress,
    index_rebuilt: &mut Option<RebuildIndexReport>,
) -> DatasetScavenge {
    let checkpoint = is_checkpoint(entry);
    let mut d = DatasetScavenge {
        id,
        name: entry
            .name
            .clone()
            .or_else(|| entry.dataset.as_ref().and_then(|x| x.name.clone())),
        kind: if checkpoint { "checkpoint" } else { "output" }.into(),
        placement: None,
        copies: Vec::new(),
        index: None,
        containers: None,
        complete: false,
        current: false,
        error: None,
    };
    // Without DIR the entry is SCR 3.1's: metadata in .scr/scr.dataset.<id>.
    let pl = match entry.dir.clone() {
        Some(dir) => Placement {
            dir,
            orig_dir: entry.orig_dir.clone(),
            meta_of: None,
        },
        None => Placement::scr31(id),
    };
    if let Err(e) = super::copy::check_placement(&pl) {
        d.error = Some(format!("flush file: {e}"));
        return d;
    }
    d.placement = Some(pl.clone());
    // The index must not go on naming another dataset in a directory
    // about to be overwritten. A damaged index is dealt with below.
    // (SCR 3.1's layout has no dataset directory to forget: its metadata
    // directory is the id's own.)
    let forgotten = match pl.meta_of {
        Some(_) => Ok(()),
        None => index::forget_other_datasets_in(&opts.prefix, &pl.dir, id),
    };
    match forgotten {
        Ok(()) | Err(ScavengeError::DamagedIndex { .. }) => {}
        Err(e) => {
            d.error = Some(format!("updating the index: {e}"));
            return d;
        }
    }
    for node in up {
        d.copies.push(copy_on(opts, node, id, &pl, None, progress));
    }
    // Round 2: partner copies of ranks round 1 did not save.
    let saved = saved_ranks(&d.copies);
    let mut by_node: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    for c in &d.copies {
        for p in c.report.iter().flat_map(|r| r.partners.iter()) {
            if !saved.contains(&p.owner_rank) {
                by_node
                    .entry(c.node.clone())
                    .or_default()
                    .insert(p.owner_rank);
            }
        }
    }
    for (node, owners) in &by_node {
        d.copies
            .push(copy_on(opts, node, id, &pl, Some(owners), progress));
    }
    if d.copies.iter().all(|c| c.report.is_none()) {
        d.error = Some(format!(
            "no node that is up holds dataset {id} (or every copy failed)"
        ));
        return d;
    }
    let target = index::Target::of(&opts.prefix, &pl);
    let add = || match &target {
        Ok(t) => index::add_target_as(&opts.prefix, t, checkpoint),
        Err(e) => Err(ScavengeError::NotBelowPrefix {
            dir: format!("{}: {e}", pl.dir),
        }),
    };
    let mut added = add();
    if let Err(ScavengeError::DamagedIndex { .. }) = &added {
        // At the end of an allocation nobody is there to run --rebuild:
        // move the damaged index aside and rebuild it (reported).
        match index::rebuild_index(&opts.prefix) {
            Ok(r) => {
                *index_rebuilt = Some(r);
                added = add();
            }
            Err(e) => added = Err(e),
        }
    }
    match added {
        Ok(a) => {
            d.complete = a.complete;
            d.index = Some(a);
        }
        Err(e) => {
            d.error = Some(format!("indexing {}: {e}", pl.dir));
            return d;
        }
    }
    if let (true, Some(bytes)) = (d.complete, opts.containers) {
        // Node after node, as the copies found the ranks.
        let order: Vec<i64> = d
            .copies
            .iter()
            .filter_map(|c| c.report.as_ref())
            .flat_map(|r| r.ranks.iter().map(|k| k.rank))
            .collect();
        match super::pack::pack_dataset(&opts.prefix, &pl, bytes, &order) {
            Ok(r) => d.containers = Some(r),
            // The plain files are still there and the map names them.
            Err(e) => d.error = Some(format!("packing into containers: {e}")),
        }
    }
    // The index key: the directory, or in SCR 3.1's layout the name.
    let key = match (&pl.meta_of, &d.index) {
        (Some(id), Some(a)) => a
            .name
            .clone()
            .unwrap_or_else(|| crate::records::dataset::Dataset::default_name(*id)),
        _ => pl.dir.clone(),
    };
    if d.complete {
        // Indexed complete just now: CURRENT was set in the same write.
        let made_current = d.index.as_ref().is_some_and(|a| !a.already_indexed);
        if checkpoint && made_current {
            d.current = true;
        } else if checkpoint {
            let set = Index::update_file_in(&opts.prefix, index_path(&opts.prefix), |idx| {
                idx.set_current(&key)
            });
            match set {
                Ok(()) => d.current = true,
                Err(e) => d.error = Some(format!("setting CURRENT: {e}")),
            }
        }
        if let Err(e) = update_flush_file(&opts.prefix, |ff| {
            ff.location_set(id, Location::Pfs);
        }) {
            d.error = Some(format!("recording the dataset in the flush file: {e}"));
        }
    }
    d
}

/// `scr postrun`: see the module documentation. `Err` only when nothing
/// could be attempted (unreadable flush file, no node up).
pub fn postrun(
    opts: &PostrunOptions,
    progress: &dyn Progress,
    log: Option<&Logger>,
) -> ScavengeResult<PostrunReport> {
    let up: Vec<String> = opts
        .nodes
        .iter()
        .filter(|n| !opts.down.contains(*n))
        .cloned()
        .collect();
    let mut report = PostrunReport {
        up_nodes: up.clone(),
        down_nodes: opts.down.iter().cloned().collect(),
        datasets: Vec::new(),
        nothing_to_do: None,
        index_rebuilt: None,
    };
    let path = opts.prefix.join(META_DIR).join(FLUSH_FILE);
    let ff = match FlushFile::read_file_in(&opts.prefix, &path) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => {
            report.nothing_to_do = Some(format!(
                "{} does not exist: no run recorded a dataset in cache",
                path.display()
            ));
            return Ok(report);
        }
        Err(e) => return Err(e.into()),
    };
    let ids = match targets(&ff) {
        Ok(ids) => ids,
        Err(why) => {
            report.nothing_to_do = Some(why.to_string());
            return Ok(report);
        }
    };
    if up.is_empty() {
        return Err(ScavengeError::NoNodeUp { ids });
    }
    for id in ids {
        let entry = &ff.datasets[&id];
        // Logged durations read the system clock (no policy depends on them).
        let started = SystemClock.now();
        let name = entry.name.clone().unwrap_or_default();
        if let Some(l) = log {
            l.log_or_warn(
                &Entry::event(EventType::ScavengeStart)
                    .dset(id)
                    .name(name.as_str()),
            );
        }
        let d = scavenge_one(opts, &up, id, entry, progress, &mut report.index_rebuilt);
        if let Some(l) = log {
            let bytes: u64 = d
                .copies
                .iter()
                .filter_map(|c| c.report.as_ref())
                .map(|r| r.bytes_copied)
                .sum();
            let note = match (&d.error, d.complete) {
                (Some(e), _) => format!("failed: {e}"),
                (None, true) => format!("complete, {bytes} bytes copied"),
                (None, false) => format!("incomplete, {bytes} bytes copied"),
            };
            l.log_or_warn(
                &Entry::event(EventType::ScavengeEnd)
                    .dset(id)
                    .name(name.as_str())
                    .secs(SystemClock.elapsed(started).as_secs_f64())
                    .note(note),
            );
        }
        report.datasets.push(d);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Dataset;

    fn entry(ckpt: bool, output: bool, locs: &[Location]) -> FlushEntry {
        FlushEntry {
            locations: locs.iter().copied().collect(),
            dir: Some("d".into()),
            checkpoint: Some(ckpt),
            output: Some(output),
            dataset: Some(Dataset::new(0)),
            ..FlushEntry::default()
        }
    }

    #[test]
    fn the_newest_checkpoint_and_pending_outputs_are_scavenged() {
        use Location::{Cache, Pfs};
        let mut ff = FlushFile::default();
        ff.datasets.insert(1, entry(true, false, &[Cache]));
        ff.datasets.insert(2, entry(false, true, &[Cache]));
        ff.datasets.insert(3, entry(true, false, &[Cache]));
        ff.datasets.insert(4, entry(false, true, &[Cache, Pfs]));
        assert_eq!(targets(&ff), Ok(vec![2, 3]));
        // The newest checkpoint safe: an older one is not scavenged.
        ff.datasets.insert(5, entry(true, false, &[Cache, Pfs]));
        assert_eq!(targets(&ff), Ok(vec![2]));
        ff.datasets.remove(&2);
        let why = targets(&ff).unwrap_err();
        assert_eq!(why, NothingToScavenge::AlreadyFlushed { id: 5 });
        let why = why.to_string();
        assert!(
            why.contains("dataset 5") && why.contains("already"),
            "{why}"
        );
        assert!(targets(&FlushFile::default()).is_err());
    }

    #[test]
    fn node_roots_come_from_a_template_or_a_directory() {
        assert_eq!(
            NodeAccess::root_of("/sim/{node}/root", "n3"),
            Path::new("/sim/n3/root")
        );
        assert_eq!(NodeAccess::root_of("/sim", "n3"), Path::new("/sim/n3"));
    }

    #[test]
    fn the_copy_command_is_an_argument_vector() {
        let pl = Placement {
            dir: "scr.dataset.4".into(),
            orig_dir: Some(".".into()),
            meta_of: None,
        };
        let owners: BTreeSet<i64> = [2, 3].into();
        let opts = PostrunOptions {
            prefix: PathBuf::from("/p q"),
            nodes: vec!["n0".into()],
            down: BTreeSet::new(),
            access: NodeAccess::Roots("/nodes/{node}".into()),
            cntl_dir: PathBuf::from("/dev/shm/u/scr.7"),
            crc: false,
            buf_bytes: 65536,
            containers: None,
        };
        let v = copy_argv(Path::new("/bin/scr"), &opts, 4, &pl, Some(&owners));
        assert_eq!(
            v,
            [
                "/bin/scr",
                "copy",
                "--cntldir",
                "/dev/shm/u/scr.7",
                "--id",
                "4",
                "--prefix",
                "/p q",
                "--dir",
                "scr.dataset.4",
                "--origdir",
                ".",
                "--partner",
                "--ranks",
                "2,3",
                "--no-crc",
                "--buf-size",
                "65536",
                "--json"
            ]
        );
    }
}
