//! The user API (user-api.txt, SCR v3): a typed Rust form of SCR_Init,
//! SCR_Config, SCR_Need_checkpoint, SCR_Start_output / Route_file /
//! Complete_output, SCR_Have_restart, SCR_Start_restart / Route_file /
//! Complete_restart, SCR_Should_exit, SCR_Current, SCR_Delete, SCR_Drop,
//! SCR_Finalize and SCR_Get_version.
//!
//! Phases are objects borrowing the [`Scr`] handle mutably, so starting a
//! phase inside another or routing a file outside a phase cannot compile.
//! Calls that SCR makes collective are collective here, and every rank gets
//! the same answer.
//!
//! An error reaches the user through its Display and its causes
//! ([`crate::exit::error_report`]), not through `main() -> Result`, which
//! prints the Debug form (`Error: Config(BadValue { .. })`):
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     match run() {
//!         Ok(()) => std::process::ExitCode::SUCCESS,
//!         Err(e) => {
//!             eprintln!("{}", scr::exit::error_report("app", &*e));
//!             std::process::ExitCode::FAILURE
//!         }
//!     }
//! }
//!
//! fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use scr::comm::Comm;
//! let _mpi = scr::comm::mpi::MpiEnv::init(); // MPI_Init (the application's)
//! scr::comm::mpi::install_abort_on_panic();
//! let world = scr::comm::mpi::MpiComm::world()?; // a duplicate of MPI_COMM_WORLD
//! // Each rank routes its own file: two ranks routing one name would
//! // overwrite each other's data in the prefix.
//! let file = format!("ckpt/rank_{}.dat", world.rank());
//! let mut scr = scr::Scr::init(Box::new(world))?;
//! if let Some(name) = scr.have_restart()? {
//!     let mut r = scr.start_restart()?;
//!     let path = r.route_file(&file)?;
//!     let ok = std::fs::read(&path).is_ok_and(|b| b == b"state");
//!     r.complete(ok)?;
//!     println!("restarted from {name}");
//! }
//! let mut out = scr.start_output(Some("step10"), scr::Flags::CHECKPOINT)?;
//! let path = out.route_file(&file)?;
//! std::fs::write(&path, b"state")?;
//! out.complete(true)?;
//! scr.finalize()?;
//! Ok(())
//! }
//! ```
//!
//! `scr/examples/checkpoint_restart.rs` is the whole application: a loop of
//! steps, SCR_Need_checkpoint, and a restart that checks every byte.

use std::fs;
use std::ops::BitOr;
use std::path::{Path, PathBuf};

use crate::cache::Job;
use crate::clock::{SharedClock, Tick};
use crate::comm::Comm;
use crate::config::{load_collective, Config, Environment, LoadOptions, Settings};
use crate::dataset::restart::{self, InitReport};
use crate::dataset::{output, Dataset};
use crate::error::{io_err, ScrError, ScrResult};
use crate::halt::{CheckAt, HaltMonitor, Halted};
use crate::ids::DatasetId;
use crate::log::writer::{Entry, EventType};
use crate::records::halt::{Halt, REASON_FINALIZE_CALLED};
use crate::records::index::{index_path, Index};
use crate::records::meta::FileType;
use crate::records::Record;
use crate::storage::crc_writer::CrcWriter;
use crate::storage::dirs::NodeIdentity;
use crate::storage::path as spath;

mod adaptive;
mod flushing;
mod notices;
mod protecting;
mod prune;
mod restart_phase;

pub use restart_phase::RestartPhase;

/// `SCR_MAX_FILENAME`: names and paths must be shorter than this.
pub const MAX_FILENAME: usize = 1024;

/// The version string SCR_Get_version returns.
pub const VERSION: &str = crate::log::msg::VERSION;

/// Dataset properties (`SCR_FLAG_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(u32);

impl Flags {
    /// `SCR_FLAG_NONE`.
    pub const NONE: Flags = Flags(0);
    /// `SCR_FLAG_CHECKPOINT`: the dataset can restart the application.
    pub const CHECKPOINT: Flags = Flags(1);
    /// `SCR_FLAG_OUTPUT`: the dataset must reach the prefix directory.
    pub const OUTPUT: Flags = Flags(2);

    /// From the C integer.
    pub fn from_bits(bits: u32) -> Flags {
        Flags(bits & 3)
    }
    /// The C integer.
    pub fn bits(self) -> u32 {
        self.0
    }
    /// True when every flag of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// Options of [`Scr::init_with`].
#[derive(Default)]
pub struct InitOptions {
    /// SCR_Config strings applied before init, in order (every rank passes the same).
    pub configs: Vec<String>,
    /// Where parameters come from; the process environment when `None`.
    pub env: Option<Box<dyn Environment>>,
    /// This process's node; from `SCR_NODE_NAME`/`SCR_NODE_ROOT` or the hostname when `None`.
    pub node: Option<NodeIdentity>,
    /// Config file options.
    pub load: LoadOptions,
    /// The clock every time-driven policy reads; the system clock when
    /// `None` (a test passes a [`crate::clock::ManualClock`]).
    pub clock: Option<SharedClock>,
}

/// Timing state behind Need_checkpoint's policies.
#[derive(Debug, Default)]
struct NeedState {
    calls: u64,
    last_end: Option<Tick>,
    checkpoints: u64,
    total_cost_s: f64,
    /// (checkpoint id, cost) of this run's completed checkpoints.
    costs: Vec<(i64, f64)>,
    /// (checkpoint id, seconds) of this run's synchronous flushes of
    /// checkpoints due by SCR_FLUSH: the adaptive policy's top level.
    flush_costs: Vec<(i64, f64)>,
    adaptive: adaptive::AdaptiveState,
}

/// An initialised SCR library (between SCR_Init and SCR_Finalize).
pub struct Scr {
    job: Option<Job>,
    report: InitReport,
    /// Checkpoints available for restart, newest first.
    candidates: Vec<DatasetId>,
    need: NeedState,
    init_at: Tick,
    finalized: bool,
    /// When the current compute phase began (for COMPUTE_END's secs).
    compute_at: Option<Tick>,
    /// Halt conditions: the halt file, SCR_HALT_SECONDS, SCR_HALT_EXIT.
    halt: HaltMonitor,
    /// The phase opened by the non-borrowing `*_dyn` calls (C API).
    phase: Option<DynPhase>,
    /// Flush bookkeeping: what is in the prefix, the background flush.
    prefix: flushing::PrefixState,
    /// Now, for every policy that depends on time (also in `job.clock`).
    clock: SharedClock,
    /// The configuration's warnings at init (refused parameters included).
    config_warnings: Vec<crate::config::ConfigWarning>,
    /// The checkpoint being protected in the background (SCR_ENCODE_ASYNC).
    pending_protect: Option<protecting::Pending>,
}

/// The state of a phase kept inside [`Scr`] by the `*_dyn` calls, for
/// callers (the C API) that cannot hold a borrowing phase object.
#[derive(Debug)]
enum DynPhase {
    Output {
        ds: Option<Box<Dataset>>,
        started: Tick,
    },
    Restart {
        dset: DatasetId,
        name: String,
        started: Tick,
    },
}

fn check_name(name: &str) -> ScrResult<()> {
    if name.len() >= MAX_FILENAME {
        return Err(ScrError::NameTooLong { len: name.len() });
    }
    if name.is_empty() {
        return Err(ScrError::BadName {
            name: name.into(),
            why: "empty",
        });
    }
    if name.contains('\0') {
        return Err(ScrError::BadName {
            name: name.into(),
            why: "contains a NUL byte",
        });
    }
    Ok(())
}

/// Check that every rank passed the same `value` (rank 0's wins the message).
fn same_everywhere(comm: &dyn Comm, call: &'static str, value: &str) -> ScrResult<()> {
    let mut buf = value.as_bytes().to_vec();
    comm.bcast_bytes(0, &mut buf)?;
    let same = comm.all_true(buf == value.as_bytes())?;
    if !same {
        return Err(ScrError::NotCollective {
            call,
            rank0: String::from_utf8_lossy(&buf).into_owned(),
        });
    }
    Ok(())
}

struct ProcessEnv;
impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn current_dir(&self) -> Option<PathBuf> {
        std::env::current_dir().ok()
    }
}

impl Scr {
    /// SCR_Init with the process environment. Collective over `comm`
    /// (SCR duplicates MPI_COMM_WORLD: pass a duplicate).
    pub fn init(comm: Box<dyn Comm>) -> ScrResult<Scr> {
        Scr::init_with(comm, InitOptions::default())
    }

    /// SCR_Init with explicit options. Reads the configuration on rank 0 and
    /// broadcasts it, prepares the control and cache directories, and
    /// restarts in place from the cache (rebuilding what redundancy allows)
    /// unless SCR_DISTRIBUTE=0.
    pub fn init_with(comm: Box<dyn Comm>, opts: InitOptions) -> ScrResult<Scr> {
        let env: Box<dyn Environment> = opts.env.unwrap_or_else(|| Box::new(ProcessEnv));
        let mut cfg: Config = load_collective(comm.as_ref(), env.as_ref(), &opts.load)?;
        same_everywhere(comm.as_ref(), "SCR_Config", &opts.configs.join("\n"))?;
        for c in &opts.configs {
            cfg.apply_scr_config(c)?;
        }
        cfg.mark_initialized();
        // Every parameter is parsed here, once; a bad value stops SCR_Init
        // (even with SCR_ENABLE=0, as a bad value in a file already does).
        let settings = Settings::from_config(&cfg)?;
        let enabled = settings.enable;
        let clock = opts.clock.unwrap_or_else(crate::clock::system);
        let mut scr = Scr {
            job: None,
            report: InitReport::default(),
            candidates: Vec::new(),
            need: NeedState::default(),
            init_at: clock.now(),
            finalized: false,
            phase: None,
            compute_at: None,
            halt: HaltMonitor::default(),
            prefix: flushing::PrefixState::default(),
            clock,
            config_warnings: Vec::new(),
            pending_protect: None,
        };
        if !enabled {
            return Ok(scr);
        }
        let node = opts
            .node
            .unwrap_or_else(|| NodeIdentity::from_env(|k| std::env::var_os(k)));
        let mut job = Job::new(comm, cfg, settings, node)?;
        job.clock = scr.clock.clone();
        job.open_log();
        scr.config_warnings = notices::announce(&job);
        job.log(
            Entry::event(EventType::Start)
                .procs_nodes(job.world.size() as u64, job.node_count as u64),
        );
        // Halt file for this run, then "exit right now if we need to halt".
        scr.halt = HaltMonitor::init(&job)?;
        if let Some(h) = scr.halt.check(&job, CheckAt::Init)? {
            if scr.halt.exits_at(CheckAt::Init) {
                scr.finalized = true;
                return Err(HaltMonitor::exit_job(job, &h));
            }
        }
        if job.rank().is_root() {
            // LLNL SCR 3.1 records the run's node count at every init, for
            // scr_run's "enough nodes left?" check.
            if let Err(e) = crate::prefix::write_nodes_file(&job.prefix, job.node_count as u64) {
                eprintln!("SCR: warning: {e}");
            }
        }
        if job.rank().is_root() && !opts.configs.is_empty() {
            if let Err(e) = job.cfg.write_app_conf(&job.prefix) {
                eprintln!("SCR: warning: {e}");
            }
        }
        let distribute = job.settings.cache.distribute;
        let purge = job.settings.cache.purge;
        if distribute && !purge {
            scr.report = restart::rebuild_cache(&mut job)?;
        } else {
            restart::purge_cache(&mut job)?;
        }
        let me = job.rank();
        let mut cands: Vec<DatasetId> = scr
            .report
            .available
            .iter()
            .copied()
            .filter(|&d| {
                job.filemap
                    .dataset(d, me)
                    .ok()
                    .flatten()
                    .is_some_and(|ds| ds.flag_checkpoint.unwrap_or(ds.ckpt.is_some()))
            })
            .collect();
        cands.sort_unstable_by(|a, b| b.cmp(a));
        // A bypass dataset newer than what the cache holds is the one to
        // restart from: it is in the prefix, so the fetch brings it.
        if let Some(&newest) = scr.report.in_prefix.iter().max() {
            cands.retain(|&d| d > newest);
        }
        scr.prefix_init(&mut job, &mut cands)?;
        // Every rank must agree on the candidates (they come from collective
        // decisions, so this checks the bookkeeping, not the user).
        let text: Vec<String> = cands.iter().map(DatasetId::to_string).collect();
        same_everywhere(job.world.as_ref(), "SCR_Init", &text.join(","))?;
        scr.candidates = cands;
        let current = job.settings.fetch.current.clone();
        scr.job = Some(job);
        if let Some(cur) = current {
            scr.current(&cur)?;
        }
        scr.compute_start();
        Ok(scr)
    }

    /// Log COMPUTE_START and start timing the compute phase.
    fn compute_start(&mut self) {
        if let Some(job) = &self.job {
            self.compute_at = Some(self.clock.now());
            job.log(Entry::event(EventType::ComputeStart));
        }
    }

    /// Log COMPUTE_END with the compute phase's duration, if one is open.
    fn compute_end(&mut self) {
        if let (Some(job), Some(t)) = (&self.job, self.compute_at.take()) {
            let secs = self.clock.elapsed(t).as_secs_f64();
            job.log(Entry::event(EventType::ComputeEnd).secs(secs));
        }
    }

    fn job(&mut self, call: &'static str) -> ScrResult<Option<&mut Job>> {
        if self.finalized {
            return Err(ScrError::Finalized { call });
        }
        Ok(self.job.as_mut())
    }

    /// The configuration's warnings at init, as rank 0 printed them:
    /// ignored settings, unknown names, refused parameters.
    pub fn config_warnings(&self) -> &[crate::config::ConfigWarning] {
        &self.config_warnings
    }

    /// What init found in the cache and did with it (beyond SCR's API:
    /// lets a test or a launcher tell a restart from cache from a rebuild).
    pub fn init_report(&self) -> &InitReport {
        &self.report
    }

    /// SCR_Config after init: queries only (`KEY` or `CKPT=0 TYPE`); a set
    /// is [`ScrError::ConfigAfterInit`].
    pub fn config(&mut self, query: &str) -> ScrResult<Option<String>> {
        let Some(job) = self.job("SCR_Config")? else {
            return Ok(None);
        };
        let mut cfg = job.cfg.clone();
        match cfg.apply_scr_config(query) {
            Ok(v) => Ok(v),
            Err(crate::config::ConfigError::AfterInit { .. }) => Err(ScrError::ConfigAfterInit),
            Err(e) => Err(e.into()),
        }
    }

    /// SCR_Need_checkpoint: SCR's three policies, first true wins, decided
    /// on rank 0 and broadcast — every SCR_CHECKPOINT_INTERVAL-th call,
    /// SCR_CHECKPOINT_SECONDS since the last checkpoint ended, or
    /// SCR_CHECKPOINT_OVERHEAD percent of time spent checkpointing (the
    /// time blocked in Start_output…Complete_output, plus the wait for a
    /// background encode, [`Scr::checkpoint_costs`]) — and,
    /// beyond SCR, the adaptive policy (SCR_CHECKPOINT_ADAPTIVE, see
    /// [`crate::interval::adaptive`]). With no policy set the answer is no
    /// (as in SCR 3.1). A pending halt answers yes.
    pub fn need_checkpoint(&mut self) -> ScrResult<bool> {
        let halt = self.halt_check(CheckAt::NeedCheckpoint);
        let init_at = self.init_at;
        let need = &mut self.need;
        need.calls += 1;
        let calls = need.calls;
        let since_s = self
            .clock
            .elapsed(need.last_end.unwrap_or(init_at))
            .as_secs_f64();
        let mean_cost_s =
            (need.checkpoints > 0).then(|| need.total_cost_s / need.checkpoints as f64);
        let adaptive = self.adaptive_need(since_s)?;
        let Some(job) = self.job("SCR_Need_checkpoint")? else {
            return Ok(false);
        };
        let interval = job.settings.need.every_calls;
        let seconds = job.settings.need.interval_s;
        let overhead = job.settings.need.overhead_percent;
        // No policy set answers no, as LLNL SCR 3.1 does: only the
        // policies below or a pending halt ask for a checkpoint.
        let mut yes = halt?.is_some();
        if adaptive == Some(true) {
            yes = true;
        }
        if interval > 0 && calls.is_multiple_of(interval) {
            yes = true;
        }
        if seconds > 0 && since_s >= seconds as f64 {
            yes = true;
        }
        if overhead > 0.0 {
            match mean_cost_s {
                None => yes = true,
                Some(c) if 100.0 * c / (since_s + c) <= overhead => yes = true,
                Some(_) => {}
            }
        }
        let mut buf = vec![u8::from(yes)];
        job.world.bcast_bytes(0, &mut buf)?;
        Ok(buf.first() == Some(&1))
    }

    /// SCR_Start_output: begin dataset `name` (a default name when `None`)
    /// with `flags`. Collective; every rank must pass the same name and
    /// flags. Deletes the oldest datasets of the chosen store when it is full.
    pub fn start_output(&mut self, name: Option<&str>, flags: Flags) -> ScrResult<OutputPhase<'_>> {
        if let Some(n) = name {
            check_name(n)?;
        }
        let started = self.clock.now();
        if !self.finalized {
            self.compute_end();
        }
        let Some(job) = self.job("SCR_Start_output")? else {
            return Ok(OutputPhase {
                scr: self,
                ds: None,
                completed: false,
                started,
            });
        };
        same_everywhere(
            job.world.as_ref(),
            "SCR_Start_output",
            &format!("{}\0{}", name.unwrap_or(""), flags.bits()),
        )?;
        let rank = job.world.rank() as u32;
        // An injected error on one rank fails the call on every rank (never
        // leaves the others waiting in a collective).
        let injected = crate::fault_point!("api.start_output", rank = rank);
        let all_clear = job.world.all_true(injected.is_ok())?;
        injected.map_err(|e| ScrError::injected("api.start_output", e))?;
        if !all_clear {
            return Err(ScrError::elsewhere("SCR_Start_output", None));
        }
        // The previous checkpoint's background protection ends first.
        self.settle_protection(false)?;
        let job = self.job.as_mut().expect("initialised");
        let is_ckpt = flags.contains(Flags::CHECKPOINT);
        let (id, set) = output::next_ids(job, is_ckpt, flags.contains(Flags::OUTPUT));
        let in_store = output::in_store(job, set)?;
        // A checkpoint protected in the background needs the previous
        // protected one kept meanwhile: the store holds one more.
        let extra = usize::from(is_ckpt && job.sets[set].encode_async);
        let count = job.stores[job.sets[set].store].count.max(1) as usize + extra;
        let evicted = self.make_room(in_store, count)?;
        let job = self.job.as_mut().expect("initialised");
        let start = output::StartFlags {
            checkpoint: is_ckpt,
            output: flags.contains(Flags::OUTPUT),
        };
        if job.sets[set].bypass {
            crate::prefix::bypass::check_layout(job)?;
        }
        let ds = output::begin(job, id, set, name, start)?;
        if ds.bypass {
            if let Err(e) = crate::prefix::bypass::start(job, ds.id, &ds.desc) {
                job.delete_dataset(ds.id)?;
                return Err(e);
            }
        }
        self.candidates.retain(|d| !evicted.contains(d));
        Ok(OutputPhase {
            scr: self,
            ds: Some(ds),
            completed: false,
            started,
        })
    }

    /// Make room in a store holding `in_store` (oldest first) for a new
    /// dataset: keep fewer than `count`. Output that has not reached the
    /// prefix is flushed before it may go, and kept if that fails. Returns
    /// the datasets evicted. Collective.
    fn make_room(
        &mut self,
        mut in_store: Vec<DatasetId>,
        count: usize,
    ) -> ScrResult<Vec<DatasetId>> {
        self.poll_async_flush(false)?;
        let mut evicted = Vec::new();
        let mut kept = 0usize;
        // Bounded: every pass removes one dataset from the list.
        while in_store.len() + kept >= count && !in_store.is_empty() {
            let oldest = in_store.remove(0);
            if self.may_evict(oldest)? {
                let job = self.job.as_mut().expect("initialised");
                job.delete_dataset(oldest)?;
                evicted.push(oldest);
            } else {
                kept += 1;
                if self.job.as_ref().is_some_and(|j| j.rank().is_root()) {
                    eprintln!(
                        "SCR: warning: keeping output dataset {oldest} in cache: \
                         it has not reached the prefix directory"
                    );
                }
            }
        }
        Ok(evicted)
    }

    /// SCR_Have_restart: the name of the checkpoint a restart would load.
    /// Collective; the same answer on every rank.
    pub fn have_restart(&mut self) -> ScrResult<Option<String>> {
        // A checkpoint protected in the background counts once settled.
        if !self.finalized {
            self.settle_protection(false)?;
        }
        let cand = self.candidates.first().copied();
        let Some(job) = self.job("SCR_Have_restart")? else {
            return Ok(None);
        };
        Ok(cand.and_then(|d| job.dataset(d)).and_then(|ds| ds.name))
    }

    /// SCR_Start_restart: begin reading the checkpoint [`Scr::have_restart`]
    /// named. Collective.
    pub fn start_restart(&mut self) -> ScrResult<RestartPhase<'_>> {
        if !self.finalized {
            self.settle_protection(false)?;
        }
        let Some(&dset) = self.candidates.first() else {
            return Err(ScrError::NoRestart);
        };
        if self.job.is_some() && !self.finalized {
            self.compute_end();
        }
        let started = self.clock.now();
        let job = self.job("SCR_Start_restart")?.ok_or(ScrError::NoRestart)?;
        job.world.barrier()?;
        let name = job
            .dataset(dset)
            .and_then(|d| d.name)
            .unwrap_or_else(|| dset.default_name());
        Ok(RestartPhase {
            scr: self,
            dset,
            name,
            completed: false,
            started,
        })
    }

    /// Check the halt conditions at `at` (collective, rank 0 decides; see
    /// [`crate::halt`]): `Some` on every rank when the run must stop.
    fn halt_check(&mut self, at: CheckAt) -> ScrResult<Option<Halted>> {
        match &self.job {
            Some(job) if !self.finalized => self.halt.check(job, at),
            _ => Ok(None),
        }
    }

    /// After a halt found at `at` (and the flush it calls for): with
    /// SCR_HALT_EXIT=1 end the job (MPI processes exit with status 0;
    /// the thread communicator gets [`ScrError::Halted`]). Collective.
    fn halt_exit(&mut self, at: CheckAt, halted: &Halted) -> ScrResult<()> {
        if !self.halt.exits_at(at) {
            return Ok(());
        }
        // As SCR before it exits: finish the background flush and flush the
        // newest checkpoint (SCR_FLUSH > 0) and pending output. A failed
        // flush leaves the cached copy for `scr postrun`, as at finalize.
        if let Err(e) = self.finalize_flush() {
            eprintln!("SCR: flush before the halt exit: {e}");
        }
        let Some(job) = self.job.take() else {
            return Ok(());
        };
        self.finalized = true;
        Err(HaltMonitor::exit_job(job, halted))
    }

    /// The halt condition found by the latest check (init, a completed
    /// dataset, Should_exit or Need_checkpoint), the same on every rank.
    pub fn halt_pending(&self) -> Option<&Halted> {
        self.halt.last()
    }

    /// SCR_Should_exit: whether the run should stop (a halt condition in
    /// the halt file, or the allocation ending within SCR_HALT_SECONDS).
    /// Collective; rank 0 decides.
    pub fn should_exit(&mut self) -> ScrResult<bool> {
        self.job("SCR_Should_exit")?;
        Ok(self.halt_check(CheckAt::ShouldExit)?.is_some())
    }

    fn dataset_by_name(&mut self, name: &str) -> ScrResult<Option<DatasetId>> {
        let Some(job) = self.job.as_ref() else {
            return Ok(None);
        };
        let me = job.rank();
        let found = job.filemap.list_datasets().into_iter().rev().find(|&d| {
            job.filemap
                .dataset(d, me)
                .ok()
                .flatten()
                .and_then(|ds| ds.name)
                .as_deref()
                == Some(name)
        });
        Ok(found)
    }

    /// SCR_Current: make `name` the checkpoint to restart from; cached
    /// datasets newer than it are deleted. Collective.
    pub fn current(&mut self, name: &str) -> ScrResult<()> {
        check_name(name)?;
        if let Some(job) = self.job("SCR_Current")? {
            same_everywhere(job.world.as_ref(), "SCR_Current", name)?;
        }
        self.settle_protection(false)?;
        let in_prefix = self.prefix_current(name)?;
        let Some(d) = self.dataset_by_name(name)? else {
            if in_prefix {
                // Only in the prefix: a fetch at the next init starts there.
                return Ok(());
            }
            return Err(ScrError::UnknownDataset(name.into()));
        };
        let job = self.job.as_mut().expect("checked above");
        for newer in job.datasets_everywhere()?.into_iter().filter(|&x| x > d) {
            job.delete_dataset(newer)?;
        }
        self.candidates.retain(|&x| x <= d);
        Ok(())
    }

    /// SCR_Delete: delete dataset `name` from the cache and its entry from
    /// the prefix index. Collective.
    pub fn delete(&mut self, name: &str) -> ScrResult<()> {
        check_name(name)?;
        if let Some(job) = self.job("SCR_Delete")? {
            same_everywhere(job.world.as_ref(), "SCR_Delete", name)?;
        }
        self.settle_protection(false)?;
        if let Some(d) = self.dataset_by_name(name)? {
            let job = self.job.as_mut().expect("checked above");
            job.delete_dataset(d)?;
            self.candidates.retain(|&x| x != d);
        }
        self.prefix_delete(name)?;
        self.drop_index_entry(name)
    }

    /// SCR_Drop: remove dataset `name` from the prefix index only.
    /// Collective.
    pub fn drop_dataset(&mut self, name: &str) -> ScrResult<()> {
        check_name(name)?;
        if let Some(job) = self.job("SCR_Drop")? {
            same_everywhere(job.world.as_ref(), "SCR_Drop", name)?;
        }
        self.drop_index_entry(name)
    }

    fn drop_index_entry(&mut self, name: &str) -> ScrResult<()> {
        let Some(job) = self.job.as_ref() else {
            return Ok(());
        };
        let mut result = Ok(());
        if job.world.rank() == 0 {
            let path = index_path(&job.prefix);
            if path.exists() {
                result = Index::update_file_in(&job.prefix, &path, |idx: &mut Index| {
                    let dirs: Vec<String> = idx
                        .datasets
                        .values()
                        .flat_map(|m| m.iter())
                        .filter(|(_, e)| {
                            e.dataset.as_ref().and_then(|d| d.name.as_deref()) == Some(name)
                        })
                        .map(|(dir, _)| dir.clone())
                        .collect();
                    for d in dirs {
                        idx.remove_dir(&d);
                    }
                })
                .map_err(ScrError::from);
            }
        }
        let ok = job.world.all_true(result.is_ok())?;
        result?;
        if !ok {
            return Err(ScrError::FailedElsewhere {
                op: "update the index",
                who: "rank 0",
                dset: None,
            });
        }
        Ok(())
    }

    /// SCR_Finalize: record in the halt file that the run finalised (so a
    /// launcher does not relaunch it) and release the job. Collective. Also
    /// done on drop when not called.
    pub fn finalize(mut self) -> ScrResult<()> {
        self.finalize_inner()
    }

    /// End a job script's helper run of the library (`scr have-restart`,
    /// SCR 3.1's `scr_have_restart`) without what SCR_Finalize does for
    /// the job: no flush, no COMPUTE_END, no exit reason in the halt file.
    /// The job goes on in the application launched next, which finds the
    /// cache as this run's SCR_Init left it (rebuilt, fetched). A phase
    /// left open is refused ([`ScrError::PhaseMisuse`]), as at
    /// Start_output. Collective (a barrier).
    pub fn end_helper_run(mut self) -> ScrResult<()> {
        self.no_phase("end_helper_run")?;
        if !self.finalized {
            self.settle_protection(false)?;
            // A flush its SCR_Init began (SCR_FLUSH_ON_RESTART) completes.
            self.poll_async_flush(true)?;
        }
        self.finalized = true;
        // No compute phase to log: the helper computed nothing.
        self.compute_at = None;
        match self.job.take() {
            Some(job) => Ok(job.world.barrier()?),
            None => Ok(()),
        }
    }

    fn finalize_inner(&mut self) -> ScrResult<()> {
        if self.finalized {
            return Ok(());
        }
        // A phase left open by the `*_dyn` calls ends as a dropped phase
        // object would: invalid.
        match self.phase {
            Some(DynPhase::Output { .. }) => {
                if let Err(e) = self.complete_output_dyn(false) {
                    eprintln!("SCR: output phase open at finalize: {e}");
                }
            }
            Some(DynPhase::Restart { .. }) => {
                if let Err(e) = self.complete_restart_dyn(false) {
                    eprintln!("SCR: restart phase open at finalize: {e}");
                }
            }
            None => {}
        }
        self.compute_end();
        if let Err(e) = self.finalize_flush() {
            eprintln!("SCR: flush at finalize: {e}");
        }
        self.finalized = true;
        let Some(job) = self.job.take() else {
            return Ok(());
        };
        let mut result = Ok(());
        if job.world.rank() == 0 {
            let path = job
                .prefix
                .join(".scr")
                .join(crate::records::halt::HALT_FILE);
            result = Halt::update_file_in(&job.prefix, &path, |h: &mut Halt| {
                h.exit_reason = Some(REASON_FINALIZE_CALLED.to_owned());
            })
            .map_err(ScrError::from);
        }
        job.world.barrier()?;
        result
    }

    fn no_phase(&self, call: &'static str) -> ScrResult<()> {
        match self.phase {
            None => Ok(()),
            Some(DynPhase::Output { .. }) => Err(ScrError::PhaseMisuse {
                call,
                why: "called inside an output phase (SCR_Complete_output first)",
            }),
            Some(DynPhase::Restart { .. }) => Err(ScrError::PhaseMisuse {
                call,
                why: "called inside a restart phase (SCR_Complete_restart first)",
            }),
        }
    }

    /// Whether a `*_dyn` phase is open: `Some(true)` output, `Some(false)` restart.
    pub fn dyn_phase_is_output(&self) -> Option<bool> {
        self.phase
            .as_ref()
            .map(|p| matches!(p, DynPhase::Output { .. }))
    }

    /// [`Scr::start_output`] keeping the phase inside `self` (for the C
    /// API). Starting a phase inside another is [`ScrError::PhaseMisuse`].
    pub fn start_output_dyn(&mut self, name: Option<&str>, flags: Flags) -> ScrResult<()> {
        self.no_phase("SCR_Start_output")?;
        let mut p = self.start_output(name, flags)?;
        // The phase now lives in `self.phase`; the object must not finish it.
        p.completed = true;
        let state = DynPhase::Output {
            ds: p.ds.take().map(Box::new),
            started: p.started,
        };
        drop(p);
        self.phase = Some(state);
        Ok(())
    }

    /// [`Scr::start_restart`] keeping the phase inside `self`; returns the
    /// checkpoint's name.
    pub fn start_restart_dyn(&mut self) -> ScrResult<String> {
        self.no_phase("SCR_Start_restart")?;
        let mut p = self.start_restart()?;
        p.completed = true;
        let (dset, name, started) = (p.dset, std::mem::take(&mut p.name), p.started);
        drop(p);
        self.phase = Some(DynPhase::Restart {
            dset,
            name: name.clone(),
            started,
        });
        Ok(name)
    }

    /// SCR_Route_file against the open `*_dyn` phase; outside any phase
    /// the name comes back unchanged (as SCR does).
    pub fn route_file_dyn(&mut self, name: &str) -> ScrResult<PathBuf> {
        check_name(name)?;
        match self.phase.take() {
            None => Ok(PathBuf::from(name)),
            Some(DynPhase::Output { ds, started }) => {
                let mut p = OutputPhase {
                    scr: self,
                    ds: ds.map(|d| *d),
                    completed: true,
                    started,
                };
                let r = p.route_file(name);
                let ds = p.ds.take().map(Box::new);
                drop(p);
                self.phase = Some(DynPhase::Output { ds, started });
                r
            }
            Some(DynPhase::Restart {
                dset,
                name: dname,
                started,
            }) => {
                let mut p = RestartPhase {
                    scr: self,
                    dset,
                    name: dname,
                    completed: true,
                    started,
                };
                let r = p.route_file(name);
                let dname = std::mem::take(&mut p.name);
                drop(p);
                self.phase = Some(DynPhase::Restart {
                    dset,
                    name: dname,
                    started,
                });
                r
            }
        }
    }

    /// [`OutputPhase::complete`] for the phase [`Scr::start_output_dyn`] opened.
    pub fn complete_output_dyn(&mut self, valid: bool) -> ScrResult<bool> {
        match self.phase.take() {
            Some(DynPhase::Output { ds, started }) => OutputPhase {
                scr: self,
                ds: ds.map(|d| *d),
                completed: false,
                started,
            }
            .complete(valid),
            other => {
                self.phase = other;
                Err(ScrError::PhaseMisuse {
                    call: "SCR_Complete_output",
                    why: "no output phase is open (SCR_Start_output first)",
                })
            }
        }
    }

    /// [`RestartPhase::complete`] for the phase [`Scr::start_restart_dyn`] opened.
    pub fn complete_restart_dyn(&mut self, valid: bool) -> ScrResult<bool> {
        match self.phase.take() {
            Some(DynPhase::Restart {
                dset,
                name,
                started,
            }) => RestartPhase {
                scr: self,
                dset,
                name,
                completed: false,
                started,
            }
            .complete(valid),
            other => {
                self.phase = other;
                Err(ScrError::PhaseMisuse {
                    call: "SCR_Complete_restart",
                    why: "no restart phase is open (SCR_Start_restart first)",
                })
            }
        }
    }

    /// SCR_Get_version.
    pub fn version() -> &'static str {
        VERSION
    }
}

impl Drop for Scr {
    fn drop(&mut self) {
        // A collective in drop is only safe when every rank gets here the
        // same way; during a panic the job is being aborted anyway.
        if !std::thread::panicking() {
            if let Err(e) = self.finalize_inner() {
                eprintln!("SCR: finalize on drop failed: {e}");
            }
        }
    }
}

/// A file of an output phase being written through
/// [`OutputPhase::route_writer`]: a [`Write`](std::io::Write) that computes
/// the CRC32 of the bytes as they go out. Sequential (no seek).
#[derive(Debug)]
pub struct RoutedWriter {
    /// The file's filemap key (`None` when SCR is disabled).
    key: Option<String>,
    inner: CrcWriter,
}

impl RoutedWriter {
    /// The path the file is written at (in cache, or in the prefix in
    /// bypass mode).
    pub fn path(&self) -> &Path {
        self.inner.path()
    }

    /// fsync the file.
    pub fn sync_all(&self) -> std::io::Result<()> {
        self.inner.sync_all()
    }
}

impl std::io::Write for RoutedWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// An output phase (between SCR_Start_output and SCR_Complete_output).
pub struct OutputPhase<'a> {
    scr: &'a mut Scr,
    /// The dataset being written (`None` when SCR is disabled).
    ds: Option<Dataset>,
    completed: bool,
    started: Tick,
}

impl OutputPhase<'_> {
    /// The dataset id (0 when SCR is disabled).
    pub fn dataset_id(&self) -> i64 {
        self.ds.as_ref().map_or(0, |d| d.id.get())
    }

    /// SCR_Route_file within an output phase: register `name` (relative to
    /// the current directory, or absolute; it must resolve under the prefix
    /// directory) and return the path in cache to write it at. Directories
    /// below the prefix are kept, so `ckpt/a` and `other/a` do not collide.
    /// Not collective.
    pub fn route_file(&mut self, name: impl AsRef<Path>) -> ScrResult<PathBuf> {
        let name = name.as_ref();
        let text = name.to_string_lossy();
        check_name(&text)?;
        let Some(job) = self.scr.job("SCR_Route_file")? else {
            return Ok(name.to_path_buf());
        };
        let ds = self
            .ds
            .as_ref()
            .expect("an output phase of an enabled SCR has a dataset");
        output::route(job, ds, name)
    }

    /// [`OutputPhase::route_file`], and the file created for writing
    /// through a writer that computes its CRC32 as the bytes go out (beyond
    /// SCR's API). Close it with [`OutputPhase::close_writer`]: the
    /// complete then records that CRC instead of reading the file again
    /// (for SINGLE the whole cost of the CRC; the other schemes read the
    /// file for their encode anyway and check it). A file changed after the
    /// close (length, inode or modification time) is read as usual. Not
    /// collective.
    pub fn route_writer(&mut self, name: impl AsRef<Path>) -> ScrResult<RoutedWriter> {
        let name = name.as_ref();
        let text = name.to_string_lossy();
        check_name(&text)?;
        let (key, path) = match self.scr.job("SCR_Route_file")? {
            None => (None, name.to_path_buf()),
            Some(job) => {
                let ds = self
                    .ds
                    .as_ref()
                    .expect("an output phase of an enabled SCR has a dataset");
                let (key, path) = output::route_keyed(job, ds, name)?;
                (Some(key), path)
            }
        };
        let inner = CrcWriter::create(&path).map_err(io_err(&path, "create"))?;
        Ok(RoutedWriter { key, inner })
    }

    /// Close a writer of [`OutputPhase::route_writer`] and keep the CRC32
    /// of what it wrote for Complete_output. Not collective.
    pub fn close_writer(&mut self, w: RoutedWriter) -> ScrResult<()> {
        let path = w.inner.path().to_path_buf();
        let streamed = w.inner.finish().map_err(io_err(&path, "close"))?;
        if let (Some(key), Some(ds)) = (w.key, self.ds.as_mut()) {
            ds.streamed.insert(key, streamed);
        }
        Ok(())
    }

    /// SCR_Complete_output: every rank says whether its files are valid;
    /// returns true only if all are (the same on every rank). Records size
    /// and CRC32 of every file, applies the redundancy scheme, and deletes
    /// the dataset when anything failed. Collective.
    pub fn complete(mut self, valid: bool) -> ScrResult<bool> {
        self.finish(valid)
    }

    fn finish(&mut self, valid: bool) -> ScrResult<bool> {
        let result = self.finish_inner(valid);
        if !self.scr.finalized {
            self.scr.compute_start();
        }
        result
    }

    fn finish_inner(&mut self, valid: bool) -> ScrResult<bool> {
        self.completed = true;
        let started = self.started;
        let Some(job) = self.scr.job("SCR_Complete_output")? else {
            return Ok(valid);
        };
        let ds = self
            .ds
            .as_mut()
            .expect("an output phase of an enabled SCR has a dataset");
        let me = job.rank();
        // An injected error here makes this rank's files invalid, which the
        // collective validity vote turns into a failed output.
        let valid = valid && crate::fault_point!("api.complete_output", rank = me.0).is_ok();
        let mut done = output::complete(job, ds, valid, started)?;
        if !done.protected {
            if ds.bypass {
                crate::prefix::bypass::abandon(job, ds.id)?;
            }
            return Ok(false);
        }
        if ds.bypass {
            // The dataset's flush: its files are in place, its metadata
            // goes to the prefix now.
            if let Err(e) = crate::prefix::bypass::finish(job, ds.id) {
                job.delete_dataset(ds.id)?;
                crate::prefix::bypass::abandon(job, ds.id)?;
                return Err(e);
            }
        }
        let (dset, is_ckpt, is_output) = (ds.id, ds.is_checkpoint(), ds.is_output());
        let ckpt_id = job.checkpoint_id;
        // Kill and delay faults act here; an injected error has nothing
        // left to fail (the dataset is complete), so it is only reported.
        if let Err(e) = crate::fault_point!("api.complete_output.done", rank = me.0) {
            eprintln!(
                "SCR: rank {me}: {}",
                ScrError::injected("api.complete_output.done", e)
            );
        }
        let background = done.protecting.take();
        if is_ckpt {
            // A checkpoint protected in the background becomes a restart
            // candidate once it is settled.
            if background.is_none() {
                self.scr.candidates.insert(0, dset);
            }
            let need = &mut self.scr.need;
            need.checkpoints += 1;
            let cost = self.scr.clock.elapsed(started).as_secs_f64();
            need.total_cost_s += cost;
            need.costs.push((ckpt_id, cost));
            need.last_end = Some(self.scr.clock.now());
        }
        // Step 11: check whether the run must halt (a completed checkpoint
        // decrements CheckpointsLeft first); record the dataset in the flush
        // file and flush it when due — a halt makes a checkpoint due.
        let at = CheckAt::Complete {
            checkpoint: is_ckpt,
        };
        let halted = self.scr.halt_check(at)?;
        if let Some(protecting) = background {
            let cost_entry = is_ckpt.then(|| self.scr.need.costs.len().saturating_sub(1));
            self.scr.pending_protect = Some(protecting::Pending {
                protecting,
                output: is_output,
                cost_entry,
            });
            // A halt settles it now, so its flush covers this checkpoint.
            if halted.is_some() {
                self.scr.settle_protection(true)?;
            }
        } else {
            self.scr
                .after_complete(dset, is_ckpt, is_output, halted.is_some())?;
        }
        if let Some(h) = halted {
            self.scr.halt_exit(at, &h)?;
        }
        Ok(true)
    }
}

impl Drop for OutputPhase<'_> {
    fn drop(&mut self) {
        if !self.completed && !std::thread::panicking() {
            if let Err(e) = self.finish(false) {
                eprintln!("SCR: output phase dropped without complete: {e}");
            }
        }
    }
}
