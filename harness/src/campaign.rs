//! Campaigns: run scenarios across schemes, judge every cell against its
//! expectation, write the results (Markdown + JSON table, PNG matrix).
//!
//! Every cell's seed derives from the campaign seed, the scenario name and
//! the scheme ([`cell_seed`]), so one cell replays alone:
//! `scr-harness campaign --only NAME --scheme XOR --seed S` gives the same
//! data and the same fault choices as inside the whole campaign.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use faultsim::seed::Seeded;
use serde::{Deserialize, Serialize};

use crate::outcome::{judge, AppReport, Class, Outcome, Verdict};
use crate::runloop::{default_storage, Allocation, AppSpec, RunLoop, RunResult};
use crate::scenario::{scheme_env, Scenario};
use scr::CopyType;

/// The campaign seed when none is given (the quick campaign's table is a
/// snapshot, so its seed is fixed).
pub const DEFAULT_SEED: u64 = 20_260_522;

/// Settings shared by every cell.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `scr_app` built with `--features scr/fault-injection`.
    pub app: PathBuf,
    /// The `scr` command (for `scr postrun`), if any.
    pub scr_command: Option<PathBuf>,
    /// Launcher and leading arguments.
    pub mpirun: Vec<String>,
    /// Where cells run (one directory each).
    pub work: PathBuf,
    /// Keep a passing cell's directory.
    pub keep: bool,
    /// The campaign seed.
    pub seed: u64,
    /// Replay command prefix (the campaign's own command line, without seed
    /// and selection).
    pub replay: String,
}

/// One cell's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// Scenario name.
    pub scenario: String,
    /// Scheme.
    pub scheme: CopyType,
    /// The cell's seed.
    pub seed: u64,
    /// Expected outcome.
    pub expected: String,
    /// Actual outcome (or `skipped: why`).
    pub outcome: String,
    /// Headline class of the outcome.
    pub class: String,
    /// The verdict.
    pub verdict: String,
    /// Why the verdict is not `expected`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// Wall time of the cell.
    pub time_s: f64,
    /// Launches made.
    pub launches: usize,
    /// The command that replays this cell.
    pub replay: String,
    /// Where the cell's files are (kept on failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<PathBuf>,
}

impl Cell {
    /// True when the cell met its expectation (or was skipped).
    pub fn ok(&self) -> bool {
        self.verdict == "expected" || self.verdict == "skipped"
    }
}

/// A campaign's results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Campaign name (`quick`, `full`, `random`, ...).
    pub campaign: String,
    /// The campaign seed.
    pub seed: u64,
    /// The command that produced it.
    pub command: String,
    /// Every cell.
    pub cells: Vec<Cell>,
    /// Wall time.
    pub time_s: f64,
}

/// Counts for the last line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Cells run (skipped ones excluded).
    pub run: usize,
    /// As expected.
    pub expected: usize,
    /// Different from the expectation (nothing that must never happen).
    pub unexpected: usize,
    /// SILENT CORRUPTION.
    pub silent: usize,
    /// HANG.
    pub hang: usize,
    /// Skipped (preconditions).
    pub skipped: usize,
}

impl Report {
    /// The counts.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for cell in &self.cells {
            if cell.verdict == "skipped" {
                c.skipped += 1;
                continue;
            }
            c.run += 1;
            match cell.verdict.as_str() {
                "expected" => c.expected += 1,
                _ => c.unexpected += 1,
            }
            if cell.class == Class::SilentCorruption.name() {
                c.silent += 1;
            }
            if cell.class == Class::Hang.name() {
                c.hang += 1;
            }
        }
        c
    }

    /// The last line of a campaign: the counts.
    pub fn summary_line(&self) -> String {
        let c = self.counts();
        format!(
            "campaign {}: {} scenario runs, {} as expected, {} unexpected, {} SILENT CORRUPTION, {} HANG{}",
            self.campaign,
            c.run,
            c.expected,
            c.unexpected,
            c.silent,
            c.hang,
            if c.skipped > 0 {
                format!(" ({} skipped)", c.skipped)
            } else {
                String::new()
            }
        )
    }

    /// Scenario × scheme → outcome, no times or seeds: what the snapshot
    /// of the quick campaign holds (it changes only when behaviour does).
    pub fn outcome_table(&self) -> String {
        let schemes = self.schemes();
        // Natural order, as the plot: random-2 before random-10.
        let rows = crate::plot::rows(self);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "| scenario | {} |",
            schemes
                .iter()
                .map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(s, "|---|{}", "---|".repeat(schemes.len()));
        for (name, cells) in rows {
            let cols: Vec<String> = schemes
                .iter()
                .map(|sch| match cells.get(sch) {
                    Some(c) if c.ok() => md_cell(&c.outcome),
                    Some(c) => format!(
                        "**{}** (expected {})",
                        md_cell(&c.outcome),
                        md_cell(&c.expected)
                    ),
                    None => "-".into(),
                })
                .collect();
            let _ = writeln!(s, "| {name} | {} |", cols.join(" | "));
        }
        s
    }

    fn schemes(&self) -> Vec<CopyType> {
        CopyType::ALL
            .into_iter()
            .filter(|s| self.cells.iter().any(|c| c.scheme == *s))
            .collect()
    }

    /// The Markdown report: summary, outcome table, then every cell with
    /// time and seed.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Campaign `{}`\n", self.campaign);
        let _ = writeln!(s, "Command: `{}`  ", self.command);
        let _ = writeln!(
            s,
            "Campaign seed {}; wall time {:.0} s.\n",
            self.seed, self.time_s
        );
        let _ = writeln!(s, "{}\n", self.summary_line());
        let _ = writeln!(s, "## Outcomes (scenario × scheme)\n");
        let _ = writeln!(
            s,
            "Tokens, one per launch of the run loop, then how the loop ended \
             (docs/decisions.md, \"Outcome classes\"). Bold: not as expected.\n"
        );
        s.push_str(&self.outcome_table());
        let _ = writeln!(s, "\n## Cells\n");
        let _ = writeln!(
            s,
            "| scenario | scheme | verdict | time (s) | seed | replay |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for c in &self.cells {
            let _ = writeln!(
                s,
                "| {} | {} | {}{} | {:.1} | {} | `{}` |",
                c.scenario,
                c.scheme,
                c.verdict,
                if c.why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", c.why.replace('|', "\\|"))
                },
                c.time_s,
                c.seed,
                c.replay
            );
        }
        s
    }

    /// Write `<dir>/<campaign>.md`, `.json` and `.png` (with further
    /// `-p2.png`, ... pages for a large campaign: [`crate::plot::matrix`]).
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let base = dir.join(format!("campaign-{}", self.campaign));
        let md = base.with_extension("md");
        let json = base.with_extension("json");
        let png = base.with_extension("png");
        std::fs::write(&md, self.markdown()).map_err(|e| format!("{}: {e}", md.display()))?;
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&json, text + "\n").map_err(|e| format!("{}: {e}", json.display()))?;
        let mut files = vec![md, json];
        files.extend(crate::plot::matrix(self, &png)?);
        Ok(files)
    }
}

/// Text for a Markdown table cell (`|` separates an outcome's end).
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The seed of one cell: from the campaign seed, the scenario and the scheme.
pub fn cell_seed(campaign_seed: u64, scenario: &str, scheme: CopyType) -> u64 {
    Seeded::new(campaign_seed).derive(&format!("cell.{scenario}.{}", scheme.as_str()))
}

/// The data seed of a cell: the first seed drawn from the cell's seed for
/// which every rank writes at least one file, none of them empty, in every
/// checkpoint up to `ckpts`, so that losing or damaging any rank's files
/// really loses data (expectations stay sharp).
pub fn data_seed(cell_seed: u64, ranks: u32, ckpts: u64, mean_bytes: u64) -> u64 {
    let s = Seeded::new(cell_seed);
    let fits = |d: u64| {
        (0..ranks).all(|r| {
            (1..=ckpts).all(|c| {
                let files = testing::data::file_plan(d, r, c, mean_bytes);
                !files.is_empty() && files.iter().all(|f| f.size_bytes > 0)
            })
        })
    };
    (0..10_000)
        .map(|i| s.derive(&format!("data.{i}")))
        .find(|&d| fits(d))
        .unwrap_or_else(|| s.derive("data.0"))
}

/// The data seed of scenario `sc`'s cell seeded `cell_seed`: every
/// checkpoint any launch may write ([`data_seed`]).
pub fn cell_data_seed(sc: &Scenario, cell_seed: u64) -> u64 {
    let ranks = u32::try_from(sc.nodes * sc.ranks_per_node).unwrap_or(u32::MAX);
    let total_ckpts = sc.checkpoints + sc.relaunch_checkpoints * u64::from(sc.launches);
    data_seed(cell_seed, ranks, total_ckpts, sc.mean_bytes)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The SCR parameters every cell starts from (scenario and scheme on top).
pub fn base_env() -> BTreeMap<String, String> {
    [
        ("SCR_JOB_ID", "4242"),
        ("SCR_CACHE_SIZE", "2"),
        // Cache-tier scenarios stay independent of the prefix tier; those
        // about flush and fetch set it.
        ("SCR_FLUSH", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Unmount every file system mounted below `dir` (a cell's tmpfs caches;
/// also what a harness that died left behind).
pub fn unmount_below(dir: &Path) {
    let Ok(abs) = std::path::absolute(dir) else {
        return;
    };
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut below: Vec<PathBuf> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(&abs))
        .collect();
    // Deepest first.
    below.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    for m in below {
        let _ = faultsim::inject::unmount(&m);
    }
}

/// Run `f(i)` for every `i` in `0..count` on up to `jobs` threads (cells
/// are independent: own directories, fault logs and job keys). The results
/// keep the order of `i`.
pub fn in_parallel<T: Send>(count: usize, jobs: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<T>>> =
        (0..count).map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, 16) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= count {
                    break;
                }
                let r = f(i);
                if let Ok(mut slot) = slots[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    slots
        .into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .collect()
}

/// Build the run loop of one cell.
pub fn cell_loop(
    sc: &Scenario,
    scheme: CopyType,
    seed: u64,
    settings: &Settings,
    dir: &Path,
) -> Result<RunLoop, String> {
    let mut env = base_env();
    for (k, v) in scheme_env(scheme) {
        env.insert(k.into(), v.into());
    }
    // `{scenarios}` in a value names the shipped catalogue's directory
    // (data files such as a broken configuration file live there).
    let scenarios_dir = crate::scenario::default_dir();
    env.extend(sc.env.iter().map(|(k, v)| {
        (
            k.clone(),
            v.replace("{scenarios}", &scenarios_dir.to_string_lossy()),
        )
    }));
    let storage = default_storage(&env);
    unmount_below(dir);
    let _ = std::fs::remove_dir_all(dir);
    let alloc = Allocation::create(dir, sc.nodes, sc.spares, sc.ranks_per_node, &storage)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    if let Some(bytes) = sc.cache_tmpfs_bytes {
        let cache = storage.last().map(|s| s.path.clone()).unwrap_or_default();
        for n in &alloc.nodes {
            let at = crate::health::node_path(Some(&alloc.node_root(n)), &cache);
            faultsim::inject::mount_tmpfs(&at, bytes).map_err(|e| e.to_string())?;
        }
    }
    let data = cell_data_seed(sc, seed);
    let app = AppSpec::scr_app(
        settings.app.clone(),
        data,
        sc.mean_bytes,
        sc.checkpoints,
        sc.relaunch_checkpoints,
    );
    let mut app = app;
    app.args.extend(sc.app_args.iter().cloned());
    let mut plan = sc.plan();
    plan.seed = Some(seed);
    Ok(RunLoop {
        alloc,
        app,
        env,
        plan,
        halts: sc.halts.clone(),
        seed,
        max_launches: sc.launches,
        timeout: Duration::from_secs(sc.timeout_s),
        storage,
        mpirun: settings.mpirun.clone(),
        scr_command: settings.scr_command.clone(),
        next_allocation: sc.next_allocation,
    })
}

/// Run one cell and judge it.
pub fn run_cell(sc: &Scenario, scheme: CopyType, settings: &Settings) -> (Cell, Option<RunResult>) {
    let seed = cell_seed(settings.seed, &sc.name, scheme);
    let replay = format!(
        "{} --only {} --scheme {} --seed {}",
        settings.replay, sc.name, scheme, settings.seed
    );
    let expected = sc
        .expected(scheme)
        .map(Outcome::to_string)
        .unwrap_or_default();
    let mut cell = Cell {
        scenario: sc.name.clone(),
        scheme,
        seed,
        expected: expected.clone(),
        outcome: String::new(),
        class: String::new(),
        verdict: String::new(),
        why: String::new(),
        time_s: 0.0,
        launches: 0,
        replay,
        kept: None,
    };
    if sc.needs.iter().any(|n| n == "root") && !is_root() {
        cell.verdict = "skipped".into();
        cell.outcome = "skipped: needs root".into();
        return (cell, None);
    }
    let dir = settings
        .work
        .join(format!("{}-{}", sc.name, scheme.as_str().to_lowercase()));
    let start = Instant::now();
    let rl = match cell_loop(sc, scheme, seed, settings, &dir) {
        Ok(rl) => rl,
        Err(e) => {
            cell.verdict = "unexpected".into();
            cell.class = "harness-error".into();
            cell.outcome = "harness error".into();
            cell.why = e;
            return (cell, None);
        }
    };
    let result = rl.run();
    unmount_below(&dir);
    // A random scenario's expectation comes from what its faults really
    // hit (the fault log, the files damaged), not from the plan alone.
    let observed = crate::random::observed_expectation(settings.seed, sc, result.launches.first());
    if let Some(o) = &observed {
        cell.expected = o.to_string();
    }
    let expected = observed.as_ref().or_else(|| sc.expected(scheme));
    cell.time_s = start.elapsed().as_secs_f64();
    cell.launches = result.launches.len();
    cell.outcome = result.outcome.to_string();
    cell.class = result.outcome.headline().name().to_string();
    let reports: Vec<AppReport> = result.launches.iter().map(|l| l.report.clone()).collect();
    let next_report = result.next.as_ref().map(|l| &l.report);
    let (verdict, mut why) = match expected {
        Some(exp) => judge(&result.outcome, exp, &reports, next_report),
        None => (Verdict::Unexpected, "no expectation".into()),
    };
    if let Some(w) = result
        .launches
        .iter()
        .chain(result.next.as_ref())
        .find_map(|l| l.why.clone())
    {
        why = if why.is_empty() {
            w
        } else {
            format!("{why}; {w}")
        };
    }
    let unfired: Vec<String> = result
        .launches
        .iter()
        .flat_map(|l| {
            l.unfired
                .iter()
                .map(move |u| format!("launch {}: {u}", l.launch))
        })
        .chain(
            result
                .postrun
                .iter()
                .flat_map(|p| p.unfired.iter().map(|u| format!("postrun: {u}"))),
        )
        .collect();
    let stuck: Vec<String> = result
        .launches
        .iter()
        .filter(|l| l.launcher_stuck)
        .map(|l| l.launch.to_string())
        .collect();
    if !stuck.is_empty() {
        why = format!(
            "{why} [note: the launcher outlived its ranks in launch {} and was killed]",
            stuck.join(", ")
        );
    }
    if !unfired.is_empty() {
        why = format!("{why} [faults that never fired: {}]", unfired.join("; "));
    }
    if !result.harness_errors.is_empty() {
        why = format!("{why} [harness: {}]", result.harness_errors.join("; "));
    }
    if verdict == Verdict::Never {
        cell.class = match result.outcome.headline() {
            Class::Hang => Class::Hang.name().into(),
            _ => Class::SilentCorruption.name().into(),
        };
    }
    cell.verdict = match verdict {
        Verdict::Expected if result.harness_errors.is_empty() && unfired.is_empty() => "expected",
        Verdict::Expected | Verdict::Unexpected => "unexpected",
        Verdict::Never => "NEVER",
    }
    .into();
    cell.why = why.trim().to_string();
    if cell.ok() && !settings.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        // Keep what happened next to the cell's files, for the post-mortem.
        let _ = std::fs::write(
            dir.join("result.json"),
            serde_json::to_string_pretty(&result).unwrap_or_default(),
        );
        cell.kept = Some(dir);
    }
    (cell, Some(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(scenario: &str, scheme: CopyType, outcome: &str, expected: &str, class: &str) -> Cell {
        let verdict = if class == Class::SilentCorruption.name() {
            "NEVER"
        } else if outcome == expected {
            "expected"
        } else {
            "unexpected"
        };
        Cell {
            scenario: scenario.into(),
            scheme,
            seed: 1,
            expected: expected.into(),
            outcome: outcome.into(),
            class: class.into(),
            verdict: verdict.into(),
            why: String::new(),
            time_s: 1.0,
            launches: 2,
            replay: "scr-harness campaign --only x".into(),
            kept: None,
        }
    }

    fn report() -> Report {
        Report {
            campaign: "test".into(),
            seed: 1,
            command: "scr-harness campaign".into(),
            cells: vec![
                cell(
                    "b-node",
                    CopyType::Single,
                    "scratch, loss | completed",
                    "scratch, loss | completed",
                    "loss",
                ),
                cell(
                    "b-node",
                    CopyType::Xor,
                    "scratch, rebuilt:3 | completed",
                    "scratch, rebuilt:3 | completed",
                    "rebuilt",
                ),
                cell(
                    "a-flip",
                    CopyType::Xor,
                    "scratch, cache:2 | completed",
                    "scratch, rebuilt:3 | completed",
                    "SILENT-CORRUPTION",
                ),
                cell(
                    "a-flip",
                    CopyType::Rs,
                    "scratch, cache:3 | completed",
                    "scratch, rebuilt:3 | completed",
                    "cache",
                ),
            ],
            time_s: 4.0,
        }
    }

    #[test]
    fn counts_and_the_summary_line() {
        let r = report();
        let c = r.counts();
        assert_eq!(
            (c.run, c.expected, c.unexpected, c.silent, c.hang),
            (4, 2, 2, 1, 0)
        );
        assert_eq!(
            r.summary_line(),
            "campaign test: 4 scenario runs, 2 as expected, 2 unexpected, 1 SILENT CORRUPTION, 0 HANG"
        );
    }

    #[test]
    fn the_outcome_table_has_no_times_and_marks_surprises() {
        insta::assert_snapshot!(report().outcome_table(), @r"
        | scenario | SINGLE | XOR | RS |
        |---|---|---|---|
        | a-flip | - | **scratch, cache:2 \| completed** (expected scratch, rebuilt:3 \| completed) | **scratch, cache:3 \| completed** (expected scratch, rebuilt:3 \| completed) |
        | b-node | scratch, loss \| completed | scratch, rebuilt:3 \| completed | - |
        ");
    }

    #[test]
    fn results_are_written_as_markdown_json_and_png() {
        let tmp = tempfile::tempdir().unwrap();
        let files = report().write(tmp.path()).unwrap();
        assert_eq!(files.len(), 3);
        let png = std::fs::read(&files[2]).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let back: Report =
            serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
        assert_eq!(back.cells.len(), 4);
        assert!(std::fs::read_to_string(&files[0])
            .unwrap()
            .contains("| a-flip | XOR | NEVER"));
    }

    /// A large campaign: `n` scenarios `random-0` ... with one XOR cell
    /// each, the one of `random-<bad>` not as expected.
    fn many(n: usize, bad: usize) -> Report {
        let mut r = report();
        let model = r.cells[0].clone();
        r.cells = (0..n)
            .map(|i| {
                let mut c = model.clone();
                c.scenario = format!("random-{i}");
                c.scheme = CopyType::Xor;
                c.verdict = if i == bad { "unexpected" } else { "expected" }.into();
                c.why = if i == bad {
                    "restarted from ckpt.2, expected ckpt.3".into()
                } else {
                    String::new()
                };
                c.class = "cache".into();
                c
            })
            .collect();
        r
    }

    #[test]
    fn a_large_campaign_is_plotted_in_readable_pages_in_natural_order() {
        let tmp = tempfile::tempdir().unwrap();
        let r = many(120, 7);
        let files = r.write(tmp.path()).unwrap();
        let pngs: Vec<String> = files
            .iter()
            .filter(|f| f.extension().is_some_and(|x| x == "png"))
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            pngs,
            [
                "campaign-test.png",
                "campaign-test-p2.png",
                "campaign-test-p3.png"
            ]
        );
        // No page is taller than 50 rows' worth.
        let (_, _, h) = crate::plot::page_pixels(&r, 0).unwrap();
        assert!(h < 1400, "{h} px");
        // Natural order in the table as in the plot.
        let table = r.outcome_table();
        let at = |n: &str| table.find(&format!("| {n} |")).unwrap();
        assert!(at("random-2") < at("random-10") && at("random-10") < at("random-100"));
        // A smaller campaign later removes the stale pages.
        let files = many(10, 99).write(tmp.path()).unwrap();
        assert_eq!(files.len(), 3);
        assert!(!tmp.path().join("campaign-test-p2.png").exists());
    }

    #[test]
    fn a_cell_not_as_expected_is_marked_in_red_and_listed() {
        let r = many(12, 7);
        // Natural order: random-7 is row 7.
        let (buf, w, _) = crate::plot::page_pixels(&r, 0).unwrap();
        let red_in = |((x0, y0), (x1, y1)): ((i32, i32), (i32, i32))| {
            let mut n = 0;
            for y in y0..y1 {
                for x in x0..x1 {
                    let i = ((y as u32 * w + x as u32) * 3) as usize;
                    let px = crate::plot::FAIL_RED;
                    if buf[i] == px.0 && buf[i + 1] == px.1 && buf[i + 2] == px.2 {
                        n += 1;
                    }
                }
            }
            n
        };
        let bad = red_in(crate::plot::cell_box(&r, 7, 0));
        let good = red_in(crate::plot::cell_box(&r, 6, 0));
        assert!(bad > 100, "{bad} red pixels in the failed cell");
        assert_eq!(good, 0);
    }

    #[test]
    fn cell_seeds_are_stable_and_distinct() {
        assert_eq!(
            cell_seed(1, "x", CopyType::Xor),
            cell_seed(1, "x", CopyType::Xor)
        );
        assert_ne!(
            cell_seed(1, "x", CopyType::Xor),
            cell_seed(1, "x", CopyType::Rs)
        );
        assert_ne!(
            cell_seed(1, "x", CopyType::Xor),
            cell_seed(2, "x", CopyType::Xor)
        );
        let d = data_seed(5, 8, 4, 1000);
        for r in 0..8 {
            for c in 1..=4 {
                let f = testing::data::file_plan(d, r, c, 1000);
                assert!(!f.is_empty() && f.iter().all(|f| f.size_bytes > 0));
            }
        }
    }
}
