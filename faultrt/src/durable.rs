//! The power-loss model: what survives when every node of a job loses
//! power at once.
//!
//! A process kill keeps everything the process wrote: the kernel still has
//! it. A power loss keeps only what reached the device, and for a file that
//! is what was written up to its last `fsync`; a rename is durable once its
//! directory is fsynced. With [`ENV_DURABLE`] set to a directory, the
//! library reports each of those steps here (`scr::fault::synced`,
//! `renaming`, `dir_synced`, at every fsync and rename it makes): this
//! module keeps a copy of the file as it was synced and a journal line.
//!
//! The `power-loss` action then freezes every process of the job
//! (SIGSTOP: the instant of the loss), and [`power_loss`] puts every file
//! below [`ENV_DURABLE_ROOTS`] that this launch changed back to its last
//! synced state:
//!
//! - a file changed since it was last synced gets those bytes back;
//! - a file changed in this launch and never synced in it is truncated to
//!   zero bytes (its data never reached the device; the directory entry is
//!   kept, as on a journaling file system that orders metadata after data);
//! - a rename whose directory was not fsynced after it is undone: the
//!   target gets its old bytes back (or goes, if it did not exist) and the
//!   source name its synced bytes;
//! - a file or directory created in this launch (its birth time) whose
//!   directory was not fsynced after its creation loses its name: it goes,
//!   a directory with everything below it (fsync(2): syncing a file does
//!   not make its directory entry durable).
//!
//! Not modelled: the return of files deleted since; a file system without
//! birth times keeps every new name. Birth times come from the kernel's
//! coarse clock, so a name created within a clock tick after its
//! directory's fsync may be kept (the model errs towards keeping).
//!
//! "Changed in this launch" is a modification time at or after the moment
//! the firing process's fault runtime started (the application's first
//! injection point, before MPI is initialised), so a previous launch's
//! files are never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::log::job_key;

/// The journal directory; unset: nothing is journaled.
pub const ENV_DURABLE: &str = "SCR_FAULT_DURABLE";
/// Directories (`:`-separated) whose files a power loss reverts.
pub const ENV_DURABLE_ROOTS: &str = "SCR_FAULT_DURABLE_ROOTS";
/// When the job whose files a power loss reverts began, in nanoseconds
/// since the epoch; unset, the firing process's fault runtime start. Set
/// by the harness for `scr postrun`, whose processes start one after
/// another (the driver, then each node's `scr copy`): a power loss fired
/// in a copy must revert the driver's and the other copies' files too.
pub const ENV_DURABLE_SINCE: &str = "SCR_FAULT_DURABLE_SINCE";
/// Set (to anything) on a process of the job that runs on no simulated
/// node but is powered with the job's nodes: a power loss stops and
/// kills it with them (the `scr postrun` driver, which an allocation's
/// epilogue runs on a node of the job). Launchers and their daemons do
/// not carry it.
pub const ENV_SHARES_POWER: &str = "SCR_FAULT_SHARES_POWER";

const JOURNAL: &str = "journal.jsonl";

/// One journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Event {
    /// `path` was fsynced; `snap` holds its bytes then.
    Synced {
        /// The file.
        path: PathBuf,
        /// The copy.
        snap: PathBuf,
        /// The job keys of the process.
        job: Option<String>,
    },
    /// `from` is about to be renamed over `to`; `old` holds `to`'s bytes
    /// before (absent: `to` did not exist).
    Renamed {
        /// The source.
        from: PathBuf,
        /// The target.
        to: PathBuf,
        /// A copy of the target's old bytes.
        old: Option<PathBuf>,
        /// The job keys.
        job: Option<String>,
    },
    /// Directory `path` was fsynced.
    DirSynced {
        /// The directory.
        path: PathBuf,
        /// The job keys.
        job: Option<String>,
        /// When, in nanoseconds since the epoch: entries created in the
        /// directory before it are durable (absent in older journals:
        /// every entry is).
        #[serde(default)]
        at_ns: Option<u64>,
    },
}

fn journal_dir() -> Option<PathBuf> {
    std::env::var_os(ENV_DURABLE).map(PathBuf::from)
}

fn abs(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Copy `path` into the journal directory; the copy's path.
fn snapshot(dir: &Path, path: &Path) -> Option<PathBuf> {
    static N: AtomicU64 = AtomicU64::new(0);
    let snaps = dir.join("snaps");
    std::fs::create_dir_all(&snaps).ok()?;
    let snap = snaps.join(format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::copy(path, &snap).ok()?;
    Some(snap)
}

fn append(dir: &Path, e: &Event) {
    let Ok(line) = serde_json::to_string(e) else {
        return;
    };
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(JOURNAL));
    if let Err(err) = opened.and_then(|mut f| f.write_all(format!("{line}\n").as_bytes())) {
        eprintln!("scr fault: cannot append to the durability journal: {err}");
    }
}

/// `path` was just fsynced.
pub fn synced(path: &Path) {
    let Some(dir) = journal_dir() else { return };
    if let Some(snap) = snapshot(&dir, path) {
        append(
            &dir,
            &Event::Synced {
                path: abs(path),
                snap,
                job: job_key(),
            },
        );
    }
}

/// `from` is about to be renamed over `to`.
pub fn renaming(from: &Path, to: &Path) {
    let Some(dir) = journal_dir() else { return };
    let old = to.exists().then(|| snapshot(&dir, to)).flatten();
    append(
        &dir,
        &Event::Renamed {
            from: abs(from),
            to: abs(to),
            old,
            job: job_key(),
        },
    );
}

/// Directory `path` was just fsynced.
pub fn dir_synced(path: &Path) {
    let Some(dir) = journal_dir() else { return };
    append(
        &dir,
        &Event::DirSynced {
            path: abs(path),
            job: job_key(),
            at_ns: Some(ns_of(SystemTime::now())),
        },
    );
}

/// Nanoseconds since the epoch (0 before it).
fn ns_of(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Read a journal; partial lines (a process frozen mid-write) are skipped.
pub fn read_journal(dir: &Path) -> Vec<Event> {
    std::fs::read_to_string(dir.join(JOURNAL))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What [`power_loss`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reverted {
    /// Files given their last synced bytes back.
    pub restored: Vec<PathBuf>,
    /// Files truncated to zero bytes (never synced in this launch).
    pub emptied: Vec<PathBuf>,
    /// Renames undone.
    pub unrenamed: Vec<PathBuf>,
    /// New files and directories whose names were lost (their directory
    /// was not fsynced after they were created).
    pub unlinked: Vec<PathBuf>,
}

fn files_below(root: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            files_below(&e.path(), out);
        } else if ft.is_file() {
            out.push(e.path());
        }
    }
}

/// The names below `root` created at or after `since_ns` that a power loss
/// takes: those whose directory was not fsynced after their creation
/// (`dir_synced`: each directory's latest fsync). A lost directory goes
/// with everything below it; the journal directory and renames the caller
/// undoes (`undone`) are left alone.
fn unlink_new(
    root: &Path,
    journal: &Path,
    since_ns: u64,
    dir_synced: &BTreeMap<PathBuf, u64>,
    undone: &BTreeSet<&PathBuf>,
    out: &mut Vec<PathBuf>,
) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    let synced_at = dir_synced.get(root).copied();
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        // The journal is the model's own; a directory holding it stays.
        if p.starts_with(journal) {
            continue;
        }
        if journal.starts_with(&p) {
            unlink_new(&p, journal, since_ns, dir_synced, undone, out);
            continue;
        }
        let Ok(md) = e.metadata() else { continue };
        let born = md.created().ok().map(ns_of);
        let lost = !undone.contains(&p)
            && born.is_some_and(|b| b >= since_ns && synced_at.is_none_or(|s| s < b));
        if lost {
            let gone = if md.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            if gone.is_ok() {
                out.push(p);
            }
        } else if md.is_dir() {
            unlink_new(&p, journal, since_ns, dir_synced, undone, out);
        }
    }
}

/// Put every file below `roots` changed at or after `since` back to what a
/// power loss leaves, from the journal in `dir` (lines of job `job` only,
/// when given). See the module documentation for the rules.
pub fn power_loss(dir: &Path, roots: &[PathBuf], since: SystemTime, job: Option<&str>) -> Reverted {
    let events: Vec<Event> = read_journal(dir)
        .into_iter()
        .filter(|e| {
            let j = match e {
                Event::Synced { job, .. }
                | Event::Renamed { job, .. }
                | Event::DirSynced { job, .. } => job.as_deref(),
            };
            job.is_none() || j == job
        })
        .collect();
    // The last synced copy of each path, following renames: a file synced
    // under its temporary name is, after the rename, the target's bytes.
    let mut last: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    // Renames not yet made durable by a directory fsync: target -> (source,
    // old bytes of the target).
    let mut pending: BTreeMap<PathBuf, (PathBuf, Option<PathBuf>)> = BTreeMap::new();
    for e in &events {
        match e {
            Event::Synced { path, snap, .. } => {
                last.insert(path.clone(), snap.clone());
            }
            Event::Renamed { from, to, old, .. } => {
                if let Some(s) = last.remove(from) {
                    last.insert(to.clone(), s);
                }
                pending.insert(to.clone(), (from.clone(), old.clone()));
            }
            Event::DirSynced { path, .. } => {
                pending.retain(|to, _| to.parent() != Some(path.as_path()));
            }
        }
    }
    let mut out = Reverted::default();
    let undone: BTreeSet<&PathBuf> = pending.keys().collect();
    // Directory fsyncs: the latest of each directory.
    let mut dir_synced: BTreeMap<PathBuf, u64> = BTreeMap::new();
    for e in &events {
        if let Event::DirSynced { path, at_ns, .. } = e {
            let at = at_ns.unwrap_or(u64::MAX);
            let slot = dir_synced.entry(path.clone()).or_insert(at);
            *slot = (*slot).max(at);
        }
    }
    for r in roots {
        unlink_new(
            &abs(r),
            dir,
            ns_of(since),
            &dir_synced,
            &undone,
            &mut out.unlinked,
        );
    }
    let mut files = Vec::new();
    for r in roots {
        files_below(r, &mut files);
    }
    for f in files {
        let f = abs(&f);
        if f.starts_with(dir) || undone.contains(&f) {
            continue;
        }
        let changed = std::fs::metadata(&f)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= since);
        if !changed {
            continue;
        }
        match last.get(&f) {
            Some(snap) => {
                let same = std::fs::read(snap).ok() == std::fs::read(&f).ok();
                if !same && std::fs::copy(snap, &f).is_ok() {
                    out.restored.push(f);
                }
            }
            None => {
                if std::fs::OpenOptions::new()
                    .write(true)
                    .open(&f)
                    .and_then(|h| h.set_len(0))
                    .is_ok()
                {
                    out.emptied.push(f);
                }
            }
        }
    }
    for (to, (from, old)) in pending {
        // The source name comes back with its synced bytes.
        if let Some(snap) = last.get(&to) {
            let _ = std::fs::copy(snap, &from);
        }
        match old {
            Some(o) => {
                let _ = std::fs::copy(o, &to);
            }
            None => {
                let _ = std::fs::remove_file(&to);
            }
        }
        out.unrenamed.push(to);
    }
    out
}

/// The roots of [`ENV_DURABLE_ROOTS`].
pub fn roots() -> Vec<PathBuf> {
    std::env::var_os(ENV_DURABLE_ROOTS)
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

/// The journal directory of [`ENV_DURABLE`], if set.
pub fn dir() -> Option<PathBuf> {
    journal_dir()
}

/// [`ENV_DURABLE_SINCE`] as a time, or `started` when it is unset or not
/// a number.
pub fn since(started: SystemTime) -> SystemTime {
    since_from(std::env::var(ENV_DURABLE_SINCE).ok().as_deref()).unwrap_or(started)
}

/// A value of [`ENV_DURABLE_SINCE`] as a time.
fn since_from(value: Option<&str>) -> Option<SystemTime> {
    let ns = value?.trim().parse::<u64>().ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_start_overrides_the_runtime_s_own() {
        // The variable is read from this process's environment, which
        // tests share: only the parse is checked here.
        let started = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(7);
        if std::env::var_os(ENV_DURABLE_SINCE).is_none() {
            assert_eq!(since(started), started);
        }
        assert_eq!(
            since_from(Some("1500000000")),
            Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(1_500_000_000))
        );
        assert_eq!(since_from(Some("soon")), None);
        assert_eq!(since_from(None), None);
    }

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("faultrt-durable-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    fn ev_synced(dir: &Path, path: &Path) {
        let snap = snapshot(dir, path).expect("snapshot");
        append(
            dir,
            &Event::Synced {
                path: path.to_path_buf(),
                snap,
                job: None,
            },
        );
    }

    /// A journal and a data directory (below a fresh base) holding a file
    /// of an earlier launch, and the moment this launch began, after it.
    fn setup(name: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf, SystemTime) {
        let base = tmpdir(name);
        let (journal, data) = (base.join("journal"), base.join("data"));
        std::fs::create_dir_all(&journal).expect("mkdir");
        std::fs::create_dir_all(&data).expect("mkdir");
        let before = data.join("old");
        std::fs::write(&before, b"from an earlier launch").expect("write");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let since = SystemTime::now();
        // File times come from the kernel's coarse clock, up to a tick
        // behind SystemTime::now(): a file written at once would look
        // older than `since` (a_power_loss_keeps_synced_bytes_only failed
        // so once, keeping a's unsynced bytes).
        std::thread::sleep(std::time::Duration::from_millis(20));
        (base, journal, data, before, since)
    }

    #[test]
    fn a_power_loss_keeps_synced_bytes_only() {
        let (base, journal, data, before, since) = setup("keep");
        // Synced, then appended to: the appended bytes go.
        let a = data.join("a");
        std::fs::write(&a, b"synced").expect("write");
        ev_synced(&journal, &a);
        std::fs::write(&a, b"synced and more").expect("write");
        // Never synced: empty.
        let b = data.join("b");
        std::fs::write(&b, b"never synced").expect("write");
        // Written to a temporary name, synced, renamed over c, whose
        // directory was not fsynced: c keeps its old bytes and the
        // temporary name comes back.
        let c = data.join("c");
        std::fs::write(&c, b"old c").expect("write");
        ev_synced(&journal, &c);
        let tmp = data.join(".c.tmp");
        std::fs::write(&tmp, b"new c").expect("write");
        ev_synced(&journal, &tmp);
        let d = data.join("sub").join("d");
        std::fs::create_dir_all(d.parent().expect("parent")).expect("mkdir");
        // Every name above is durable from here: the renames below are not.
        ev_dir_synced(&journal, &data);
        let old = snapshot(&journal, &c);
        append(
            &journal,
            &Event::Renamed {
                from: tmp.clone(),
                to: c.clone(),
                old,
                job: None,
            },
        );
        std::fs::rename(&tmp, &c).expect("rename");
        // The same for d, but its directory was fsynced: the rename holds.
        let dtmp = data.join("sub").join(".d.tmp");
        std::fs::write(&dtmp, b"new d").expect("write");
        ev_synced(&journal, &dtmp);
        append(
            &journal,
            &Event::Renamed {
                from: dtmp.clone(),
                to: d.clone(),
                old: None,
                job: None,
            },
        );
        std::fs::rename(&dtmp, &d).expect("rename");
        ev_dir_synced(&journal, d.parent().expect("parent"));
        let r = power_loss(&journal, std::slice::from_ref(&data), since, None);
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|_| b"<absent>".to_vec());
        assert_eq!(read(&before), b"from an earlier launch");
        assert_eq!(read(&a), b"synced");
        assert_eq!(read(&b), b"");
        assert_eq!(read(&c), b"old c");
        assert_eq!(read(&tmp), b"new c");
        assert_eq!(read(&d), b"new d");
        assert_eq!(r.restored, [a]);
        assert_eq!(r.emptied, [b]);
        assert_eq!(r.unrenamed, [c]);
        assert!(r.unlinked.is_empty(), "{:?}", r.unlinked);
        let _ = std::fs::remove_dir_all(&base);
    }

    fn ev_dir_synced(dir: &Path, path: &Path) {
        append(
            dir,
            &Event::DirSynced {
                path: path.to_path_buf(),
                job: None,
                at_ns: Some(ns_of(SystemTime::now())),
            },
        );
    }

    #[test]
    fn a_new_name_goes_unless_its_directory_was_synced_after_it() {
        let (base, journal, data, before, since) = setup("names");
        // File times come from the kernel's coarse clock (a tick behind).
        let tick = std::time::Duration::from_millis(20);
        std::thread::sleep(tick);
        // Synced bytes, but the directory never synced: the name goes.
        let x = data.join("x");
        std::fs::write(&x, b"x").expect("write");
        ev_synced(&journal, &x);
        // A new directory synced inside, its parent never: all of it goes.
        let y = data.join("new").join("y");
        std::fs::create_dir_all(y.parent().expect("parent")).expect("mkdir");
        std::fs::write(&y, b"y").expect("write");
        ev_synced(&journal, &y);
        ev_dir_synced(&journal, y.parent().expect("parent"));
        // Created before the directory's sync: kept; after it: gone.
        let z = data.join("kept").join("z");
        std::fs::create_dir_all(z.parent().expect("parent")).expect("mkdir");
        std::fs::write(&z, b"z").expect("write");
        ev_synced(&journal, &z);
        ev_dir_synced(&journal, z.parent().expect("parent"));
        ev_dir_synced(&journal, &data);
        std::thread::sleep(tick);
        let w = data.join("kept").join("w");
        std::fs::write(&w, b"w").expect("write");
        ev_synced(&journal, &w);
        let r = power_loss(&journal, std::slice::from_ref(&data), since, None);
        // x and new/ were created before data's sync too: only a sync
        // after the creation keeps a name, and data's came after them.
        assert!(x.exists() && y.exists(), "{r:?}");
        assert_eq!(std::fs::read(&z).expect("read"), b"z");
        assert!(!w.exists());
        assert_eq!(r.unlinked, [w]);
        assert_eq!(
            std::fs::read(&before).expect("read"),
            b"from an earlier launch"
        );
        // Without data's sync, x and new/ go as well.
        let (base2, journal2, data2, _, since2) = setup("names2");
        std::thread::sleep(tick);
        let x2 = data2.join("x");
        std::fs::write(&x2, b"x").expect("write");
        ev_synced(&journal2, &x2);
        let y2 = data2.join("new").join("y");
        std::fs::create_dir_all(y2.parent().expect("parent")).expect("mkdir");
        std::fs::write(&y2, b"y").expect("write");
        ev_dir_synced(&journal2, y2.parent().expect("parent"));
        let r = power_loss(&journal2, std::slice::from_ref(&data2), since2, None);
        assert!(
            !x2.exists() && !y2.parent().expect("parent").exists(),
            "{r:?}"
        );
        assert_eq!(r.unlinked.len(), 2, "{r:?}");
        let _ = std::fs::remove_dir_all(&base);
        let _ = std::fs::remove_dir_all(&base2);
    }
}
