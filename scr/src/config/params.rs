//! The table of SCR 3.1 configuration parameters (`scr_param.c` defaults,
//! `scr_conf.h`), with who may set each one.

/// The kind of value a parameter holds, used to reject bad values where they
/// are read (a config file line, an environment variable, an SCR_Config call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// `0` or `1` (SCR reads these with `atoi`; we accept only the two).
    Bool,
    /// A non-negative integer.
    Int,
    /// A byte count: an integer with an optional `KB`/`MB`/`GB`/`TB` suffix
    /// (powers of 1024, as SCR's `scr_abtoull`).
    Bytes,
    /// A duration in whole seconds: plain (`90`, as SCR reads it) or with
    /// units (`90s`, `15m`, `1h`, `2h30m`, `1d`; [`crate::units`]).
    Seconds,
    /// A floating-point number.
    Float,
    /// Free text.
    Str,
    /// A directory or file path.
    Path,
    /// One of a fixed set of words, compared case-insensitively.
    Choice(&'static [&'static str]),
}

impl ValueKind {
    /// A phrase naming what this kind accepts, for error messages.
    pub fn expected(&self) -> String {
        match self {
            ValueKind::Bool => "0 or 1".to_string(),
            ValueKind::Int => "a non-negative integer".to_string(),
            ValueKind::Bytes => "a byte count such as 1048576 or 1MB".to_string(),
            ValueKind::Seconds => {
                "whole seconds, plain or with units (90, 90s, 15m, 1h, 2h30m, 1d)".to_string()
            }
            ValueKind::Float => "a number".to_string(),
            ValueKind::Str | ValueKind::Path => "text".to_string(),
            ValueKind::Choice(words) => format!("one of {}", words.join(", ")),
        }
    }

    /// Whether `value` is acceptable for this kind.
    pub fn accepts(&self, value: &str) -> bool {
        match self {
            ValueKind::Bool => value == "0" || value == "1",
            ValueKind::Int => value.parse::<u64>().is_ok(),
            ValueKind::Bytes => parse_bytes(value).is_some(),
            ValueKind::Seconds => crate::units::seconds_u64(value).is_ok(),
            ValueKind::Float => value.parse::<f64>().is_ok_and(f64::is_finite),
            ValueKind::Str | ValueKind::Path => true,
            ValueKind::Choice(words) => words.iter().any(|w| w.eq_ignore_ascii_case(value)),
        }
    }
}

/// Byte counts (`1048576`, `1MB`, `1G`): the one parser, in [`crate::units`].
pub use crate::units::parse_bytes;

/// One row of the parameter table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamInfo {
    /// The parameter name, e.g. `SCR_FLUSH`.
    pub name: &'static str,
    /// The built-in default, if any. Parameters whose default depends on the
    /// environment (`SCR_PREFIX`, `SCR_USER_NAME`, `SCR_JOB_ID`) are filled in
    /// at load time and have `None` here.
    pub default: Option<&'static str>,
    /// What values it takes.
    pub kind: ValueKind,
    /// Whether the environment and the user config file may set it. When
    /// `false`, such settings are ignored with a warning (SCR's "no user" list).
    pub user_settable: bool,
    /// Whether `SCR_Config` may set or unset it (SCR_Config refuses the others).
    pub scr_config_settable: bool,
    /// One line saying what it does.
    pub meaning: &'static str,
}

const fn p(
    name: &'static str,
    default: Option<&'static str>,
    kind: ValueKind,
    user_settable: bool,
    scr_config_settable: bool,
    meaning: &'static str,
) -> ParamInfo {
    ParamInfo {
        name,
        default,
        kind,
        user_settable,
        scr_config_settable,
        meaning,
    }
}

use ValueKind::{Bool, Bytes, Choice, Float, Int, Path, Seconds, Str};

/// Redundancy scheme names accepted by `SCR_COPY_TYPE` (plus `FILE`).
pub const COPY_TYPES: &[&str] = &["SINGLE", "PARTNER", "XOR", "RS", "FILE"];
/// Flush transfer types accepted by `SCR_FLUSH_TYPE`.
pub const FLUSH_TYPES: &[&str] = &["SYNC", "PTHREAD", "BBAPI", "DATAWARP"];

/// Default path of the system config file when `SCR_CONFIG_FILE` is unset
/// (SCR's compiled-in `SCR_CONFIG_FILE`).
pub const DEFAULT_SYSTEM_FILE: &str = "/etc/scr/scr.conf";

/// SCR's fallback job id when no resource manager variable is set.
pub const DEFAULT_JOB_ID: &str = "defjobid";

/// Every SCR 3.1 parameter this library knows, in the order of
/// `shared/spec/parameters.md`.
pub const PARAMS: &[ParamInfo] = &[
    p(
        "SCR_ENABLE",
        Some("1"),
        Bool,
        true,
        true,
        "0 disables SCR: every call succeeds and does nothing",
    ),
    p(
        "SCR_DEBUG",
        Some("0"),
        Int,
        true,
        true,
        "verbosity of SCR's messages on stderr: 1 rank 0's progress (flush, fetch, purge), 2 also every rank's files",
    ),
    p(
        "SCR_PREFIX",
        None,
        Path,
        true,
        true,
        "prefix directory on the parallel file system (default: current directory)",
    ),
    p(
        "SCR_USER_NAME",
        None,
        Str,
        true,
        true,
        "user name in control and cache paths (default: $USER)",
    ),
    p(
        "SCR_JOB_ID",
        Some(DEFAULT_JOB_ID),
        Str,
        true,
        true,
        "job id (default: SLURM_JOBID, LSB_JOBID, PBS_JOBID, FLUX_JOB_ID, else defjobid)",
    ),
    p(
        "SCR_JOB_NAME",
        None,
        Str,
        true,
        false,
        "job name recorded in dataset descriptors and logs",
    ),
    p(
        "SCR_CLUSTER_NAME",
        None,
        Str,
        true,
        true,
        "cluster name recorded in dataset descriptors (CLUSTER)",
    ),
    p(
        "SCR_CNTL_BASE",
        Some("/dev/shm"),
        Path,
        true,
        false,
        "base of the control directory <base>/<user>/scr.<jobid>",
    ),
    p(
        "SCR_CACHE_BASE",
        Some("/dev/shm"),
        Path,
        true,
        false,
        "base of the cache directory <base>/<user>/scr.<jobid>",
    ),
    p(
        "SCR_CACHE_SIZE",
        Some("1"),
        Int,
        true,
        false,
        "datasets kept per cache store",
    ),
    p(
        "SCR_CACHE_BYPASS",
        Some("0"),
        Bool,
        true,
        true,
        "1 writes datasets straight to the prefix: no cache copy, no redundancy (this project: 0, see docs/decisions.md)",
    ),
    p(
        "SCR_ENCODE_ASYNC",
        Some("0"),
        Bool,
        true,
        true,
        "1 returns from SCR_Complete_output once files are durable in cache and computes CRC32s and redundancy in a background thread (needs MPI_THREAD_MULTIPLE; default of every CKPT descriptor's ENCODE_ASYNC; this project only, see docs/decisions.md)",
    ),
    p(
        "SCR_CACHE_PURGE",
        Some("0"),
        Bool,
        true,
        true,
        "purge the cache at init",
    ),
    p(
        "SCR_COPY_TYPE",
        Some("XOR"),
        Choice(COPY_TYPES),
        true,
        true,
        "redundancy scheme; FILE uses the CKPT descriptors",
    ),
    p(
        "SCR_GROUP",
        Some("NODE"),
        Str,
        true,
        true,
        "failure group of the implicit redundancy descriptor",
    ),
    p(
        "SCR_SET_SIZE",
        Some("8"),
        Int,
        true,
        true,
        "redundancy set size",
    ),
    p(
        "SCR_SET_FAILURES",
        Some("2"),
        Int,
        true,
        true,
        "RS: failures tolerated per set",
    ),
    p(
        "SCR_HALT_SECONDS",
        Some("0"),
        Seconds,
        true,
        true,
        "halt this many seconds before the allocation ends (units accepted: 15m, 1h)",
    ),
    p(
        "SCR_HALT_EXIT",
        Some("0"),
        Bool,
        true,
        true,
        "exit inside SCR when a halt condition fires",
    ),
    p(
        "SCR_END_TIME",
        None,
        Str,
        true,
        true,
        "allocation end, seconds since the epoch (0 unknown, -1 none; default $SLURM_JOB_END_TIME)",
    ),
    p(
        "SCR_MPI_BUF_SIZE",
        Some("1048576"),
        Bytes,
        true,
        true,
        "piece size of the redundancy transfers (one message per set member), 4 KiB to 1 GiB",
    ),
    p(
        "SCR_FILE_BUF_SIZE",
        Some("4194304"),
        Bytes,
        true,
        true,
        "bytes each read and write of a file copy between cache and prefix takes, 1 byte to 1 GiB: flush, fetch, scr postrun's copies (SCR 3.1: 33554432; this project: 4 MiB, see docs/decisions.md)",
    ),
    p(
        "SCR_DISTRIBUTE",
        Some("1"),
        Bool,
        true,
        true,
        "rebuild and restart from the cache at init",
    ),
    p(
        "SCR_FETCH",
        Some("1"),
        Bool,
        true,
        true,
        "fetch from the prefix when the cache has nothing, or only older checkpoints",
    ),
    p(
        "SCR_FETCH_BYPASS",
        Some("0"),
        Bool,
        true,
        true,
        "read restart files in place in the prefix (no copy into cache)",
    ),
    p(
        "SCR_FETCH_WIDTH",
        Some("256"),
        Int,
        true,
        true,
        "concurrent readers during fetch",
    ),
    p(
        "SCR_CURRENT",
        None,
        Str,
        true,
        true,
        "name of the dataset to restart from",
    ),
    p(
        "SCR_FLUSH",
        Some("10"),
        Int,
        true,
        true,
        "flush every Nth checkpoint, and the newest at finalize when > 0",
    ),
    p(
        "SCR_FLUSH_WIDTH",
        Some("256"),
        Int,
        true,
        true,
        "concurrent writers during flush",
    ),
    p(
        "SCR_FLUSH_TYPE",
        Some("SYNC"),
        Choice(FLUSH_TYPES),
        true,
        true,
        "flush and fetch transfer method: SYNC copies a rank's files one at a time, PTHREAD on parallel threads (BBAPI, DATAWARP: refused with a warning)",
    ),
    p(
        "SCR_FLUSH_ON_RESTART",
        Some("0"),
        Bool,
        true,
        true,
        "flush the restart checkpoint at init",
    ),
    p(
        "SCR_GLOBAL_RESTART",
        Some("0"),
        Bool,
        true,
        true,
        "rebuild then flush the cached checkpoint at init and restart through the prefix, read in place on any rank count",
    ),
    p(
        "SCR_DROP_AFTER_CURRENT",
        Some("0"),
        Bool,
        true,
        true,
        "SCR_Current (and SCR_CURRENT at init) drops the index entries of newer datasets; their files stay",
    ),
    p(
        "SCR_PREFIX_SIZE",
        Some("0"),
        Int,
        true,
        true,
        "keep the newest N checkpoints in the prefix, deleting older ones after each flush (0 = all; never CURRENT)",
    ),
    p(
        "SCR_PREFIX_PURGE",
        Some("0"),
        Bool,
        true,
        true,
        "delete every dataset in the prefix (and its index entry) at init, before any fetch",
    ),
    p(
        "SCR_FLUSH_ASYNC",
        Some("0"),
        Bool,
        true,
        true,
        "flush asynchronously",
    ),
    p(
        "SCR_FLUSH_ASYNC_BW",
        Some("209715200"),
        Bytes,
        true,
        true,
        "asynchronous flush bandwidth limit, bytes/s",
    ),
    p(
        "SCR_FLUSH_ASYNC_PERCENT",
        Some("0.0"),
        Float,
        true,
        true,
        "asynchronous flush CPU share limit",
    ),
    p(
        "SCR_USE_CONTAINERS",
        Some("0"),
        Bool,
        true,
        true,
        "flush and scavenge pack application files into container files ctr.<id>.scr",
    ),
    p(
        "SCR_CONTAINER_SIZE",
        Some("107374182400"),
        Bytes,
        true,
        true,
        "largest container file, bytes",
    ),
    p(
        "SCR_CRC_ON_COPY",
        Some("0"),
        Bool,
        true,
        true,
        "CRC32 on every copy between cache and prefix (flush, fetch): source CRC compared with the record, copy read back and compared",
    ),
    p(
        "SCR_CRC_ON_FLUSH",
        Some("1"),
        Bool,
        true,
        true,
        "CRC32 during flush, verified at fetch",
    ),
    p(
        "SCR_CRC_ON_DELETE",
        Some("0"),
        Bool,
        true,
        true,
        "verify CRC32 of cached files before deleting them; a mismatch is reported (stderr, CRC32_MISMATCH in the log)",
    ),
    p(
        "SCR_COPY_METADATA",
        Some("0"),
        Bool,
        true,
        true,
        "record mode, owner and access/modify times at flush, restore them at flush and fetch",
    ),
    p(
        "SCR_CHECKPOINT_INTERVAL",
        Some("0"),
        Int,
        true,
        true,
        "SCR_Need_checkpoint: every Nth call",
    ),
    p(
        "SCR_CHECKPOINT_SECONDS",
        Some("0"),
        Seconds,
        true,
        true,
        "SCR_Need_checkpoint: seconds since the last checkpoint ended (units accepted: 15m, 1h)",
    ),
    p(
        "SCR_CHECKPOINT_OVERHEAD",
        Some("0.0"),
        Float,
        true,
        true,
        "SCR_Need_checkpoint: max percent of time spent checkpointing",
    ),
    p(
        "SCR_CHECKPOINT_ADAPTIVE",
        Some("0"),
        Bool,
        true,
        true,
        "SCR_Need_checkpoint: Daly/multi-level interval from measured cost and MTBF (not in SCR)",
    ),
    p(
        "SCR_MTBF",
        None,
        Str,
        true,
        true,
        "adaptive policy: MTBF seconds, or one per CKPT level cheapest first; units accepted, without blanks (1d, or 12h,5d) (not in SCR)",
    ),
    p(
        "SCR_LOG_ENABLE",
        Some("0"),
        Bool,
        true,
        false,
        "enable all logging",
    ),
    p(
        "SCR_LOG_TXT_ENABLE",
        Some("1"),
        Bool,
        true,
        false,
        "text log in $SCR_PREFIX/.scr/log",
    ),
    p(
        "SCR_LOG_SYSLOG_ENABLE",
        Some("1"),
        Bool,
        false,
        false,
        "log to syslog (site setting)",
    ),
    p(
        "SCR_LOG_DB_ENABLE",
        Some("0"),
        Bool,
        false,
        false,
        "log to the site database",
    ),
    p(
        "SCR_LOG_DB_DEBUG",
        Some("0"),
        Int,
        false,
        false,
        "verbosity of database logging",
    ),
    p(
        "SCR_LOG_DB_HOST",
        None,
        Str,
        false,
        false,
        "log database server (site setting): a PostgreSQL host, or mysql://host",
    ),
    p(
        "SCR_LOG_DB_NAME",
        None,
        Str,
        false,
        false,
        "log database name (site setting)",
    ),
    p(
        "SCR_LOG_DB_USER",
        None,
        Str,
        false,
        false,
        "log database user (site setting)",
    ),
    p(
        "SCR_LOG_DB_PASS",
        None,
        Str,
        false,
        false,
        "log database password (site setting)",
    ),
    p(
        "SCR_CONF_FILE",
        None,
        Path,
        true,
        true,
        "user config file (default: $SCR_PREFIX/.scrconf)",
    ),
    p(
        "SCR_CONFIG_FILE",
        Some(DEFAULT_SYSTEM_FILE),
        Path,
        true,
        false,
        "system config file",
    ),
    p(
        "SCR_RUNS",
        Some("1"),
        Int,
        true,
        true,
        "scr run: most launches in the allocation (0: until the nodes run out)",
    ),
    p(
        "SCR_RETRIES",
        None,
        Int,
        true,
        true,
        "scr run: relaunches after the first, when SCR_RUNS is not set (SCR 3.1's: SCR_RUNS = SCR_RETRIES + 1)",
    ),
    p(
        "SCR_MIN_NODES",
        None,
        Int,
        true,
        true,
        "scr run: fewest healthy nodes to launch on (default: the job's nodes)",
    ),
    p(
        "SCR_EXCLUDE_NODES",
        None,
        Str,
        true,
        false,
        "scr_run: nodes never to run on",
    ),
    p(
        "SCR_NODELIST",
        None,
        Str,
        true,
        true,
        "scr_run: nodes of the allocation",
    ),
    p(
        "SCR_WATCHDOG_TIMEOUT",
        None,
        Seconds,
        true,
        false,
        "seconds without progress after which a flush is abandoned (cached copy kept; SCR_WATCHDOG_TIMEOUT_PFS wins when set); in scr run with SCR_WATCHDOG=1, seconds a launch may go without a new checkpoint or flush before it is killed and counted; units accepted: 15m, 1h",
    ),
    p(
        "SCR_WATCHDOG_TIMEOUT_PFS",
        None,
        Seconds,
        true,
        false,
        "seconds without progress after which a flush to the prefix is abandoned (cached copy kept); in scr run with SCR_WATCHDOG=1, the same bound on a launch while its newest checkpoint is being flushed (default: SCR_WATCHDOG_TIMEOUT); units accepted: 15m, 1h",
    ),
    p(
        "SCR_WATCHDOG",
        Some("0"),
        Bool,
        true,
        true,
        "scr run: 1 kills a launch whose flush file shows no new checkpoint or flush for SCR_WATCHDOG_TIMEOUT (SCR_WATCHDOG_TIMEOUT_PFS while flushing), as SCR 3.1's scr_run does",
    ),
];

/// Names SCR_Config refuses although they are not rows of [`PARAMS`]: the
/// descriptor keys of SCR 2 (`CACHE`, `CACHEDIR`, `CNTLDIR`).
pub const SCR_CONFIG_REFUSED_EXTRA: &[&str] = &["CACHE", "CACHEDIR", "CNTLDIR"];

/// The multi-item (descriptor) parameters.
pub const DESCRIPTOR_KEYS: &[&str] = &["GROUPS", "STORE", "CKPT"];

/// Keys allowed after `STORE=<path>` (SCR 3.1 names the transfer type
/// `FLUSH`; the developer guide's older `TYPE` is accepted as its alias).
pub const STORE_KEYS: &[&str] = &[
    "GROUP", "COUNT", "ENABLED", "MKDIR", "FLUSH", "TYPE", "VIEW",
];

/// Keys allowed after `CKPT=<n>`.
pub const CKPT_KEYS: &[&str] = &[
    "INTERVAL",
    "GROUP",
    "STORE",
    "TYPE",
    "SET_SIZE",
    "SET_FAILURES",
    "OUTPUT",
    "BYPASS",
    "ENABLED",
    "ENCODE_ASYNC",
];

/// The row for `name` (`scr_param_get`'s knowledge of a name).
pub fn info(name: &str) -> Option<&'static ParamInfo> {
    PARAMS.iter().find(|p| p.name == name)
}

/// Whether SCR_Config may set or unset `name`.
pub fn scr_config_may_set(name: &str) -> bool {
    if SCR_CONFIG_REFUSED_EXTRA.contains(&name) || name.starts_with("SCR_LOG_DB_") {
        return false;
    }
    info(name).is_none_or(|p| p.scr_config_settable)
}

/// Whether the environment and the user config file may set `name`.
/// Unknown names are allowed (scripts use their own).
pub fn user_may_set(name: &str) -> bool {
    info(name).is_none_or(|p| p.user_settable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_defaults_fit_their_kind() {
        for (i, a) in PARAMS.iter().enumerate() {
            assert!(
                PARAMS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            if let Some(d) = a.default {
                assert!(
                    a.kind.accepts(d),
                    "default {d:?} of {} is not {}",
                    a.name,
                    a.kind.expected()
                );
            }
        }
        assert_eq!(PARAMS.len(), 68);
    }

    #[test]
    fn refused_rows_say_so_in_their_meaning() {
        for r in super::super::refused::REFUSED {
            assert!(info(r.name).is_some(), "{} is not a table row", r.name);
        }
        for p in PARAMS {
            let marked = p.meaning.contains("[not supported: refused");
            let refused = super::super::refused::refusal(p.name).is_some();
            assert_eq!(
                marked, refused,
                "{}: its meaning and REFUSED disagree",
                p.name
            );
            if let (true, Some(d)) = (marked, p.default) {
                assert!(
                    p.meaning
                        .ends_with(&format!("[not supported: refused unless {d}]")),
                    "{}: the meaning must name the accepted value {d}",
                    p.name
                );
            }
            assert!(!p.meaning.contains("no effect yet"), "{}", p.name);
        }
    }

    #[test]
    fn refusals_match_parameters_md() {
        for name in [
            "CACHE",
            "CACHEDIR",
            "CNTLDIR",
            "SCR_CACHE_BASE",
            "SCR_CACHE_SIZE",
            "SCR_CNTL_BASE",
            "SCR_EXCLUDE_NODES",
            "SCR_JOB_NAME",
            "SCR_LOG_ENABLE",
            "SCR_LOG_DB_HOST",
            "SCR_LOG_DB_ANYTHING",
            "SCR_LOG_SYSLOG_ENABLE",
            "SCR_LOG_TXT_ENABLE",
            "SCR_WATCHDOG_TIMEOUT",
            "SCR_WATCHDOG_TIMEOUT_PFS",
        ] {
            assert!(!scr_config_may_set(name), "{name} should be refused");
        }
        assert!(scr_config_may_set("SCR_FLUSH"));
        assert!(scr_config_may_set("MY_SCRIPT_PARAM"));
    }

    // docs/parameters.md is the user's table: a row per parameter, with
    // the status the code gives it.
    #[test]
    fn parameters_md_lists_every_row_with_its_status() {
        let doc = include_str!("../../../docs/parameters.md");
        for p in PARAMS {
            let status = if super::super::refused::refusal(p.name).is_some() {
                "refused"
            } else {
                "acts"
            };
            let row = doc
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", p.name)))
                .unwrap_or_else(|| panic!("docs/parameters.md has no row for {}", p.name));
            assert!(
                row.contains(&format!("| {status} |")),
                "docs/parameters.md: {} should say {status}: {row}",
                p.name
            );
        }
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("1MB"), Some(1 << 20));
        assert_eq!(parse_bytes("2 gb"), Some(2 << 30));
        assert_eq!(parse_bytes("1XB"), None);
        assert_eq!(parse_bytes("MB"), None);
        assert_eq!(parse_bytes("99999999999TB"), None);
    }
}
