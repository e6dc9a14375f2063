//! `scr_app`: the test application. It uses only `scr`'s public API, as a
//! user's MPI application would: restart from the newest checkpoint SCR
//! offers (verifying every byte), then write more checkpoints.
//!
//! ```text
//! mpirun -np 8 scr_app --seed 7 --checkpoints 3 --mean-bytes 65536 \
//!     [--prefix DIR] [--fail-after K] [--expect-restart NAME|none|any]
//!     [--until-exit] [--step-ms MS] [--ask-need] [--reference DIR]
//!     [--written-by N] [--shared-bytes N]
//! ```
//!
//! With `--written-by N` the restart checkpoint was written by N ranks
//! (a global restart on another rank count, SCR_GLOBAL_RESTART=1): rank
//! `r` reads the files of every writer `q` with `q mod size = r`, so every
//! byte of the checkpoint is verified by some rank.
//!
//! With `--reference DIR` the restart checkpoint `ckpt.<c>` is one written
//! by LLNL SCR 3.1's `test_api` (`ckpt.<c>/rank_<r>.ckpt`): each rank
//! compares its file, byte for byte, with `DIR/ckpt.<c>/rank_<r>.ckpt`.
//!
//! What rank `r` writes in checkpoint `c` is `testing::data::file_plan(seed,
//! r, c, mean_bytes)`: several files per rank, sizes differing, some ranks
//! writing nothing, every byte derived from `(seed, r, c)`. Files are routed
//! as `<prefix>/ckpt.<c>/<file>` and the checkpoint is named `ckpt.<c>`.
//!
//! At start, while SCR has a restart candidate: read every planned file
//! through `route_file`, check its size and every byte, and complete the
//! restart with the result; on failure SCR offers the next older one.
//! Then write `--checkpoints` more, numbered after the restarted one.
//!
//! With `--until-exit` the application loops like a long-running code, for
//! at most `--checkpoints` steps: compute (sleep `--step-ms`), checkpoint
//! (only when SCR_Need_checkpoint says so with `--ask-need`), then ask
//! SCR_Should_exit and stop when it says yes — after a last checkpoint if
//! Need_checkpoint asks for one. Rank 0 prints `SCR_APP step=K need=<b>
//! checkpoint=<name|-> should_exit=<b> t0_ms=<unix ms> t1_ms=<unix ms>`
//! (t0/t1 bracket the Should_exit call) per step and `SCR_APP halted
//! step=K need_at_exit=<b>` when it stops.
//!
//! With `--fail-after K` the run ends abruptly after its K-th checkpoint of
//! this run completed on every rank: exit code 42, no SCR_Finalize, no
//! MPI_Finalize (a crash, so a launcher can remove a node and relaunch).
//!
//! Rank 0 prints machine-readable lines starting with `SCR_APP `:
//! `SCR_APP init ...` (what SCR found in cache), `SCR_APP restart_attempt
//! ... source=<cache|rebuilt|fetched> ...`, `SCR_APP restarted name=<name|none> ...`
//! (the restart is decided), `SCR_APP checkpoint ...`, `SCR_APP
//! MISMATCH rank=R ckpt=C file=F offset=O ...` for every wrong byte found,
//! `SCR_APP crash ...`, with `--until-exit` `SCR_APP step=...` and `SCR_APP
//! halted ...` (SCR_Should_exit said stop: the run finalizes and exits 0),
//! and last `SCR_APP
//! restart=<name|none> source=<cache|rebuilt|fetched|none> verified_bytes=<N>
//! checkpoints_written=<K> halted=<bool> status=<ok|MISMATCH|UNEXPECTED|error>`.
//!
//! Built with `--features scr/fault-injection`, every rank passes two
//! injection points of its own once per checkpoint (hit N = checkpoint N of
//! this run): `app.file.write` after writing its first file ("during file
//! write"), and `app.compute` after a barrier that follows Complete_output
//! ("between checkpoints": every rank has finished checkpoint N).
//!
//! Exit codes: 0 ok; 2 some byte read back was wrong (never hidden); 3 the
//! restart differed from `--expect-restart`; 42 simulated crash; 1 an SCR
//! or MPI error (the job is aborted); 64 bad usage.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
use scr::comm::{Comm, ReduceOp};
use scr::config::Environment;
use scr::{Flags, InitOptions, Scr};
use testing::data::{file_plan, fill, first_mismatch, FileSpec};

/// Largest piece generated or verified at once.
const PIECE_BYTES: usize = 1 << 20;
/// Bound on restart attempts (each failed one drops a candidate anyway).
const MAX_RESTART_ATTEMPTS: usize = 1000;

#[derive(Parser, Debug)]
#[command(
    name = "scr_app",
    about = "SCR test application: verify the restart checkpoint byte by byte, then write checkpoints"
)]
struct Args {
    /// Seed of the deterministic data (must be the same across runs).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Checkpoints to write in this run (ids continue after the restarted one).
    #[arg(long, default_value_t = 3)]
    checkpoints: u64,
    /// Mean file size in bytes (files range from 0 to twice this).
    #[arg(long, default_value_t = 65536)]
    mean_bytes: u64,
    /// Prefix directory (default: SCR_PREFIX, else the current directory).
    #[arg(long)]
    prefix: Option<PathBuf>,
    /// Crash (exit 42 without finalize) after this many checkpoints of this run.
    #[arg(long)]
    fail_after: Option<u64>,
    /// Check the restart: a checkpoint name, `none`, or `any`.
    #[arg(long)]
    expect_restart: Option<String>,
    /// Loop until SCR_Should_exit says yes (at most --checkpoints steps).
    #[arg(long)]
    until_exit: bool,
    /// Milliseconds of "compute" before each step's checkpoint decision.
    #[arg(long, default_value_t = 0)]
    step_ms: u64,
    /// Checkpoint only when SCR_Need_checkpoint says so.
    #[arg(long)]
    ask_need: bool,
    /// Mark every checkpoint whose id is a multiple of K as output too
    /// (SCR_FLAG_OUTPUT: it must reach the prefix directory).
    #[arg(long, value_name = "K")]
    output_every: Option<u64>,
    /// The restart checkpoint is LLNL test_api's: compare each rank's
    /// `ckpt.<c>/rank_<r>.ckpt` with the copy under this directory.
    #[arg(long, value_name = "DIR")]
    reference: Option<PathBuf>,
    /// The restart checkpoint was written by N ranks (a global restart on
    /// another rank count, SCR_GLOBAL_RESTART=1): rank r reads and
    /// verifies the files of every writer q with q mod size = r, by path.
    #[arg(long, value_name = "N")]
    written_by: Option<u32>,
    /// Every checkpoint also has one file shared by all ranks,
    /// `ckpt.<c>/shared.dat`: rank r writes N bytes at offset r·N (a
    /// shared file: bypass mode only, an error in cache mode, as in SCR
    /// 3.1); a restart reads back and checks each rank's region.
    #[arg(long, value_name = "N")]
    shared_bytes: Option<u64>,
    /// An error from SCR_Start_output, SCR_Route_file or
    /// SCR_Complete_output (or a checkpoint found invalid) is reported and
    /// the run goes on to its next step, as an application that checks the
    /// return code and carries on: the library must have failed the call
    /// on every rank alike, or the ranks hang in mismatched collectives.
    #[arg(long)]
    keep_going: bool,
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// The process environment with SCR_PREFIX overridden by `--prefix`.
struct AppEnv {
    prefix: PathBuf,
}

impl Environment for AppEnv {
    fn var(&self, name: &str) -> Option<String> {
        if name == "SCR_PREFIX" {
            return Some(self.prefix.to_string_lossy().into_owned());
        }
        std::env::var(name).ok()
    }
    fn current_dir(&self) -> Option<PathBuf> {
        std::env::current_dir().ok()
    }
}

/// Wrong bytes (or a wrong size) found in one file.
struct Mismatch {
    ckpt: u64,
    file: String,
    offset: u64,
    why: String,
}

/// The outcome of one restart attempt on this rank.
#[derive(Default)]
struct ReadResult {
    verified_bytes: u64,
    unreadable: Vec<String>,
    mismatches: Vec<Mismatch>,
}

fn main() -> ExitCode {
    install_abort_on_panic();
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            // Help and version go to stdout with success; misuse exits 64.
            let code = if e.use_stderr() { 64 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let env = MpiEnv::init();
    let app = world_or_abort();
    let rank = app.rank();
    let prefix = match &args.prefix {
        Some(p) => p.clone(),
        None => std::env::var_os("SCR_PREFIX")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    let prefix = match std::path::absolute(&prefix) {
        Ok(p) => p,
        Err(e) => fail(rank, "prefix", &e),
    };
    if let Err(e) = fs::create_dir_all(&prefix) {
        fail(rank, "creating the prefix directory", &e)
    }
    let code = run(&args, &app, &prefix);
    drop(app);
    drop(env);
    code
}

fn world_or_abort() -> MpiComm {
    match MpiComm::world() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("scr_app: {e}");
            abort_job(1)
        }
    }
}

/// Report an error that leaves the ranks out of step and end the job.
fn fail(rank: usize, what: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("scr_app: rank {rank}: {what}: {e}");
    if rank == 0 {
        println!(
            "SCR_APP error rank=0 during={what:?} message={:?}",
            e.to_string()
        );
        println!(
            "SCR_APP restart=unknown source=unknown verified_bytes=0 checkpoints_written=0 status=error"
        );
        let _ = std::io::stdout().flush();
    } else {
        // When every rank fails at once (a bad configuration at
        // SCR_Init), rank 0's report must reach the launcher before another
        // rank's abort kills it: the others abort a moment later.
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    abort_job(1)
}

fn ok_or_fail<T, E: std::fmt::Display>(rank: usize, what: &str, r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => fail(rank, what, &e),
    }
}

fn ckpt_path(prefix: &Path, ckpt: u64, spec: &FileSpec) -> PathBuf {
    prefix.join(format!("ckpt.{ckpt}")).join(&spec.name)
}

fn ids<T: std::fmt::Display>(v: &[T]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn run(args: &Args, app: &MpiComm, prefix: &Path) -> ExitCode {
    let rank = app.rank();
    let size = app.size();
    let world = ok_or_fail(rank, "MpiComm::world", MpiComm::world());
    let opts = InitOptions {
        env: Some(Box::new(AppEnv {
            prefix: prefix.to_path_buf(),
        })),
        ..InitOptions::default()
    };
    let mut scr = ok_or_fail(rank, "SCR_Init", Scr::init_with(Box::new(world), opts));
    let report = scr.init_report().clone();
    if rank == 0 {
        let lost: Vec<String> = report
            .lost
            .iter()
            .map(|(d, why)| format!("{d}:{why}"))
            .collect();
        println!(
            "SCR_APP init ranks={size} found={} available={} rebuilt={} lost_ids={} skipped_ids={} moved_files={} fetched={} fetch_failed={} fetch_error={}",
            ids(&report.found),
            ids(&report.available),
            ids(&report.rebuilt),
            ids(&report.lost.iter().map(|l| l.0).collect::<Vec<_>>()),
            ids(&report.skipped.iter().map(|l| l.0).collect::<Vec<_>>()),
            report.moved_files,
            report.fetched.map_or("none".to_string(), |d| d.to_string()),
            ids(&report.fetch_failed.iter().map(|l| l.0).collect::<Vec<_>>()),
            report.fetch_error.is_some()
        );
        for l in &lost {
            println!("SCR_APP lost {l}");
        }
        for (d, why) in &report.fetch_failed {
            println!("SCR_APP fetch_failed {d}:{why}");
        }
        if let Some(why) = &report.fetch_error {
            println!("SCR_APP fetch_error {why}");
        }
    }

    // Restart: newest candidate first; SCR drops a failed one and offers
    // the next older.
    let mut restarted: Option<(String, u64, &'static str)> = None;
    let mut verified_total = 0u64;
    let mut mismatches_total = 0i64;
    for _ in 0..MAX_RESTART_ATTEMPTS {
        let Some(name) = ok_or_fail(rank, "SCR_Have_restart", scr.have_restart()) else {
            break;
        };
        let mut phase = ok_or_fail(rank, "SCR_Start_restart", scr.start_restart());
        let dset = phase.dataset_id();
        let ckpt = name
            .strip_prefix("ckpt.")
            .and_then(|s| s.parse::<u64>().ok());
        let mut res = ReadResult::default();
        match ckpt {
            Some(c) if args.reference.is_some() => {
                let reference = args.reference.as_deref().unwrap_or(Path::new("."));
                compare_with_reference(&mut phase, prefix, reference, c, rank, &mut res);
            }
            Some(c) => {
                let writers = args.written_by.unwrap_or(size as u32);
                for q in (rank as u32..writers).step_by(size.max(1)) {
                    for spec in file_plan(args.seed, q, c, args.mean_bytes) {
                        read_and_verify(&mut phase, prefix, c, &spec, &mut res);
                    }
                }
                if let Some(n) = args.shared_bytes {
                    let region = (rank as u64 * n, n);
                    let key = shared_key(args.seed, c);
                    read_shared(&mut phase, prefix, c, key, region, &mut res);
                }
            }
            None => res
                .unreadable
                .push(format!("checkpoint name {name:?} is not ckpt.<id>")),
        }
        let local_ok = res.unreadable.is_empty() && res.mismatches.is_empty();
        let all_ok = ok_or_fail(rank, "SCR_Complete_restart", phase.complete(local_ok));
        // Every rank's wrong bytes reach rank 0's output: never hidden.
        let mut counts = [
            res.mismatches.len() as i64,
            res.unreadable.len() as i64,
            res.verified_bytes as i64,
        ];
        ok_or_fail(
            rank,
            "allreduce",
            app.allreduce_i64(&mut counts, ReduceOp::Sum),
        );
        let mut lines = String::new();
        for m in &res.mismatches {
            eprintln!(
                "scr_app: rank {rank}: MISMATCH in {name} file {} at offset {}: {}",
                m.file, m.offset, m.why
            );
            lines.push_str(&format!(
                "SCR_APP MISMATCH rank={rank} ckpt={} file={} offset={} why={:?}\n",
                m.ckpt, m.file, m.offset, m.why
            ));
        }
        for u in &res.unreadable {
            eprintln!("scr_app: rank {rank}: unreadable in {name}: {u}");
            lines.push_str(&format!(
                "SCR_APP unreadable rank={rank} name={name} why={u:?}\n"
            ));
        }
        let gathered = ok_or_fail(rank, "gather", app.gather_bytes(0, lines.as_bytes()));
        if let Some(all) = gathered {
            for l in all {
                print!("{}", String::from_utf8_lossy(&l));
            }
            println!(
                "SCR_APP restart_attempt name={name} dataset={dset} ok={all_ok} source={} verified_bytes={} mismatches={} unreadable={}",
                source_of(&report, dset), counts[2], counts[0], counts[1]
            );
        }
        mismatches_total += counts[0];
        if all_ok {
            let source = source_of(&report, dset);
            verified_total = counts[2] as u64;
            restarted = Some((name, ckpt.unwrap_or(0), source));
            break;
        }
    }

    let unexpected = match args.expect_restart.as_deref() {
        None | Some("any") => None,
        Some("none") => restarted.as_ref().map(|r| r.0.clone()),
        Some(want) => match &restarted {
            Some(r) if r.0 == want => None,
            Some(r) => Some(r.0.clone()),
            None => Some("none".into()),
        },
    };

    if rank == 0 {
        // The restart is decided: whatever happens next is about new checkpoints.
        let (name, source) = restarted
            .as_ref()
            .map_or(("none", "none"), |r| (r.0.as_str(), r.2));
        println!("SCR_APP restarted name={name} source={source} verified_bytes={verified_total}");
    }

    // Checkpoints after the restarted one (or steps, with --until-exit).
    let mut next = restarted.as_ref().map_or(1, |r| r.1 + 1);
    let mut written = 0u64;
    let mut halted = false;
    for step in 1..=args.checkpoints {
        if args.step_ms > 0 {
            std::thread::sleep(std::time::Duration::from_millis(args.step_ms));
        }
        let need = !args.ask_need || ok_or_fail(rank, "SCR_Need_checkpoint", scr.need_checkpoint());
        let mut name = None;
        if need {
            name = Some(write_checkpoint(
                args,
                &mut scr,
                app,
                prefix,
                next,
                &mut written,
            ));
            next += 1;
        }
        if !args.until_exit {
            continue;
        }
        let t0 = unix_ms();
        let exit = ok_or_fail(rank, "SCR_Should_exit", scr.should_exit());
        let t1 = unix_ms();
        if rank == 0 {
            println!(
                "SCR_APP step={step} need={need} checkpoint={} should_exit={exit} t0_ms={t0} t1_ms={t1}",
                name.as_deref().unwrap_or("-")
            );
        }
        if exit {
            // A pending halt asks for a last checkpoint (if this step wrote none).
            let need_at_exit =
                need || ok_or_fail(rank, "SCR_Need_checkpoint", scr.need_checkpoint());
            if need_at_exit && !need {
                write_checkpoint(args, &mut scr, app, prefix, next, &mut written);
            }
            if rank == 0 {
                println!("SCR_APP halted step={step} need_at_exit={need_at_exit}");
            }
            halted = true;
            break;
        }
    }

    ok_or_fail(rank, "SCR_Finalize", scr.finalize());
    let status = if mismatches_total > 0 {
        "MISMATCH"
    } else if unexpected.is_some() {
        "UNEXPECTED"
    } else {
        "ok"
    };
    if rank == 0 {
        if let Some(got) = &unexpected {
            println!(
                "SCR_APP expected_restart={} got={got}",
                args.expect_restart.as_deref().unwrap_or("any")
            );
        }
        let (name, source) = restarted
            .as_ref()
            .map_or(("none", "none"), |r| (r.0.as_str(), r.2));
        println!(
            "SCR_APP restart={name} source={source} verified_bytes={verified_total} checkpoints_written={written} halted={halted} status={status}"
        );
    }
    match status {
        "ok" => ExitCode::SUCCESS,
        "MISMATCH" => ExitCode::from(2),
        _ => ExitCode::from(3),
    }
}

/// The application's own "during file write" moment for the
/// fault-injection testbed: once per checkpoint on every rank, after its
/// first file (or at once when it writes none), so hit N is checkpoint N of
/// this run. Nothing without the feature. An injected error fails the
/// checkpoint on this rank.
fn mid_write(rank: usize) -> bool {
    match scr::fault_point!("app.file.write", rank = rank as u32) {
        Ok(()) => true,
        Err(e) => {
            eprintln!("scr_app: rank {rank}: writing: {}", std::io::Error::from(e));
            false
        }
    }
}

/// Where SCR found dataset `dset` at init: fetched from the prefix, rebuilt
/// in cache, or in cache as it was.
fn source_of(report: &scr::dataset::InitReport, dset: i64) -> &'static str {
    if report.fetched == Some(dset) {
        "fetched"
    } else if report.rebuilt.contains(&scr::ids::DatasetId(dset)) {
        "rebuilt"
    } else {
        "cache"
    }
}

/// Write checkpoint `ckpt.<c>` (every rank's planned files), report it,
/// and crash here if `--fail-after` says so. Returns its name.
fn write_checkpoint(
    args: &Args,
    scr: &mut Scr,
    app: &MpiComm,
    prefix: &Path,
    c: u64,
    written: &mut u64,
) -> String {
    let rank = app.rank();
    let name = format!("ckpt.{c}");
    let flags = match args.output_every {
        Some(k) if k > 0 && c.is_multiple_of(k) => Flags::CHECKPOINT | Flags::OUTPUT,
        _ => Flags::CHECKPOINT,
    };
    let mut out = match scr.start_output(Some(&name), flags) {
        Ok(out) => out,
        Err(e) if args.keep_going => {
            eprintln!("scr_app: rank {rank}: SCR_Start_output {name}: {e}; going on");
            return after_checkpoint(args, app, name, false, written);
        }
        Err(e) => fail(rank, "SCR_Start_output", &e),
    };
    let mut ok = true;
    let mut mid_write_passed = false;
    for spec in file_plan(args.seed, rank as u32, c, args.mean_bytes) {
        let path = match out.route_file(ckpt_path(prefix, c, &spec)) {
            Ok(p) => p,
            Err(e) if args.keep_going => {
                eprintln!("scr_app: rank {rank}: SCR_Route_file: {e}; going on");
                ok = false;
                continue;
            }
            Err(e) => fail(rank, "SCR_Route_file", &e),
        };
        if let Err(e) = write_file(&path, &spec) {
            eprintln!("scr_app: rank {rank}: writing {}: {e}", path.display());
            ok = false;
        }
        if !mid_write_passed {
            mid_write_passed = true;
            ok &= mid_write(rank);
        }
    }
    if !mid_write_passed {
        ok &= mid_write(rank);
    }
    if let Some(n) = args.shared_bytes {
        let path = ok_or_fail(
            rank,
            "SCR_Route_file",
            out.route_file(shared_path(prefix, c)),
        );
        if let Err(e) = write_shared(&path, shared_key(args.seed, c), rank as u64 * n, n) {
            eprintln!("scr_app: rank {rank}: writing {}: {e}", path.display());
            ok = false;
        }
    }
    let complete = match out.complete(ok) {
        Ok(c) => c,
        Err(e) if args.keep_going => {
            eprintln!("scr_app: rank {rank}: SCR_Complete_output {name}: {e}; going on");
            false
        }
        Err(e) => fail(rank, "SCR_Complete_output", &e),
    };
    if rank == 0 {
        println!("SCR_APP checkpoint name={name} complete={complete}");
    }
    if !complete && !args.keep_going {
        fail(rank, "SCR_Complete_output", &format!("{name} is not valid"));
    }
    after_checkpoint(args, app, name, complete, written)
}

/// What follows a checkpoint's Complete_output (or its failed
/// Start_output with `--keep-going`): count it when it completed, the
/// barrier and the `app.compute` moment, and `--fail-after`'s crash.
fn after_checkpoint(
    args: &Args,
    app: &MpiComm,
    name: String,
    complete: bool,
    written: &mut u64,
) -> String {
    let rank = app.rank();
    if complete {
        *written += 1;
    }
    // "Between checkpoints": every rank has finished Complete_output (the
    // barrier), then the fault-injection testbed's moment `app.compute`
    // (hit N = checkpoint N of this run; nothing without the feature). An
    // injected error here has nothing to fail.
    ok_or_fail(rank, "barrier", app.barrier());
    if let Err(e) = scr::fault_point!("app.compute", rank = rank as u32) {
        eprintln!("scr_app: rank {rank}: {}", std::io::Error::from(e));
    }
    if args.fail_after == Some(*written) {
        // Everyone completed the checkpoint before anyone dies.
        ok_or_fail(rank, "barrier", app.barrier());
        if rank == 0 {
            println!("SCR_APP crash after_checkpoints={written} last={name}");
            let _ = std::io::stdout().flush();
        }
        ok_or_fail(rank, "barrier", app.barrier());
        std::process::exit(42);
    }
    name
}

/// The file all ranks share in checkpoint `c` (`--shared-bytes`).
fn shared_path(prefix: &Path, c: u64) -> PathBuf {
    prefix.join(format!("ckpt.{c}")).join("shared.dat")
}

/// The data key of the shared file of checkpoint `c`.
fn shared_key(seed: u64, c: u64) -> u64 {
    testing::data::mix64(seed ^ c.rotate_left(32) ^ 0x5a5a_0000_5a5a)
}

/// Write this rank's region (`len` bytes at `offset`) of a shared file,
/// leaving the other ranks' regions alone.
fn write_shared(path: &Path, key: u64, offset: u64, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let mut buf = vec![0u8; len as usize];
    fill(key, offset, &mut buf);
    f.write_all_at(&buf, offset)?;
    f.sync_all()
}

/// Read back and check this rank's region of the shared file.
fn read_shared(
    phase: &mut scr::RestartPhase<'_>,
    prefix: &Path,
    ckpt: u64,
    key: u64,
    (offset, len): (u64, u64),
    res: &mut ReadResult,
) {
    use std::os::unix::fs::FileExt;
    let name = "shared.dat".to_string();
    let path = match phase.route_file(shared_path(prefix, ckpt)) {
        Ok(p) => p,
        Err(e) => {
            res.unreadable.push(format!("{name}: {e}"));
            return;
        }
    };
    let mut buf = vec![0u8; len as usize];
    let read = fs::File::open(&path).and_then(|f| f.read_exact_at(&mut buf, offset));
    if let Err(e) = read {
        res.unreadable
            .push(format!("{name} ({}): {e}", path.display()));
        return;
    }
    match first_mismatch(key, offset, &buf) {
        Some(at) => res.mismatches.push(Mismatch {
            ckpt,
            file: name,
            offset: at,
            why: "wrong byte in this rank's region".into(),
        }),
        None => res.verified_bytes += len,
    }
}

/// Route this rank's file of LLNL test_api's checkpoint `ckpt`
/// (`ckpt.<c>/rank_<r>.ckpt`) and compare it, byte for byte, with the copy
/// under `reference`.
fn compare_with_reference(
    phase: &mut scr::RestartPhase<'_>,
    prefix: &Path,
    reference: &Path,
    ckpt: u64,
    rank: usize,
    res: &mut ReadResult,
) {
    let rel = PathBuf::from(format!("ckpt.{ckpt}")).join(format!("rank_{rank}.ckpt"));
    let name = rel.display().to_string();
    let got = phase
        .route_file(prefix.join(&rel))
        .map_err(|e| e.to_string())
        .and_then(|p| fs::read(&p).map_err(|e| format!("{}: {e}", p.display())));
    let want = fs::read(reference.join(&rel)).map_err(|e| format!("reference: {e}"));
    match (got, want) {
        (Err(e), _) | (_, Err(e)) => res.unreadable.push(format!("{name}: {e}")),
        (Ok(got), Ok(want)) => match got.iter().zip(&want).position(|(a, b)| a != b) {
            Some(at) => res.mismatches.push(Mismatch {
                ckpt,
                file: name,
                offset: at as u64,
                why: "differs from the reference".into(),
            }),
            None if got.len() != want.len() => res.mismatches.push(Mismatch {
                ckpt,
                file: name,
                offset: got.len().min(want.len()) as u64,
                why: format!("{} bytes, the reference has {}", got.len(), want.len()),
            }),
            None => res.verified_bytes += got.len() as u64,
        },
    }
}

/// Route one planned file of checkpoint `ckpt`, check its size and every
/// byte, and record what was found.
fn read_and_verify(
    phase: &mut scr::RestartPhase<'_>,
    prefix: &Path,
    ckpt: u64,
    spec: &FileSpec,
    res: &mut ReadResult,
) {
    let path = match phase.route_file(ckpt_path(prefix, ckpt, spec)) {
        Ok(p) => p,
        Err(e) => {
            res.unreadable.push(format!("{}: {e}", spec.name));
            return;
        }
    };
    let mut f = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            res.unreadable
                .push(format!("{} ({}): {e}", spec.name, path.display()));
            return;
        }
    };
    let mut buf = vec![0u8; PIECE_BYTES];
    let mut offset = 0u64;
    loop {
        let n = match f.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                res.unreadable
                    .push(format!("{} ({}): {e}", spec.name, path.display()));
                return;
            }
        };
        if n == 0 {
            break;
        }
        let valid = n.min(spec.size_bytes.saturating_sub(offset) as usize);
        if let Some(at) = first_mismatch(spec.key, offset, &buf[..valid]) {
            res.mismatches.push(Mismatch {
                ckpt,
                file: spec.name.clone(),
                offset: at,
                why: "wrong byte".into(),
            });
            return;
        }
        if valid < n {
            res.mismatches.push(Mismatch {
                ckpt,
                file: spec.name.clone(),
                offset: spec.size_bytes,
                why: format!("longer than the {} bytes written", spec.size_bytes),
            });
            return;
        }
        offset += n as u64;
        res.verified_bytes += n as u64;
    }
    if offset < spec.size_bytes {
        res.mismatches.push(Mismatch {
            ckpt,
            file: spec.name.clone(),
            offset,
            why: format!("truncated: {offset} of {} bytes", spec.size_bytes),
        });
    }
}

fn write_file(path: &Path, spec: &FileSpec) -> std::io::Result<()> {
    let mut f = fs::File::create(path)?;
    let mut buf = vec![0u8; PIECE_BYTES.min(spec.size_bytes as usize)];
    let mut offset = 0u64;
    while offset < spec.size_bytes {
        let n = buf.len().min((spec.size_bytes - offset) as usize);
        fill(spec.key, offset, &mut buf[..n]);
        f.write_all(&buf[..n])?;
        offset += n as u64;
    }
    f.sync_all()
}
