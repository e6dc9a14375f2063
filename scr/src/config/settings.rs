//! Typed settings: every parameter of the table ([`super::params::PARAMS`])
//! parsed once, at SCR_Init, from the effective [`Config`].
//!
//! This is the one place parameter values are turned into numbers, flags,
//! byte counts, paths and enums. Defaults come only from the parameter table
//! (through [`Config::get`]); the rest of the library reads fields of
//! [`Settings`] (kept on [`crate::cache::Job`] as `job.settings`) and never
//! looks a parameter up by name. A bad value is a [`ConfigError`] whose
//! [`Location`] says where it was set: a config file and line, an
//! environment variable, an SCR_Config call, or a default.
//!
//! Every read goes through one tracking accessor, so a test can walk the
//! table and fail for a parameter nothing reads (see [`NOT_IN_SETTINGS`]
//! for the two that are deliberately not here). Some parameters are read
//! but not implemented: a value other than their no-op default is refused
//! at init with a warning ([`super::refused::REFUSED`]); their fields say
//! so.
//!
//! ```
//! use scr::config::{Config, LoadOptions, MapEnv, Settings};
//! let env = MapEnv::new([("SCR_FLUSH", "4"), ("SCR_MPI_BUF_SIZE", "2MB")])
//!     .with_cwd("/nonexistent/run");
//! let cfg = Config::load(&env, &LoadOptions::default()).unwrap();
//! let s = Settings::from_config(&cfg).unwrap();
//! assert_eq!(s.flush.every, 4);
//! assert_eq!(s.cache.mpi_buf_bytes, 2 << 20);
//! assert_eq!(s.flush.width, 256); // the table's default
//! ```

// Errors carry their file, line and the offending text; they are made at
// most once per init, so their size costs nothing that matters.
#![allow(clippy::result_large_err)]

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use super::desc::CopyType;
use super::error::{ConfigError, Location, Source};
use super::params::{self, ValueKind};
use super::{Config, Effective};
use crate::storage::path as spath;

/// The largest SCR_FILE_BUF_SIZE and SCR_MPI_BUF_SIZE accepted (1 GiB).
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;

/// The smallest SCR_MPI_BUF_SIZE accepted (4 KiB): every piece is one
/// message per set member, so a smaller piece turns a checkpoint into
/// millions of messages; such a value is a typo (`1` for `1MB`), not a
/// setting to run with.
pub const MIN_MPI_BUF_BYTES: u64 = 4 << 10;

/// Table parameters that [`Settings`] deliberately does not read, each with
/// the reason. The table-walk test fails when one of these is read after
/// all, or when a table row is neither read nor listed here.
pub const NOT_IN_SETTINGS: &[(&str, &str)] = &[
    (
        "SCR_CONF_FILE",
        "Config::load reads it from the environment to find the user file; Config::user_file says which file was read",
    ),
    (
        "SCR_CONFIG_FILE",
        "Config::load reads it from the environment to find the system file; Config::system_file says which file was read",
    ),
];

/// `SCR_COPY_TYPE`: the scheme of the implicit CKPT descriptor, or `FILE`
/// (use the CKPT descriptors of the config files).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyTypeSetting {
    /// A redundancy scheme.
    Scheme(CopyType),
    /// `FILE`: the CKPT lines say.
    File,
}

/// `SCR_FLUSH_TYPE`: how a flush moves bytes (SCR's transfer types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushType {
    /// `SYNC`: the application's processes copy.
    Sync,
    /// `PTHREAD`: helper threads copy.
    Pthread,
    /// `BBAPI`: IBM's burst buffer API.
    Bbapi,
    /// `DATAWARP`: Cray DataWarp.
    Datawarp,
}

impl FlushType {
    /// SCR's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushType::Sync => "SYNC",
            FlushType::Pthread => "PTHREAD",
            FlushType::Bbapi => "BBAPI",
            FlushType::Datawarp => "DATAWARP",
        }
    }

    /// A transfer type by SCR's name, any case; `DW` is DataWarp (the
    /// name SCR's STORE lines use for it).
    pub fn parse(v: &str) -> Option<FlushType> {
        match v.to_ascii_uppercase().as_str() {
            "SYNC" => Some(FlushType::Sync),
            "PTHREAD" => Some(FlushType::Pthread),
            "BBAPI" => Some(FlushType::Bbapi),
            "DATAWARP" | "DW" => Some(FlushType::Datawarp),
            _ => None,
        }
    }

    /// Whether this library implements it (SYNC and PTHREAD; the vendor
    /// APIs are refused at init with a warning).
    pub fn is_supported(self) -> bool {
        matches!(self, FlushType::Sync | FlushType::Pthread)
    }

    /// The type a flush runs with: itself when supported, else SYNC.
    pub fn effective(self) -> FlushType {
        if self.is_supported() {
            self
        } else {
            FlushType::Sync
        }
    }

    /// Threads copying one rank's `files`: one for SYNC; for PTHREAD one
    /// per file, at most one per core of this node.
    pub fn copy_threads(self, files: usize) -> usize {
        match self.effective() {
            FlushType::Pthread => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                files.min(cores).max(1)
            }
            _ => 1,
        }
    }
}

/// A password read from the configuration: never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// The password itself, for the connection only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(***)")
    }
}

/// Who the job is and where its prefix is.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSettings {
    /// `SCR_PREFIX` as set (default: the current directory at load time);
    /// `None` when neither is known.
    pub prefix: Option<PathBuf>,
    /// `SCR_USER_NAME` (default `$USER`, `$LOGNAME`); `None` when unknown.
    pub user_name: Option<String>,
    /// `SCR_JOB_ID` (default: the resource manager's id, else `defjobid`).
    pub job_id: String,
    /// `SCR_JOB_NAME`, when set: the `JOBNAME` of every dataset descriptor
    /// this job writes, and the log database's `jobs.jobname`.
    pub job_name: Option<String>,
    /// `SCR_CLUSTER_NAME`, when set: the `CLUSTER` of every dataset
    /// descriptor this job writes.
    pub cluster_name: Option<String>,
}

/// Node-local storage and init-time cache handling.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheSettings {
    /// `SCR_CNTL_BASE`: base of the control directory.
    pub cntl_base: PathBuf,
    /// `SCR_CACHE_BASE`: base of the implicit cache store.
    pub cache_base: PathBuf,
    /// `SCR_CACHE_SIZE`: datasets kept per implicit cache store.
    pub cache_size: u64,
    /// `SCR_CACHE_BYPASS`: write datasets straight to the prefix (the
    /// default of every CKPT descriptor's BYPASS, which is what acts).
    pub bypass: bool,
    /// `SCR_CACHE_PURGE`: purge the cache at init.
    pub purge: bool,
    /// `SCR_ENCODE_ASYNC`: protect checkpoints in the background (the
    /// default of every CKPT descriptor's ENCODE_ASYNC, which is what acts).
    pub encode_async: bool,
    /// `SCR_DISTRIBUTE`: rebuild and restart from the cache at init.
    pub distribute: bool,
    /// `SCR_MPI_BUF_SIZE`: piece size of MPI transfers, bytes.
    pub mpi_buf_bytes: u64,
    /// `SCR_FILE_BUF_SIZE`: bytes each read and write of a copy between
    /// cache and prefix takes.
    pub file_buf_bytes: u64,
    /// `SCR_CRC_ON_DELETE`: check each cached file's CRC32 before deleting
    /// it and report a mismatch.
    pub crc_on_delete: bool,
}

/// The implicit redundancy descriptor's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct RedundancySettings {
    /// `SCR_COPY_TYPE`.
    pub copy_type: CopyTypeSetting,
    /// `SCR_GROUP`: failure group.
    pub group: String,
    /// `SCR_SET_SIZE`.
    pub set_size: u64,
    /// `SCR_SET_FAILURES` (RS).
    pub set_failures: u64,
    /// `SCR_CRC_ON_COPY`: CRC32 on every copy between cache and prefix,
    /// the copy read back and compared.
    pub crc_on_copy: bool,
}

/// Halt conditions from the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct HaltSettings {
    /// `SCR_HALT_SECONDS`: halt this many seconds before the allocation ends.
    pub before_end_s: u64,
    /// `SCR_HALT_EXIT`: exit inside SCR when a halt fires.
    pub exit: bool,
    /// `SCR_END_TIME` (default `$SLURM_JOB_END_TIME`), seconds since the
    /// epoch; `None` when unset, `0` (unknown) or negative (no limit).
    pub end_time_s: Option<i64>,
}

/// Restart from the prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchSettings {
    /// `SCR_FETCH`: fetch from the prefix when the cache has nothing, or only
    /// checkpoints older than the newest the prefix holds.
    pub enabled: bool,
    /// `SCR_FETCH_BYPASS`: a fetch reads restart files in place in the
    /// prefix instead of copying them into cache.
    pub bypass: bool,
    /// `SCR_FETCH_WIDTH`: concurrent readers.
    pub width: u64,
    /// `SCR_CURRENT`: name of the dataset to restart from.
    pub current: Option<String>,
    /// `SCR_DROP_AFTER_CURRENT`: SCR_Current (or SCR_CURRENT at init) drops
    /// the index entries of newer datasets.
    pub drop_after_current: bool,
    /// `SCR_GLOBAL_RESTART`: flush the restart checkpoint at init and
    /// restart through the prefix, read in place, on any rank count.
    pub global_restart: bool,
}

/// Copies to the prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushSettings {
    /// `SCR_FLUSH`: flush every Nth checkpoint, and the newest at finalize
    /// when > 0.
    pub every: u64,
    /// `SCR_FLUSH_WIDTH`: concurrent writers.
    pub width: u64,
    /// `SCR_FLUSH_TYPE`: SYNC copies a rank's files one after another,
    /// PTHREAD on several threads (BBAPI and DATAWARP are refused and run
    /// as SYNC); a STORE line's `FLUSH=` overrides it for the datasets
    /// cached there, in a flush and in a fetch into that store. Either way
    /// the flush blocks (SYNC) or runs in the background (`SCR_FLUSH_ASYNC`).
    pub flush_type: FlushType,
    /// `SCR_FLUSH_ON_RESTART`: flush the restart checkpoint at init.
    pub on_restart: bool,
    /// `SCR_FLUSH_ASYNC`: flush in the background.
    pub asynchronous: bool,
    /// `SCR_FLUSH_ASYNC_BW`: background flush limit per node, bytes/s.
    pub async_bw_bytes_per_s: u64,
    /// `SCR_FLUSH_ASYNC_PERCENT`: background flush CPU share limit.
    pub async_percent: f64,
    /// `SCR_CRC_ON_FLUSH`: CRC32 during flush, checked at fetch.
    pub crc: bool,
    /// `SCR_PREFIX_SIZE`: checkpoints kept in the prefix, 0 = all.
    pub prefix_size: u64,
    /// `SCR_PREFIX_PURGE`: delete every dataset in the prefix at init.
    pub prefix_purge: bool,
    /// `SCR_COPY_METADATA`: record and restore mode, owner and times.
    pub copy_metadata: bool,
    /// `SCR_USE_CONTAINERS`: a flush packs application files into
    /// container files (`prefix::container`).
    pub use_containers: bool,
    /// `SCR_CONTAINER_SIZE`: largest container file, bytes.
    pub container_bytes: u64,
}

/// SCR_Need_checkpoint's policies.
#[derive(Debug, Clone, PartialEq)]
pub struct NeedSettings {
    /// `SCR_CHECKPOINT_INTERVAL`: every Nth call (0: off).
    pub every_calls: u64,
    /// `SCR_CHECKPOINT_SECONDS`: seconds since the last checkpoint ended (0: off).
    pub interval_s: u64,
    /// `SCR_CHECKPOINT_OVERHEAD`: max percent of time checkpointing (0: off).
    pub overhead_percent: f64,
    /// `SCR_CHECKPOINT_ADAPTIVE`: the adaptive policy.
    pub adaptive: bool,
    /// `SCR_MTBF`, parsed at init. A bad value is kept as its error and
    /// reported when the adaptive policy consults it, so that it does not
    /// stop a run that never does (SCR_CHECKPOINT_ADAPTIVE is opt-in).
    pub mtbf: Result<Option<MtbfConfig>, ConfigError>,
}

/// Logging (`SCR_LOG_*`): read here, consumed by the log sinks.
#[derive(Debug, Clone, PartialEq)]
pub struct LogParams {
    /// `SCR_LOG_ENABLE`: any logging at all.
    pub enable: bool,
    /// `SCR_LOG_TXT_ENABLE`: the text log.
    pub txt: bool,
    /// `SCR_LOG_SYSLOG_ENABLE`: syslog.
    pub syslog: bool,
    /// `SCR_LOG_DB_ENABLE`: the log database.
    pub db: bool,
    /// `SCR_LOG_DB_DEBUG`: verbosity of database logging.
    pub db_debug: u64,
    /// `SCR_LOG_DB_HOST`.
    pub db_host: Option<String>,
    /// `SCR_LOG_DB_NAME`.
    pub db_name: Option<String>,
    /// `SCR_LOG_DB_USER`.
    pub db_user: Option<String>,
    /// `SCR_LOG_DB_PASS`.
    pub db_pass: Option<Password>,
}

/// The run loop's parameters (`scr run`, [`crate::runloop`]; SCR_Init
/// reads them too, so that each table row has a typed home).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings {
    /// `SCR_RUNS`: most launches in the allocation (0: no limit); when it
    /// is not set, `SCR_RETRIES` + 1 where that is (SCR 3.1's scr_run).
    pub runs: u64,
    /// `SCR_MIN_NODES`: fewest healthy nodes to launch on.
    pub min_nodes: Option<u64>,
    /// `SCR_EXCLUDE_NODES`: nodes never to run on.
    pub exclude_nodes: Option<String>,
    /// `SCR_NODELIST`: nodes of the allocation.
    pub nodelist: Option<String>,
    /// `SCR_WATCHDOG_TIMEOUT`, seconds: a flush without progress this
    /// long is abandoned (unless `SCR_WATCHDOG_TIMEOUT_PFS` is set).
    pub watchdog_timeout_s: Option<u64>,
    /// `SCR_WATCHDOG_TIMEOUT_PFS`, seconds: the same bound for flushes to
    /// the prefix; wins over `SCR_WATCHDOG_TIMEOUT`.
    pub watchdog_timeout_pfs_s: Option<u64>,
    /// `SCR_WATCHDOG`: `scr run` kills a launch that shows no progress
    /// ([`crate::runloop::ProgressWatchdog`]).
    pub watchdog: bool,
}

/// Every parameter of the table, typed (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// `SCR_ENABLE`: 0 makes every call succeed and do nothing.
    pub enable: bool,
    /// `SCR_DEBUG`: verbosity of SCR's messages on stderr
    /// ([`crate::log::msg`]).
    pub debug: u64,
    /// Who and where.
    pub job: JobSettings,
    /// Node-local storage.
    pub cache: CacheSettings,
    /// The implicit redundancy descriptor.
    pub redundancy: RedundancySettings,
    /// Halt conditions.
    pub halt: HaltSettings,
    /// Fetch.
    pub fetch: FetchSettings,
    /// Flush.
    pub flush: FlushSettings,
    /// SCR_Need_checkpoint.
    pub need: NeedSettings,
    /// Logging.
    pub log: LogParams,
    /// The run loop.
    pub run: RunSettings,
}

impl RunSettings {
    /// The watchdog's bound on a flush without progress:
    /// `SCR_WATCHDOG_TIMEOUT_PFS` when set, else `SCR_WATCHDOG_TIMEOUT`
    /// (LLNL's run loop uses the `_PFS` bound while a flush to the prefix
    /// is under way); `None` (or 0) means no bound.
    pub fn flush_watchdog_s(&self) -> Option<u64> {
        self.watchdog_timeout_pfs_s
            .or(self.watchdog_timeout_s)
            .filter(|&s| s > 0)
    }
}

impl Settings {
    /// Parse every parameter of `cfg` (SCR_Init, once). Fails on the first
    /// bad value, naming where it was set.
    pub fn from_config(cfg: &Config) -> Result<Settings, ConfigError> {
        Settings::read(&mut Reader::new(cfg))
    }

    /// The same, also returning the names read (for the table-walk test).
    #[cfg(test)]
    pub(crate) fn from_config_traced(
        cfg: &Config,
    ) -> (Result<Settings, ConfigError>, BTreeSet<&'static str>) {
        let mut r = Reader::new(cfg);
        let s = Settings::read(&mut r);
        (s, r.read)
    }

    // Every field is read unconditionally, in table order where it can be:
    // a read behind a branch would hide from the table-walk test.
    fn read(r: &mut Reader<'_>) -> Result<Settings, ConfigError> {
        Ok(Settings {
            enable: r.flag("SCR_ENABLE")?,
            debug: r.count("SCR_DEBUG")?,
            job: JobSettings {
                prefix: r.text("SCR_PREFIX").map(PathBuf::from),
                user_name: r.component("SCR_USER_NAME")?,
                job_id: r.required_component("SCR_JOB_ID")?,
                job_name: r.text("SCR_JOB_NAME"),
                cluster_name: r.text("SCR_CLUSTER_NAME"),
            },
            cache: read_cache(r)?,
            redundancy: RedundancySettings {
                copy_type: r.copy_type("SCR_COPY_TYPE")?,
                group: r.required_text("SCR_GROUP")?,
                set_size: r.count("SCR_SET_SIZE")?,
                set_failures: r.count("SCR_SET_FAILURES")?,
                crc_on_copy: r.flag("SCR_CRC_ON_COPY")?,
            },
            halt: HaltSettings {
                before_end_s: r.seconds("SCR_HALT_SECONDS")?,
                exit: r.flag("SCR_HALT_EXIT")?,
                end_time_s: r.end_time("SCR_END_TIME")?,
            },
            fetch: FetchSettings {
                enabled: r.flag("SCR_FETCH")?,
                bypass: r.flag("SCR_FETCH_BYPASS")?,
                width: r.count("SCR_FETCH_WIDTH")?,
                current: r.text("SCR_CURRENT"),
                drop_after_current: r.flag("SCR_DROP_AFTER_CURRENT")?,
                global_restart: r.flag("SCR_GLOBAL_RESTART")?,
            },
            flush: read_flush(r)?,
            need: NeedSettings {
                every_calls: r.count("SCR_CHECKPOINT_INTERVAL")?,
                interval_s: r.seconds("SCR_CHECKPOINT_SECONDS")?,
                overhead_percent: r.number("SCR_CHECKPOINT_OVERHEAD")?,
                adaptive: r.flag("SCR_CHECKPOINT_ADAPTIVE")?,
                mtbf: r.mtbf("SCR_MTBF"),
            },
            log: read_log(r)?,
            run: RunSettings {
                runs: r.runs()?,
                min_nodes: r.opt_count("SCR_MIN_NODES")?,
                exclude_nodes: r.text("SCR_EXCLUDE_NODES"),
                nodelist: r.text("SCR_NODELIST"),
                watchdog_timeout_s: r.opt_seconds("SCR_WATCHDOG_TIMEOUT")?,
                watchdog_timeout_pfs_s: r.opt_seconds("SCR_WATCHDOG_TIMEOUT_PFS")?,
                watchdog: r.flag("SCR_WATCHDOG")?,
            },
        })
    }
}

fn read_cache(r: &mut Reader<'_>) -> Result<CacheSettings, ConfigError> {
    Ok(CacheSettings {
        cntl_base: PathBuf::from(r.required_text("SCR_CNTL_BASE")?),
        cache_base: PathBuf::from(r.required_text("SCR_CACHE_BASE")?),
        cache_size: r.count("SCR_CACHE_SIZE")?,
        bypass: r.flag("SCR_CACHE_BYPASS")?,
        purge: r.flag("SCR_CACHE_PURGE")?,
        encode_async: r.flag("SCR_ENCODE_ASYNC")?,
        distribute: r.flag("SCR_DISTRIBUTE")?,
        mpi_buf_bytes: r.buffer_bytes("SCR_MPI_BUF_SIZE", MIN_MPI_BUF_BYTES, "4KB")?,
        file_buf_bytes: r.buffer_bytes("SCR_FILE_BUF_SIZE", 1, "1")?,
        crc_on_delete: r.flag("SCR_CRC_ON_DELETE")?,
    })
}

fn read_flush(r: &mut Reader<'_>) -> Result<FlushSettings, ConfigError> {
    Ok(FlushSettings {
        every: r.count("SCR_FLUSH")?,
        width: r.count("SCR_FLUSH_WIDTH")?,
        flush_type: r.flush_type("SCR_FLUSH_TYPE")?,
        on_restart: r.flag("SCR_FLUSH_ON_RESTART")?,
        asynchronous: r.flag("SCR_FLUSH_ASYNC")?,
        async_bw_bytes_per_s: r.bytes("SCR_FLUSH_ASYNC_BW")?,
        async_percent: r.number("SCR_FLUSH_ASYNC_PERCENT")?,
        crc: r.flag("SCR_CRC_ON_FLUSH")?,
        prefix_size: r.count("SCR_PREFIX_SIZE")?,
        prefix_purge: r.flag("SCR_PREFIX_PURGE")?,
        copy_metadata: r.flag("SCR_COPY_METADATA")?,
        use_containers: r.flag("SCR_USE_CONTAINERS")?,
        container_bytes: r.positive_bytes("SCR_CONTAINER_SIZE")?,
    })
}

fn read_log(r: &mut Reader<'_>) -> Result<LogParams, ConfigError> {
    Ok(LogParams {
        enable: r.flag("SCR_LOG_ENABLE")?,
        txt: r.flag("SCR_LOG_TXT_ENABLE")?,
        syslog: r.flag("SCR_LOG_SYSLOG_ENABLE")?,
        db: r.flag("SCR_LOG_DB_ENABLE")?,
        db_debug: r.count("SCR_LOG_DB_DEBUG")?,
        db_host: r.text("SCR_LOG_DB_HOST"),
        db_name: r.text("SCR_LOG_DB_NAME"),
        db_user: r.text("SCR_LOG_DB_USER"),
        db_pass: r.text("SCR_LOG_DB_PASS").map(Password),
    })
}

/// The one way [`Settings`] reads a parameter: checks that the name is a
/// row of the table, records it, and converts its effective value.
struct Reader<'a> {
    cfg: &'a Config,
    read: BTreeSet<&'static str>,
}

impl<'a> Reader<'a> {
    fn new(cfg: &'a Config) -> Reader<'a> {
        Reader {
            cfg,
            read: BTreeSet::new(),
        }
    }

    /// Record a read of `name`; its table row.
    fn row(&mut self, name: &'static str) -> &'static params::ParamInfo {
        let row = params::info(name);
        // A name outside the table would have no default and no check at
        // load: the table is where a parameter starts.
        assert!(row.is_some(), "Settings reads {name}, not a row of PARAMS");
        self.read.insert(name);
        row.expect("asserted above")
    }

    /// A required value: the table's default stands in when nothing sets
    /// it, so `None` means the row lost its default.
    fn required<T>(
        &mut self,
        name: &'static str,
        get: impl Fn(&Config, &str) -> Result<Option<T>, ConfigError>,
    ) -> Result<T, ConfigError> {
        let row = self.row(name);
        get(self.cfg, name)?.ok_or_else(|| no_default(row))
    }

    fn flag(&mut self, name: &'static str) -> Result<bool, ConfigError> {
        self.required(name, Config::get_bool)
    }

    fn count(&mut self, name: &'static str) -> Result<u64, ConfigError> {
        self.required(name, Config::get_u64)
    }

    fn opt_count(&mut self, name: &'static str) -> Result<Option<u64>, ConfigError> {
        self.row(name);
        self.cfg.get_u64(name)
    }

    /// `SCR_RUNS`, or when only its default stands, SCR 3.1's
    /// `SCR_RETRIES` + 1 where that is set.
    fn runs(&mut self) -> Result<u64, ConfigError> {
        let runs = self.count("SCR_RUNS")?;
        let set = self
            .cfg
            .get("SCR_RUNS")
            .is_some_and(|e| e.source != Source::Default);
        match self.opt_count("SCR_RETRIES")? {
            Some(retries) if !set => Ok(retries.saturating_add(1)),
            _ => Ok(runs),
        }
    }

    fn seconds(&mut self, name: &'static str) -> Result<u64, ConfigError> {
        self.required(name, Config::get_seconds)
    }

    fn opt_seconds(&mut self, name: &'static str) -> Result<Option<u64>, ConfigError> {
        self.row(name);
        self.cfg.get_seconds(name)
    }

    fn bytes(&mut self, name: &'static str) -> Result<u64, ConfigError> {
        self.required(name, Config::get_bytes)
    }

    /// A byte count that must not be 0 (a container of 0 bytes holds
    /// nothing).
    fn positive_bytes(&mut self, name: &'static str) -> Result<u64, ConfigError> {
        let v = self.bytes(name)?;
        match self.effective(name) {
            Some(e) if v == 0 => Err(bad_value(&e, "a positive byte count (e.g. 100GB)")),
            _ => Ok(v),
        }
    }

    /// A buffer's size: at least `min` (written `min_text`) and at most
    /// 1 GiB (buffers are held per copying thread or set member; more is
    /// a typo, not a buffer to allocate).
    fn buffer_bytes(
        &mut self,
        name: &'static str,
        min: u64,
        min_text: &str,
    ) -> Result<u64, ConfigError> {
        let v = self.bytes(name)?;
        match self.effective(name) {
            Some(e) if v < min || v > MAX_BUFFER_BYTES => Err(bad_value(
                &e,
                &format!("a byte count from {min_text} to 1GB (e.g. 4MB)"),
            )),
            _ => Ok(v),
        }
    }

    fn number(&mut self, name: &'static str) -> Result<f64, ConfigError> {
        self.required(name, Config::get_f64)
    }

    /// Text, `None` when unset or empty (an empty value clears a setting).
    fn text(&mut self, name: &'static str) -> Option<String> {
        self.effective(name)
            .map(|e| e.value)
            .filter(|v| !v.is_empty())
    }

    /// Text with a table default, which also stands in for an empty value
    /// (a file line `SCR_CNTL_BASE=` does not put directories at `/`).
    fn required_text(&mut self, name: &'static str) -> Result<String, ConfigError> {
        let row = self.row(name);
        self.text(name)
            .or_else(|| row.default.map(str::to_string))
            .ok_or_else(|| no_default(row))
    }

    /// Text that becomes one directory name (`<base>/<user>/scr.<jobid>`):
    /// `None` when unset or empty, an error when it could name another
    /// directory ([`spath::component_problem`]).
    fn component(&mut self, name: &'static str) -> Result<Option<String>, ConfigError> {
        let Some(v) = self.text(name) else {
            return Ok(None);
        };
        self.checked_component(name, v).map(Some)
    }

    /// [`Reader::required_text`] that becomes one directory name.
    fn required_component(&mut self, name: &'static str) -> Result<String, ConfigError> {
        let v = self.required_text(name)?;
        self.checked_component(name, v)
    }

    fn checked_component(&mut self, name: &'static str, v: String) -> Result<String, ConfigError> {
        let Some(why) = spath::component_problem(&v) else {
            return Ok(v);
        };
        let at = match self.effective(name) {
            Some(e) => Location::of(&e.name, &e.value, &e.source),
            None => Location::Builtin {
                name: name.to_string(),
            },
        };
        Err(ConfigError::BadPathComponent {
            at,
            key: name.to_string(),
            value: v,
            why: why.to_string(),
        })
    }

    fn effective(&mut self, name: &'static str) -> Option<Effective> {
        self.row(name);
        self.cfg.get(name)
    }

    /// A value converted by `parse`; `expected` says what is accepted.
    fn parsed<T>(
        &mut self,
        name: &'static str,
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(e) = self.effective(name) else {
            return Ok(None);
        };
        parse(e.value.trim())
            .map(Some)
            .ok_or_else(|| bad_value(&e, expected))
    }

    fn choice<T>(
        &mut self,
        name: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, ConfigError> {
        let row = self.row(name);
        let expected = row.kind.expected();
        self.parsed(name, &expected, parse)?
            .ok_or_else(|| no_default(row))
    }

    fn copy_type(&mut self, name: &'static str) -> Result<CopyTypeSetting, ConfigError> {
        self.choice(name, |v| {
            if v.eq_ignore_ascii_case("FILE") {
                Some(CopyTypeSetting::File)
            } else {
                CopyType::parse(v).map(CopyTypeSetting::Scheme)
            }
        })
    }

    fn flush_type(&mut self, name: &'static str) -> Result<FlushType, ConfigError> {
        self.choice(name, FlushType::parse)
    }

    /// `SCR_END_TIME`: seconds since the epoch; `0` (unknown) and negative
    /// values (`-1`: no limit) mean no end time.
    fn end_time(&mut self, name: &'static str) -> Result<Option<i64>, ConfigError> {
        let v = self.parsed(
            name,
            "seconds since the epoch (0: unknown, -1: no limit)",
            |v| v.parse::<i64>().ok(),
        )?;
        Ok(v.filter(|&s| s > 0))
    }

    /// `SCR_MTBF`: kept as a result (see [`NeedSettings::mtbf`]).
    fn mtbf(&mut self, name: &'static str) -> Result<Option<MtbfConfig>, ConfigError> {
        let Some(e) = self.effective(name).filter(|e| !e.value.trim().is_empty()) else {
            return Ok(None);
        };
        MtbfConfig::parse(&e.value).map(Some).ok_or_else(|| {
            bad_value(
                &e,
                "positive seconds, plain or with units: one MTBF, or one per CKPT level cheapest first (86400, 1d, or 40000,400000, or 12h,5d)",
            )
        })
    }
}

fn bad_value(e: &Effective, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        at: Location::of(&e.name, &e.value, &e.source),
        key: e.name.clone(),
        value: e.value.clone(),
        expected: expected.to_string(),
    }
}

/// A required parameter with no value: only possible if its table row has
/// no default (the table-walk test builds Settings from the defaults alone,
/// so this is caught there).
fn no_default(row: &params::ParamInfo) -> ConfigError {
    ConfigError::BadValue {
        at: Location::Builtin {
            name: row.name.to_string(),
        },
        key: row.name.to_string(),
        value: String::new(),
        expected: match row.kind {
            ValueKind::Str | ValueKind::Path => "a value (the table gives none)".to_string(),
            kind => kind.expected(),
        },
    }
}

/// `SCR_MTBF`: one MTBF for all failures, or one per checkpoint level.
#[derive(Debug, Clone, PartialEq)]
pub enum MtbfConfig {
    /// One figure: all failures.
    Total(f64),
    /// One figure per level, cheapest level first.
    PerLevel(Vec<f64>),
}

impl MtbfConfig {
    /// Parse `SCR_MTBF`: positive seconds, separated by commas or spaces,
    /// each plain (`86400`, `2.5`) or with units written without blanks
    /// (`1d`, `12h`, `2h30m`: a blank separates levels).
    pub fn parse(text: &str) -> Option<MtbfConfig> {
        let vals: Option<Vec<f64>> = text
            .split([',', ' ', '\t'])
            .filter(|s| !s.is_empty())
            .map(|s| {
                crate::units::seconds_f64(s)
                    .ok()
                    .filter(|v| v.is_finite() && *v > 0.0)
            })
            .collect();
        match vals?.as_slice() {
            [] => None,
            [one] => Some(MtbfConfig::Total(*one)),
            many => Some(MtbfConfig::PerLevel(many.to_vec())),
        }
    }

    /// MTBF of all failures together (`1 / Σ 1/Mₖ`).
    pub fn total_s(&self) -> f64 {
        match self {
            MtbfConfig::Total(m) => *m,
            MtbfConfig::PerLevel(ms) => 1.0 / ms.iter().map(|m| 1.0 / m).sum::<f64>(),
        }
    }
}

#[cfg(test)]
mod tests;
