//! `scr copy`, `scr index` and `scr postrun`: the command-line side of
//! `scr::scavenge` (argument parsing, output, exit codes, progress bars).

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{ArgGroup, Args};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use scr::config::{Config, LoadOptions, ProcessEnv, Settings};
use scr::launch::TemplateLauncher;
use scr::prefix::layout::Placement;
use scr::scavenge::copy::{copy_dataset, CopyOptions, CopyReport};
use scr::scavenge::index::{self, AddReport};
use scr::scavenge::postrun::{self, NodeAccess, PostrunOptions, PostrunReport, RemoteCopy};
use scr::scavenge::{Progress, ScavengeError};
use scr::storage::dirs::{self, NodeIdentity};
use scr::storage::path as spath;

use super::CliError;

/// Copies smaller than this draw no progress bar.
const BAR_MIN_BYTES: u64 = 16 << 20;

/// `scr copy` (SCR's scr_copy).
#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The job's control directory as the library names it
    /// (`<SCR_CNTL_BASE>/<user>/scr.<jobid>`, e.g. /dev/shm/alice/scr.1234).
    #[arg(long, value_name = "DIR")]
    cntldir: PathBuf,
    /// The dataset id to copy.
    #[arg(long, value_name = "ID")]
    id: i64,
    /// The prefix directory the job used.
    #[arg(long, value_name = "DIR")]
    prefix: PathBuf,
    /// The dataset directory, relative to the prefix (default: DIR of the
    /// dataset in <prefix>/.scr/flush.scr).
    #[arg(long, value_name = "D")]
    dir: Option<String>,
    /// The directory, relative to the prefix, the files were routed to when
    /// it is not --dir (`.` for the prefix itself); only with --dir.
    #[arg(long, value_name = "DIR", requires = "dir")]
    origdir: Option<String>,
    /// Second round: restore the PARTNER copies held on this node for ranks
    /// not yet saved in the prefix (or those given with --ranks).
    #[arg(long)]
    partner: bool,
    /// Only these ranks (comma separated): ranks to copy, or with
    /// --partner the ranks whose copies to restore.
    #[arg(long, value_delimiter = ',', value_name = "R,R,...")]
    ranks: Vec<i64>,
    /// This node's name (default: SCR_NODE_NAME, else the hostname).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// Root of this node's node-local paths, for a simulated node
    /// (default: SCR_NODE_ROOT; unset on a real node).
    #[arg(long, value_name = "DIR")]
    node_root: Option<PathBuf>,
    /// Do not compute or compare CRC32s while copying.
    #[arg(long)]
    no_crc: bool,
    /// Bytes each read and write of a copy takes (SCR_FILE_BUF_SIZE; `scr
    /// postrun` passes its value; default 4 MiB).
    #[arg(long, value_name = "BYTES", value_parser = parse_buf_size)]
    buf_size: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `--buf-size`: a byte count as SCR's parameters write them (`64KB`,
/// `4194304`), from one byte to 1 GiB (as SCR_FILE_BUF_SIZE).
fn parse_buf_size(s: &str) -> Result<u64, String> {
    use scr::config::settings::MAX_BUFFER_BYTES;
    match scr::units::parse_bytes(s) {
        Some(n) if n == 0 || n > MAX_BUFFER_BYTES => {
            Err("a copy's buffer is from 1 byte to 1GB".into())
        }
        Some(n) => Ok(n),
        None => Err(format!(
            "{s:?} is not a byte count (e.g. 4194304, 64KB, 4MB)"
        )),
    }
}

/// `scr index` (SCR's scr_index, with its short options and `--remove`).
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("op").args(
    ["list", "current", "drop", "drop_after", "add", "rebuild", "upgrade"]
)))]
pub struct IndexArgs {
    /// The prefix directory (default: SCR_PREFIX, else the current directory).
    #[arg(short, long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// List the datasets in the index, newest first (`*` marks CURRENT);
    /// what `scr index` does when given nothing else to do.
    #[arg(short, long)]
    list: bool,
    /// Make NAME (a dataset name, directory or id) the one a restart starts from.
    #[arg(short, long, value_name = "NAME")]
    current: Option<String>,
    /// Remove NAME from the index (its files stay); `-r`/`--remove` as in
    /// SCR 3.1.
    #[arg(short = 'r', long, visible_alias = "remove", value_name = "NAME")]
    drop: Option<String>,
    /// Remove every dataset newer than NAME from the index (files stay).
    #[arg(long, value_name = "NAME")]
    drop_after: Option<String>,
    /// Check the dataset directory DIR (relative to the prefix; in SCR
    /// 3.1's layout a dataset id N or scr.dataset.N), rebuild missing ranks
    /// from XOR/RS parity, write its summary and index it.
    #[arg(short, long, value_name = "DIR")]
    add: Option<String>,
    /// Build the index again from the dataset directories (a damaged index
    /// is moved aside, never deleted).
    #[arg(long)]
    rebuild: bool,
    /// Move a prefix in the earlier layout (index version 1) to SCR 3.1's
    /// (index version 2, metadata in .scr/scr.dataset.<id>), in place and
    /// atomically: files stay; run again to finish an interrupted upgrade.
    #[arg(long)]
    upgrade: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `scr postrun` (SCR's scr_postrun + scr_scavenge).
#[derive(Args, Debug)]
pub struct PostrunArgs {
    /// The prefix directory (default: SCR_PREFIX, else the current
    /// directory; `-p` as in SCR 3.1).
    #[arg(short, long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Nodes of the allocation, comma separated (default: SCR_NODELIST,
    /// else this machine alone).
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    nodes: Vec<String>,
    /// Nodes known to be down (skipped), comma separated.
    #[arg(long, value_delimiter = ',', value_name = "N,N,...")]
    down: Vec<String>,
    /// Simulated nodes: where node N's node-local tree is. `{node}` is
    /// replaced by the name (`/sim/{node}`); a path without it holds one
    /// tree per node (`/sim` means /sim/N). Copies run in this process.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "launch")]
    node_root: Option<String>,
    /// Real nodes: run `scr copy` on each node with this program; give its
    /// arguments with --launch-arg, `{node}` replaced by the node name
    /// (`--launch ssh --launch-arg {node}`).
    #[arg(long, value_name = "PROGRAM")]
    launch: Option<String>,
    /// An argument of the --launch program (repeat, in order).
    #[arg(
        long = "launch-arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "launch"
    )]
    launch_args: Vec<String>,
    /// The scr binary on the nodes (default: this one).
    #[arg(long, value_name = "PATH", requires = "launch")]
    scr_bin: Option<PathBuf>,
    /// Bound on each node's copy with --launch, in seconds.
    #[arg(long, value_name = "DURATION", default_value_t = 1800, value_parser = scr::units::seconds_u64)]
    launch_timeout: u64,
    /// The job's control directory (default: <SCR_CNTL_BASE>/<user>/scr.<SCR_JOB_ID>).
    #[arg(long, value_name = "DIR")]
    cntldir: Option<PathBuf>,
    /// Do not compute or compare CRC32s while copying (default: SCR_CRC_ON_FLUSH).
    #[arg(long)]
    no_crc: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Real nodes reached through this launcher (srun, mpirun, mpiexec,
    /// flux, jsrun; SCR 3.1's `-j`): the nodes default to the
    /// allocation's, those not given with --down are checked first (as
    /// `scr list-down-nodes -j` does) and the down ones skipped, and
    /// `scr copy` runs on each of the others through it.
    #[arg(short = 'j', long, value_name = "LAUNCHER", conflicts_with_all = ["node_root", "launch"])]
    joblauncher: Option<String>,
    /// Bound on each node's check with -j, in seconds.
    #[arg(long, value_name = "DURATION", default_value_t = 15, value_parser = scr::units::seconds_u64, requires = "joblauncher")]
    check_timeout: u64,
    /// Print what is done before the report: the nodes, those down and
    /// why, how they are reached, and the time taken.
    #[arg(short, long)]
    verbose: bool,
}

fn usage(message: impl Into<String>) -> CliError {
    CliError::Usage(message.into())
}

fn fail(e: ScavengeError) -> CliError {
    CliError::Scavenge(e)
}

fn cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}

fn absolute(p: &Path) -> PathBuf {
    spath::absolute(p, &cwd())
}

fn load_config() -> Result<Config, CliError> {
    let cfg = Config::load(
        &ProcessEnv,
        &LoadOptions {
            system_file: None,
            read_app_conf: true,
        },
    )?;
    for w in cfg.warnings() {
        eprintln!("scr: warning: {w}");
    }
    Ok(cfg)
}

/// The configuration's parameters, typed (a bad value names where it was set).
fn settings_of(cfg: &Config) -> Result<Settings, CliError> {
    Ok(Settings::from_config(cfg)?)
}

/// `--prefix`, else SCR_PREFIX from the configuration, else the current
/// directory; absolute.
fn prefix_or_default(
    given: Option<PathBuf>,
    settings: Option<&Settings>,
) -> Result<PathBuf, CliError> {
    let p = match given {
        Some(p) => p,
        None => {
            let owned;
            let settings = match settings {
                Some(s) => s,
                None => {
                    owned = settings_of(&load_config()?)?;
                    &owned
                }
            };
            settings.job.prefix.clone().unwrap_or_else(cwd)
        }
    };
    Ok(absolute(&p))
}

fn json_out(v: &impl serde::Serialize) -> Result<(), CliError> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// An indicatif bar on stderr, drawn only when stderr is a terminal and
/// the copy is long.
struct Bar {
    bar: Option<ProgressBar>,
    tty: bool,
}

impl Bar {
    fn new() -> Bar {
        Bar {
            bar: None,
            tty: std::io::stderr().is_terminal(),
        }
    }
}

thread_local! {
    static BAR: std::cell::RefCell<Bar> = std::cell::RefCell::new(Bar::new());
}

/// The progress of the scavenge library, drawn with indicatif.
struct BarProgress;

impl Progress for BarProgress {
    fn start(&self, label: &str, total_bytes: u64) {
        BAR.with(|b| {
            let mut b = b.borrow_mut();
            if let Some(old) = b.bar.take() {
                old.finish_and_clear();
            }
            if !b.tty || total_bytes < BAR_MIN_BYTES {
                return;
            }
            let bar =
                ProgressBar::with_draw_target(Some(total_bytes), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(label.to_string());
            b.bar = Some(bar);
        });
    }
    fn advance(&self, bytes: u64) {
        BAR.with(|b| {
            if let Some(bar) = &b.borrow().bar {
                bar.inc(bytes);
            }
        });
    }
    fn finish(&self) {
        BAR.with(|b| {
            if let Some(bar) = b.borrow_mut().bar.take() {
                bar.finish_and_clear();
            }
        });
    }
}

/// A list for a person: items joined by commas, "none" when empty (not
/// the Debug form `[1, 2]`).
fn joined<T: std::fmt::Display>(items: &[T]) -> String {
    if items.is_empty() {
        return "none".to_string();
    }
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_copy(r: &CopyReport, prefix: &Path) {
    println!(
        "scr copy: dataset {} on node {} -> {} ({} round)",
        r.dataset,
        r.node,
        r.placement.dataset_dir(prefix).display(),
        r.round
    );
    for k in &r.ranks {
        let from = k.from_partner_of.map_or(String::new(), |h| {
            format!(" from the copies held by rank {h}")
        });
        println!(
            "  rank {}: {} of {} files{from}{}",
            k.rank,
            k.files,
            k.expected,
            if k.complete { "" } else { "  INCOMPLETE" }
        );
    }
    for p in &r.partners {
        println!(
            "  PARTNER copies of rank {} (node {}) held by rank {}: {} files{}",
            p.owner_rank,
            p.owner_node.as_deref().unwrap_or("?"),
            p.holder_rank,
            p.files,
            if p.restored {
                ", restored"
            } else {
                " (not copied; `scr copy --partner` restores them if that node is lost)"
            }
        );
    }
    for f in &r.failures {
        println!("  NOT COPIED rank {} {}: {}", f.rank, f.file, f.why);
    }
    for w in &r.warnings {
        println!("  warning: {w}");
    }
    println!(
        "copied {} files, {}",
        r.files_copied,
        scr::units::format_binary(r.bytes_copied)
    );
}

/// `scr copy`.
pub fn copy(a: CopyArgs) -> Result<(), CliError> {
    let mut node = NodeIdentity::from_env(|k| std::env::var_os(k));
    if let Some(n) = a.node {
        node.name = n;
    }
    if let Some(r) = a.node_root {
        node.root = Some(absolute(&r));
    }
    let prefix = absolute(&a.prefix);
    let placement = a.dir.map(|dir| Placement {
        dir: dir.trim_end_matches('/').to_string(),
        orig_dir: a.origdir,
        meta_of: None,
    });
    let opts = CopyOptions {
        cntl_dir: a.cntldir,
        node,
        dataset: a.id,
        prefix: prefix.clone(),
        placement,
        partner: a.partner,
        ranks: (!a.ranks.is_empty()).then(|| a.ranks.into_iter().collect()),
        crc: !a.no_crc,
        buf_bytes: a.buf_size.map_or(0, scr::prefix::buf_bytes),
    };
    // NotInCache exits NOT_CACHED, which `scr postrun --launch` reads.
    let report = copy_dataset(&opts, &BarProgress).map_err(fail)?;
    if a.json {
        json_out(&report)?;
    } else {
        print_copy(&report, &prefix);
    }
    if report.is_complete() {
        Ok(())
    } else {
        Err(CliError::CopyIncomplete {
            dataset: report.dataset,
            files: report.failures.len().max(1),
            node: report.node.clone(),
        })
    }
}

fn print_add(r: &AddReport) {
    let name = r.name.as_deref().unwrap_or("?");
    let id = r.dataset.map_or("?".to_string(), |d| d.to_string());
    if r.already_indexed {
        println!(
            "{}: dataset {id} ({name}) is already indexed as complete",
            r.dir
        );
        return;
    }
    println!(
        "{}: dataset {id} ({name}), {} ranks: {}",
        r.dir,
        r.ranks,
        if r.complete { "COMPLETE" } else { "INCOMPLETE" }
    );
    if !r.missing_before.is_empty() {
        println!(
            "  ranks missing after the copy: {}",
            joined(&r.missing_before)
        );
    }
    print_repairs(r);
}

/// What the index step rebuilt, what is still missing, and why.
fn print_repairs(r: &AddReport) {
    if !r.rebuilt.is_empty() {
        println!("  rebuilt from parity: ranks {}", joined(&r.rebuilt));
    }
    if !r.missing.is_empty() {
        println!("  still missing: ranks {}", joined(&r.missing));
    }
    for p in &r.problems {
        println!("  {p}");
    }
}

/// `scr index`.
pub fn index(a: IndexArgs) -> Result<(), CliError> {
    let prefix = prefix_or_default(a.prefix, None)?;
    // A prefix that is not there is a wrong name, not an empty index: saying
    // "no datasets" and exiting SUCCESS hides the typo.
    if !prefix.is_dir() {
        return Err(CliError::NoPrefix { path: prefix });
    }
    let other = a.current.is_some()
        || a.drop.is_some()
        || a.drop_after.is_some()
        || a.add.is_some()
        || a.rebuild
        || a.upgrade;
    if a.list || !other {
        let listing = index::list(&prefix).map_err(fail)?;
        if a.json {
            return json_out(&listing);
        }
        let rows = listing.rows;
        if rows.is_empty() {
            println!(
                "no datasets in {}",
                scr::records::index::index_path(&prefix).display()
            );
            return Ok(());
        }
        println!(
            "  {:>6} {:<5} {:<19} {:>7} {:>6} {:<20} DIR",
            "DSET", "VALID", "FLUSHED", "FETCHED", "FAILED", "NAME"
        );
        for r in rows {
            println!(
                "{} {:>6} {:<5} {:<19} {:>7} {:>6} {:<20} {}",
                if r.current { "*" } else { " " },
                r.id,
                match r.complete {
                    Some(true) => "YES",
                    Some(false) => "NO",
                    None => "?",
                },
                r.flushed.as_deref().unwrap_or("-"),
                r.fetched.len(),
                r.failed.len(),
                r.name.as_deref().unwrap_or("-"),
                r.dir
            );
        }
        return Ok(());
    }
    if let Some(name) = a.current {
        let r = index::set_current(&prefix, &name).map_err(fail)?;
        if a.json {
            return json_out(&r);
        }
        println!("CURRENT is now {} (dataset {})", r.dir, r.id);
        if let Some(w) = r.warning {
            eprintln!("scr index: warning: {} {w}", r.dir);
        }
        return Ok(());
    }
    if let Some(name) = a.drop.as_ref().or(a.drop_after.as_ref()) {
        let removed = if a.drop.is_some() {
            index::drop_name(&prefix, name)
        } else {
            index::drop_after(&prefix, name)
        }
        .map_err(fail)?;
        if a.json {
            let v: Vec<_> = removed
                .iter()
                .map(|(id, dir)| serde_json::json!({ "id": id, "dir": dir }))
                .collect();
            return json_out(&serde_json::json!({ "removed": v }));
        }
        if removed.is_empty() {
            println!("nothing is newer than {name}");
        }
        for (id, dir) in removed {
            println!("removed dataset {id} ({dir}) from the index; its files stay");
        }
        return Ok(());
    }
    if let Some(dir) = a.add {
        let r = index::add_dir(&prefix, &dir).map_err(fail)?;
        if a.json {
            json_out(&r)?;
        } else {
            print_add(&r);
        }
        return if r.complete {
            Ok(())
        } else {
            Err(CliError::IndexedIncomplete { dir: r.dir })
        };
    }
    if a.upgrade {
        let r = scr::scavenge::upgrade::upgrade(&prefix).map_err(fail)?;
        if a.json {
            return json_out(&r);
        }
        if r.already {
            println!("the index is already version 2; old metadata cleaned up");
        }
        for (id, dir, name) in &r.moved {
            println!("dataset {id}: {dir}/.scr -> .scr/scr.dataset.{id} (indexed as {name})");
        }
        for (id, dir, why) in &r.skipped {
            println!("dataset {id} ({dir}): not moved, left out of the index: {why}");
        }
        return Ok(());
    }
    // --rebuild (the argument group makes one operation required).
    let r = index::rebuild_index(&prefix).map_err(fail)?;
    if a.json {
        json_out(&r)?;
    } else {
        if let (Some(kept), Some(why)) = (&r.damaged_kept_as, &r.damage) {
            println!("the index was damaged ({why}); kept as {}", kept.display());
        }
        for d in &r.datasets {
            print_add(d);
        }
        for (dir, why) in &r.skipped {
            println!("{dir}: not indexed: {why}");
        }
        if let Some(kept) = &r.old_kept_as {
            println!(
                "the old index said otherwise ({}); kept as {}",
                r.changes.join("; "),
                kept.display()
            );
        }
        println!(
            "index rebuilt: {} datasets, CURRENT {}",
            r.datasets.len(),
            r.current.as_deref().unwrap_or("(none)")
        );
    }
    if r.datasets.iter().all(|d| d.complete) && r.skipped.is_empty() {
        Ok(())
    } else {
        Err(CliError::RebuiltIncomplete)
    }
}

fn print_postrun(r: &PostrunReport) {
    if let Some(why) = &r.nothing_to_do {
        println!("scr postrun: nothing to scavenge: {why}");
        return;
    }
    println!(
        "scr postrun: nodes up {}, down {}",
        joined(&r.up_nodes),
        joined(&r.down_nodes)
    );
    if let Some(ix) = &r.index_rebuilt {
        println!(
            "  the index was damaged ({}); rebuilt, damaged file kept as {}",
            ix.damage.as_deref().unwrap_or("?"),
            ix.damaged_kept_as
                .as_ref()
                .map_or("?".into(), |p| p.display().to_string())
        );
    }
    for d in &r.datasets {
        println!(
            "dataset {} ({}, {}) -> {}: {}{}",
            d.id,
            d.name.as_deref().unwrap_or("?"),
            d.kind,
            d.placement.as_ref().map_or("?", |p| p.dir.as_str()),
            if d.complete { "COMPLETE" } else { "INCOMPLETE" },
            if d.current { ", CURRENT" } else { "" }
        );
        for c in &d.copies {
            let what = match (&c.report, &c.error, c.not_cached) {
                (Some(rep), _, _) => format!(
                    "{} ranks, {} files, {}{}",
                    rep.ranks.len(),
                    rep.files_copied,
                    scr::units::format_binary(rep.bytes_copied),
                    if rep.failures.is_empty() {
                        String::new()
                    } else {
                        format!(", {} files NOT copied", rep.failures.len())
                    }
                ),
                (None, Some(e), _) => format!("FAILED: {e}"),
                (None, None, true) => "nothing of it cached here".into(),
                (None, None, false) => "no report".into(),
            };
            println!("  {} ({}): {what}", c.node, c.round);
        }
        if let Some(ix) = &d.index {
            print_repairs(ix);
        }
        if let Some(c) = &d.containers {
            println!(
                "  packed {} files ({}) into {} containers",
                c.files,
                scr::units::format_binary(c.bytes),
                c.containers
            );
        }
        if let Some(e) = &d.error {
            println!("  error: {e}");
        }
    }
}

/// `scr postrun`.
pub fn postrun(a: PostrunArgs) -> Result<(), CliError> {
    let cfg = load_config()?;
    let settings = settings_of(&cfg)?;
    if !settings.enable {
        println!("scr postrun: SCR_ENABLE=0, nothing to do");
        return Ok(());
    }
    let prefix = prefix_or_default(a.prefix, Some(&settings))?;
    let mut nodes = a.nodes;
    if nodes.is_empty() {
        if let Some(list) = std::env::var("SCR_NODELIST").ok().filter(|s| !s.is_empty()) {
            nodes = list.split(',').map(|s| s.trim().to_string()).collect();
        }
    }
    nodes.retain(|n| !n.is_empty());
    let t0 = std::time::Instant::now();
    // -v says what it does on standard output, which --json keeps for the
    // report alone.
    let json = a.json;
    let say = |line: String| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let mut down: BTreeSet<String> = a.down.into_iter().filter(|n| !n.is_empty()).collect();
    let mut launch = a.launch;
    let mut launch_args = a.launch_args;
    if let Some(j) = &a.joblauncher {
        let given = (!down.is_empty()).then(|| down.iter().cloned().collect());
        let found = super::run_cmd::postrun_nodes(
            j,
            std::mem::take(&mut nodes),
            given,
            Duration::from_secs(a.check_timeout),
        )?;
        nodes = found.nodes;
        for (n, why) in &found.down {
            if a.verbose {
                say(format!("scr postrun: node {n} down: {why}"));
            }
            down.insert(n.clone());
        }
        let mut t = found
            .template
            .into_iter()
            .map(|w| w.to_string_lossy().into_owned());
        launch = t.next();
        launch_args = t.collect();
    }
    if a.verbose {
        say(format!(
            "scr postrun: prefix {}, nodes {}{}",
            prefix.display(),
            if nodes.is_empty() {
                "(this one)".to_string()
            } else {
                nodes.join(",")
            },
            match &launch {
                Some(p) => format!(", reached by {p} {}", launch_args.join(" ")),
                None => String::new(),
            }
        ));
    }
    let access = match (a.node_root, launch) {
        (Some(t), _) => NodeAccess::Roots(t),
        (None, Some(prog)) => {
            let scr = match a.scr_bin {
                Some(p) => p,
                None => std::env::current_exe().map_err(|source| CliError::Io {
                    path: PathBuf::from("/proc/self/exe"),
                    op: "find the scr binary",
                    source,
                })?,
            };
            let mut argv = vec![prog];
            argv.extend(launch_args);
            let launcher = TemplateLauncher::new(argv).map_err(|e| usage(e.to_string()))?;
            NodeAccess::Launch(RemoteCopy {
                launcher: std::sync::Arc::new(launcher),
                scr,
                timeout: Duration::from_secs(a.launch_timeout.max(1)),
            })
        }
        (None, None) => {
            if nodes.len() > 1 {
                return Err(usage(format!(
                    "{} nodes given but no way to reach them: use --node-root for simulated nodes or --launch for real ones (or run `scr copy` on each node yourself)",
                    nodes.len()
                )));
            }
            if nodes.is_empty() {
                nodes.push(NodeIdentity::from_env(|k| std::env::var_os(k)).name);
            }
            NodeAccess::Local
        }
    };
    if nodes.is_empty() {
        return Err(usage("no nodes: give --nodes (or SCR_NODELIST)"));
    }
    if let Some(n) = down.iter().find(|n| !nodes.contains(n)) {
        return Err(usage(format!("--down {n}: not one of --nodes")));
    }
    let cntl_dir = match a.cntldir {
        Some(c) => c,
        None => {
            let user = settings
                .job
                .user_name
                .clone()
                .unwrap_or_else(|| dirs::user_name(|k| std::env::var_os(k)));
            dirs::job_dir(&settings.cache.cntl_base, &user, &settings.job.job_id)
        }
    };
    let crc = !a.no_crc && settings.flush.crc;
    let opts = PostrunOptions {
        prefix: prefix.clone(),
        nodes,
        down,
        access,
        cntl_dir,
        crc,
        buf_bytes: scr::prefix::buf_bytes(settings.cache.file_buf_bytes),
        containers: settings
            .flush
            .use_containers
            .then_some(settings.flush.container_bytes),
    };
    let logger = open_logger(&cfg, &settings, &prefix);
    let report = postrun::postrun(&opts, &BarProgress, logger.as_ref()).map_err(fail)?;
    if a.json {
        json_out(&report)?;
    } else {
        print_postrun(&report);
    }
    if a.verbose {
        say(format!(
            "scr postrun: done in {:.1} s",
            t0.elapsed().as_secs_f64()
        ));
    }
    if report.all_complete() && report.datasets.iter().all(|d| d.error.is_none()) {
        Ok(())
    } else {
        Err(CliError::ScavengedIncomplete)
    }
}

/// The SCR text log of the prefix when logging is enabled (warnings only).
fn open_logger(
    cfg: &Config,
    settings: &Settings,
    prefix: &Path,
) -> Option<scr::log::writer::Logger> {
    use scr::log::writer::{LogSettings, Logger};
    let host = dirs::hostname();
    let jobid = &settings.job.job_id;
    match LogSettings::from_config(cfg)
        .and_then(|s| s.map(|s| Logger::open(prefix, &host, jobid, s)).transpose())
    {
        Ok(l) => l,
        Err(e) => {
            eprintln!("scr: warning: logging disabled: {e}");
            None
        }
    }
}
