use std::path::{Path, PathBuf};

use super::*;
use crate::config::params::PARAMS;
use crate::config::refused::{refusals, REFUSED};
use crate::config::{ConfigWarning, LoadOptions, MapEnv, Source};

/// A configuration from `vars` and a system file holding `system`.
fn load(vars: &[(&str, &str)], system: &str) -> (tempfile::TempDir, Config) {
    let (dir, cfg) = try_load(vars, system);
    (dir, cfg.unwrap())
}

/// The error loading `vars` and a system file holding `system` gives.
fn load_error(vars: &[(&str, &str)], system: &str) -> ConfigError {
    try_load(vars, system)
        .1
        .expect_err("the configuration loads")
}

fn try_load(
    vars: &[(&str, &str)],
    system: &str,
) -> (tempfile::TempDir, Result<Config, ConfigError>) {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("system.conf");
    std::fs::write(&sys, system).unwrap();
    let env = MapEnv::new(vars.iter().copied()).with_cwd("/nonexistent/cwd");
    let opts = LoadOptions {
        system_file: Some(sys),
        read_app_conf: false,
    };
    let cfg = Config::load(&env, &opts);
    (dir, cfg)
}

/// A valid, non-default value for every row (a system file may set them
/// all, the site-owned ones included).
fn every_row_set() -> String {
    let mut text = String::new();
    for p in PARAMS {
        let v = match (p.name, p.kind) {
            ("SCR_GROUP", _) => "WORLD",
            ("SCR_END_TIME", _) => "4102444800",
            ("SCR_MTBF", _) => "3600,36000",
            ("SCR_COPY_TYPE", _) => "PARTNER",
            ("SCR_FLUSH_TYPE", _) => "PTHREAD",
            (_, ValueKind::Bool) => "1",
            (_, ValueKind::Int) => "3",
            (_, ValueKind::Seconds) => "2m",
            (_, ValueKind::Bytes) => "2MB",
            (_, ValueKind::Float) => "1.5",
            (_, ValueKind::Path) => "/nonexistent/p",
            (_, ValueKind::Str) => "text",
            (_, ValueKind::Choice(words)) => words[0],
        };
        text.push_str(&format!("{}={v}\n", p.name));
    }
    text
}

fn assert_reads_every_row(read: &BTreeSet<&'static str>) {
    let skipped: Vec<&str> = NOT_IN_SETTINGS.iter().map(|(n, _)| *n).collect();
    for p in PARAMS {
        assert!(
            read.contains(p.name) || skipped.contains(&p.name),
            "{} is in the parameter table but nothing reads it: give Settings a field \
             for it (or list it in NOT_IN_SETTINGS with the reason)",
            p.name
        );
    }
}

// The structural check the issue asks for: every table row is read by
// Settings, whatever the configuration (a read behind a branch would be
// missed by one of the two), and the exception list is still accurate.
#[test]
fn every_parameter_of_the_table_is_read() {
    let (_d, defaults) = load(&[], "");
    let (s, read) = Settings::from_config_traced(&defaults);
    s.unwrap();
    assert_reads_every_row(&read);

    let (_d, all) = load(&[], &every_row_set());
    let (s, read_all) = Settings::from_config_traced(&all);
    let s = s.unwrap();
    assert_reads_every_row(&read_all);
    assert_eq!(read, read_all, "what Settings reads depends on the values");
    assert!(s.run.watchdog_timeout_pfs_s == Some(120) && s.log.db_debug == 3);
}

#[test]
fn the_exception_list_is_accurate() {
    let (_d, cfg) = load(&[], "");
    let (_, read) = Settings::from_config_traced(&cfg);
    for (name, why) in NOT_IN_SETTINGS {
        assert!(
            params::info(name).is_some(),
            "{name} is no longer a table row"
        );
        assert!(
            !read.contains(name),
            "{name} is read after all: drop it from NOT_IN_SETTINGS"
        );
        assert!(!why.is_empty());
    }
    for r in REFUSED {
        assert!(
            read.contains(r.name),
            "{} is refused but must still be read (its value decides the refusal)",
            r.name
        );
    }
}

/// SCR 3.1's scr_run makes SCR_RETRIES + 1 launches when SCR_RUNS is not
/// set; SCR_RUNS set anywhere wins, and without either it is 1.
#[test]
fn scr_retries_gives_the_runs_unless_scr_runs_is_set() {
    let runs = |vars: &[(&str, &str)], system: &str| {
        let (_d, cfg) = load(vars, system);
        Settings::from_config(&cfg).unwrap().run.runs
    };
    assert_eq!(runs(&[], ""), 1);
    assert_eq!(runs(&[("SCR_RETRIES", "2")], ""), 3);
    assert_eq!(runs(&[("SCR_RETRIES", "2"), ("SCR_RUNS", "5")], ""), 5);
    assert_eq!(runs(&[("SCR_RETRIES", "2")], "SCR_RUNS=1\n"), 1);
    assert_eq!(runs(&[], "SCR_RETRIES=0\n"), 1);
}

#[test]
fn defaults_come_from_the_table() {
    let (_d, cfg) = load(&[("USER", "alice")], "");
    let s = Settings::from_config(&cfg).unwrap();
    assert!(s.enable);
    assert_eq!(s.debug, 0);
    assert_eq!(s.job.job_id, params::DEFAULT_JOB_ID);
    assert_eq!(s.job.user_name.as_deref(), Some("alice"));
    assert_eq!(s.job.prefix.as_deref(), Some(Path::new("/nonexistent/cwd")));
    assert_eq!(s.cache.cntl_base, PathBuf::from("/dev/shm"));
    assert_eq!(s.cache.cache_base, PathBuf::from("/dev/shm"));
    assert_eq!((s.cache.cache_size, s.cache.mpi_buf_bytes), (1, 1 << 20));
    assert_eq!(s.cache.file_buf_bytes, 4 << 20);
    assert!(s.cache.distribute && !s.cache.purge && !s.cache.bypass);
    assert_eq!(
        s.redundancy.copy_type,
        CopyTypeSetting::Scheme(CopyType::Xor)
    );
    assert_eq!((s.redundancy.set_size, s.redundancy.set_failures), (8, 2));
    assert_eq!(s.redundancy.group, "NODE");
    assert_eq!(
        s.halt,
        HaltSettings {
            before_end_s: 0,
            exit: false,
            end_time_s: None
        }
    );
    assert!(s.fetch.enabled && s.fetch.current.is_none());
    assert_eq!(
        (s.fetch.width, s.flush.width, s.flush.every),
        (256, 256, 10)
    );
    assert_eq!(s.flush.flush_type, FlushType::Sync);
    assert!(s.flush.crc && !s.flush.asynchronous && !s.flush.on_restart);
    assert_eq!(s.flush.async_bw_bytes_per_s, 209_715_200);
    assert_eq!(s.flush.async_percent, 0.0);
    assert_eq!((s.need.every_calls, s.need.interval_s), (0, 0));
    assert_eq!(s.need.mtbf, Ok(None));
    assert!(!s.log.enable && s.log.txt && s.log.syslog && !s.log.db);
    assert_eq!(s.run.runs, 1);
    assert_eq!(s.run.min_nodes, None);
}

#[test]
fn values_are_typed() {
    let (_d, cfg) = load(
        &[
            ("SCR_COPY_TYPE", "file"),
            ("SCR_FLUSH_ASYNC_BW", "1 GB"),
            ("SCR_CHECKPOINT_OVERHEAD", "2.5"),
            ("SCR_END_TIME", "-1"),
            ("SCR_CURRENT", "ckpt.7"),
        ],
        "CKPT=0 TYPE=XOR\nSCR_HALT_SECONDS=600\nSCR_MTBF=86400\n",
    );
    let s = Settings::from_config(&cfg).unwrap();
    assert_eq!(s.redundancy.copy_type, CopyTypeSetting::File);
    assert_eq!(s.flush.async_bw_bytes_per_s, 1 << 30);
    assert_eq!(s.need.overhead_percent, 2.5);
    assert_eq!(s.halt.end_time_s, None, "-1 is no limit");
    assert_eq!(s.halt.before_end_s, 600);
    assert_eq!(s.fetch.current.as_deref(), Some("ckpt.7"));
    assert_eq!(s.need.mtbf, Ok(Some(MtbfConfig::Total(86400.0))));
}

/// Durations take units wherever they are set (SCR 3.1 reads plain
/// seconds, which mean the same here); a value that is no duration is
/// refused naming where it was set and what a duration looks like.
#[test]
fn durations_take_plain_seconds_or_units_in_files_and_the_environment() {
    let (_d, cfg) = load(
        &[("SCR_WATCHDOG_TIMEOUT", "2h"), ("SCR_MTBF", "12h,5d")],
        "SCR_CHECKPOINT_SECONDS=15m\nSCR_HALT_SECONDS=600\nSCR_WATCHDOG_TIMEOUT_PFS=\"1h 30m\"\n",
    );
    let s = Settings::from_config(&cfg).unwrap();
    assert_eq!(s.need.interval_s, 900);
    assert_eq!(s.halt.before_end_s, 600);
    assert_eq!(s.run.watchdog_timeout_s, Some(7200));
    assert_eq!(s.run.watchdog_timeout_pfs_s, Some(5400));
    assert_eq!(
        s.need.mtbf,
        Ok(Some(MtbfConfig::PerLevel(vec![43_200.0, 432_000.0])))
    );
    let mut cfg = cfg;
    cfg.apply_scr_config("SCR_CHECKPOINT_SECONDS=1d").unwrap();
    assert_eq!(Settings::from_config(&cfg).unwrap().need.interval_s, 86_400);
    // Not a duration, or not whole seconds: refused where it was set (as
    // the configuration loads, before Settings reads it).
    for bad in ["15 parsecs", "1.5", "-3", "90x"] {
        let e = load_error(&[("SCR_CHECKPOINT_SECONDS", bad)], "");
        let (key, at) = bad_at(&e);
        assert_eq!(key, "SCR_CHECKPOINT_SECONDS", "{bad}");
        assert_eq!(
            at,
            &Location::Env {
                name: "SCR_CHECKPOINT_SECONDS".into()
            }
        );
        assert!(e.to_string().contains("15m, 1h"), "{bad}: {e}");
    }
    let e = load_error(&[], "SCR_FLUSH=3\nSCR_HALT_SECONDS=soon\n");
    assert_eq!(bad_at(&e).0, "SCR_HALT_SECONDS");
    assert!(e.to_string().contains("system.conf:2"), "{e}");
}

fn bad_at(e: &ConfigError) -> (&str, &Location) {
    match e {
        ConfigError::BadValue { key, at, .. } => (key, at),
        other => panic!("not a bad value: {other:?}"),
    }
}

#[test]
fn a_bad_value_names_the_file_and_line() {
    let (d, cfg) = load(&[], "SCR_FLUSH=3\nSCR_END_TIME=tomorrow\n");
    let e = Settings::from_config(&cfg).unwrap_err();
    let (key, at) = bad_at(&e);
    assert_eq!(key, "SCR_END_TIME");
    assert_eq!(
        at,
        &Location::File {
            path: d.path().join("system.conf"),
            line: 2,
            column: 0
        }
    );
    assert!(e.to_string().contains("system.conf:2"), "{e}");
}

#[test]
fn a_bad_value_names_the_environment_variable_or_scr_config() {
    let (_d, cfg) = load(&[("SCR_END_TIME", "soon")], "");
    let e = Settings::from_config(&cfg).unwrap_err();
    assert_eq!(
        bad_at(&e).1,
        &Location::Env {
            name: "SCR_END_TIME".into()
        }
    );

    let (_d, mut cfg) = load(&[], "");
    cfg.apply_scr_config("SCR_END_TIME=later").unwrap();
    let e = Settings::from_config(&cfg).unwrap_err();
    assert_eq!(
        bad_at(&e).1,
        &Location::ScrConfig {
            text: "SCR_END_TIME=later".into()
        }
    );
    assert!(e.to_string().contains("SCR_Config"), "{e}");
}

/// A copy buffer of zero bytes or more than 1 GiB is refused at init,
/// naming where it was set, before any copy tries to allocate it.
#[test]
fn a_copy_buffer_must_be_one_byte_to_one_gib() {
    for bad in ["0", "2GB", "1TB"] {
        let (_d, cfg) = load(&[("SCR_FILE_BUF_SIZE", bad)], "");
        let e = Settings::from_config(&cfg).unwrap_err();
        let (key, at) = bad_at(&e);
        assert_eq!(key, "SCR_FILE_BUF_SIZE", "{bad}");
        assert_eq!(
            at,
            &Location::Env {
                name: "SCR_FILE_BUF_SIZE".into()
            }
        );
        assert!(e.to_string().contains("1GB"), "{bad}: {e}");
    }
    for good in ["1", "64KB", "1GB"] {
        let (_d, cfg) = load(&[("SCR_FILE_BUF_SIZE", good)], "");
        let s = Settings::from_config(&cfg).unwrap();
        assert!(
            (1..=MAX_BUFFER_BYTES).contains(&s.cache.file_buf_bytes),
            "{good}"
        );
    }
}

#[test]
fn a_bad_mtbf_is_kept_for_the_policy_that_reads_it() {
    let (_d, cfg) = load(&[], "SCR_MTBF=soon\n");
    let s = Settings::from_config(&cfg).unwrap();
    let e = s.need.mtbf.clone().unwrap_err();
    assert!(e.to_string().contains("SCR_MTBF") && e.to_string().contains("system.conf:1"));
}

#[test]
fn an_empty_value_takes_the_table_default() {
    let (_d, cfg) = load(&[], "SCR_CNTL_BASE=\nSCR_JOB_ID=\nSCR_CURRENT=\n");
    assert_eq!(cfg.get("SCR_CNTL_BASE").unwrap().value, "");
    let s = Settings::from_config(&cfg).unwrap();
    assert_eq!(s.cache.cntl_base, PathBuf::from("/dev/shm"));
    assert_eq!(s.job.job_id, params::DEFAULT_JOB_ID);
    assert_eq!(s.fetch.current, None);
}

#[test]
fn the_log_database_password_is_not_printed() {
    let (_d, cfg) = load(&[], "SCR_LOG_DB_PASS=hunter2\n");
    let s = Settings::from_config(&cfg).unwrap();
    assert_eq!(
        s.log.db_pass.as_ref().map(Password::expose),
        Some("hunter2")
    );
    assert!(!format!("{s:?}").contains("hunter2"));
    assert_eq!(
        cfg.get("SCR_LOG_DB_PASS").map(|e| e.source),
        Some(Source::SystemFile {
            path: _d.path().join("system.conf"),
            line: 1
        })
    );
}

/// Library code outside `config/` reads parameters through `Settings`, not
/// by name. `log/` is exempt until its rewrite switches to `settings.log`;
/// the binaries may print raw values (`scr config`).
#[test]
fn no_parameter_is_looked_up_by_name_outside_config() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let exempt = ["config", "log", "bin"];
    let lookups = [
        "get(\"SCR_",
        "get_bool(\"SCR_",
        "get_u64(\"SCR_",
        "get_f64(\"SCR_",
        "get_bytes(\"SCR_",
        "param(&",
    ];
    let mut found = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(&src).unwrap();
            if exempt.iter().any(|e| rel.starts_with(e)) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                // Tests may look values up to check them.
                let code = text.split("#[cfg(test)]").next().unwrap_or("");
                for (n, line) in code.lines().enumerate() {
                    if lookups.iter().any(|l| line.contains(l)) {
                        found.push(format!("{}:{}: {}", rel.display(), n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "read these through Settings:\n{}",
        found.join("\n")
    );
}

/// Where each acting parameter's effect is shown: a test (or a scenario)
/// that sets it. Every row is a `test` row (the walk refuses any other
/// kind: a parameter that acts without a test of its effect is a gap).
/// Paths are relative to the workspace root; the name must occur there.
const ACTS: &[(&str, &str, &str)] = &[
    ("SCR_ENABLE", "test", "scr/tests/params_switches.rs"),
    ("SCR_DEBUG", "test", "harness/tests/params.rs"),
    ("SCR_PREFIX", "test", "scr/tests/common/mod.rs"),
    ("SCR_USER_NAME", "test", "scr/tests/params_switches.rs"),
    ("SCR_JOB_ID", "test", "scr/tests/common/mod.rs"),
    ("SCR_JOB_NAME", "test", "scr/tests/params_switches.rs"),
    ("SCR_CLUSTER_NAME", "test", "scr/tests/params_switches.rs"),
    ("SCR_CNTL_BASE", "test", "scr/tests/common/mod.rs"),
    ("SCR_CACHE_BASE", "test", "scr/tests/common/mod.rs"),
    ("SCR_CACHE_SIZE", "test", "scr/tests/cache_thread.rs"),
    ("SCR_CACHE_BYPASS", "test", "scr/tests/bypass_thread.rs"),
    ("SCR_ENCODE_ASYNC", "test", "scr/tests/encode_async.rs"),
    ("SCR_CACHE_PURGE", "test", "scr/tests/params_switches.rs"),
    ("SCR_COPY_TYPE", "test", "scr/tests/cache_thread.rs"),
    ("SCR_GROUP", "test", "harness/scenarios/70-config.toml"),
    ("SCR_SET_SIZE", "test", "scr/tests/cache_thread.rs"),
    ("SCR_SET_FAILURES", "test", "scr/tests/cache_thread.rs"),
    ("SCR_HALT_SECONDS", "test", "scr/tests/halt.rs"),
    ("SCR_HALT_EXIT", "test", "scr/tests/halt.rs"),
    ("SCR_END_TIME", "test", "scr/tests/halt.rs"),
    ("SCR_MPI_BUF_SIZE", "test", "scr/tests/cache_thread.rs"),
    ("SCR_FILE_BUF_SIZE", "test", "scr/src/prefix/copy_tests.rs"),
    ("SCR_FLUSH_TYPE", "test", "scr/tests/prefix_thread.rs"),
    ("SCR_DISTRIBUTE", "test", "scr/tests/params_switches.rs"),
    ("SCR_FETCH", "test", "scr/tests/params_switches.rs"),
    ("SCR_FETCH_BYPASS", "test", "scr/tests/bypass_thread.rs"),
    (
        "SCR_USE_CONTAINERS",
        "test",
        "scr/tests/containers_thread.rs",
    ),
    (
        "SCR_CONTAINER_SIZE",
        "test",
        "scr/tests/containers_thread.rs",
    ),
    (
        "SCR_FETCH_WIDTH",
        "test",
        "scr/src/prefix/throttle_tests.rs",
    ),
    ("SCR_CURRENT", "test", "scr/tests/prefix_thread.rs"),
    ("SCR_GLOBAL_RESTART", "test", "scr/tests/global_restart.rs"),
    (
        "SCR_DROP_AFTER_CURRENT",
        "test",
        "scr/tests/prefix_thread.rs",
    ),
    ("SCR_FLUSH", "test", "harness/tests/prefix_tier.rs"),
    (
        "SCR_FLUSH_WIDTH",
        "test",
        "scr/src/prefix/throttle_tests.rs",
    ),
    ("SCR_FLUSH_ON_RESTART", "test", "harness/tests/params.rs"),
    ("SCR_PREFIX_SIZE", "test", "harness/tests/params.rs"),
    ("SCR_PREFIX_PURGE", "test", "scr/tests/params.rs"),
    ("SCR_FLUSH_ASYNC", "test", "harness/tests/prefix_tier.rs"),
    ("SCR_FLUSH_ASYNC_BW", "test", "harness/tests/prefix_tier.rs"),
    (
        "SCR_FLUSH_ASYNC_PERCENT",
        "test",
        "scr/src/prefix/throttle_tests.rs",
    ),
    ("SCR_CRC_ON_COPY", "test", "harness/tests/params.rs"),
    ("SCR_CRC_ON_FLUSH", "test", "scr/tests/params.rs"),
    ("SCR_CRC_ON_DELETE", "test", "harness/tests/params.rs"),
    ("SCR_COPY_METADATA", "test", "harness/tests/params.rs"),
    ("SCR_CHECKPOINT_INTERVAL", "test", "scr/tests/params.rs"),
    (
        "SCR_CHECKPOINT_SECONDS",
        "test",
        "scr/tests/adaptive_policy.rs",
    ),
    (
        "SCR_CHECKPOINT_OVERHEAD",
        "test",
        "scr/tests/adaptive_policy.rs",
    ),
    (
        "SCR_CHECKPOINT_ADAPTIVE",
        "test",
        "scr/tests/adaptive_policy.rs",
    ),
    ("SCR_MTBF", "test", "scr/tests/adaptive_policy.rs"),
    ("SCR_LOG_ENABLE", "test", "scr/tests/log_events.rs"),
    ("SCR_LOG_TXT_ENABLE", "test", "scr/tests/log_events.rs"),
    ("SCR_LOG_SYSLOG_ENABLE", "test", "scr/tests/log_events.rs"),
    ("SCR_LOG_DB_ENABLE", "test", "scr/tests/log_db.rs"),
    ("SCR_LOG_DB_DEBUG", "test", "scr/tests/log_db.rs"),
    ("SCR_LOG_DB_HOST", "test", "scr/tests/common/logdb.rs"),
    ("SCR_LOG_DB_NAME", "test", "scr/tests/common/logdb.rs"),
    ("SCR_LOG_DB_USER", "test", "scr/tests/common/logdb.rs"),
    ("SCR_LOG_DB_PASS", "test", "scr/tests/common/logdb.rs"),
    ("SCR_CONF_FILE", "test", "scr/tests/config_collective.rs"),
    ("SCR_CONFIG_FILE", "test", "harness/tests/halt.rs"),
    (
        "SCR_EXCLUDE_NODES",
        "test",
        "harness/scenarios/70-config.toml",
    ),
    ("SCR_NODELIST", "test", "scr/tests/scavenge.rs"),
    ("SCR_WATCHDOG_TIMEOUT", "test", "harness/tests/params.rs"),
    ("SCR_RUNS", "test", "scr/src/runloop/tests.rs"),
    ("SCR_RETRIES", "test", "scr/tests/cli_scr31_names.rs"),
    ("SCR_MIN_NODES", "test", "scr/src/runloop/tests.rs"),
    (
        "SCR_WATCHDOG_TIMEOUT_PFS",
        "test",
        "harness/tests/params.rs",
    ),
    ("SCR_WATCHDOG", "test", "scr/tests/cli_scr31_names.rs"),
];

// Issue 15's rule: a setting the library accepts either acts (with a test
// that shows it, listed in ACTS) or is refused with a warning naming it.
#[test]
fn every_parameter_acts_or_is_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let refused: BTreeSet<&str> = REFUSED.iter().map(|r| r.name).collect();
    let skipped: Vec<&str> = NOT_IN_SETTINGS.iter().map(|(n, _)| *n).collect();
    for p in PARAMS {
        let acts = ACTS.iter().find(|a| a.0 == p.name);
        match (acts, refused.contains(p.name)) {
            (Some(_), true) => panic!("{} both acts and is refused", p.name),
            (None, false) if !skipped.contains(&p.name) => panic!(
                "{} neither acts (no entry in ACTS) nor is refused (REFUSED)",
                p.name
            ),
            (Some((name, kind, file)), false) => {
                assert_eq!(*kind, "test", "{name}: no test shows its effect");
                let text = std::fs::read_to_string(root.join(file))
                    .unwrap_or_else(|e| panic!("{name}: evidence {file}: {e}"));
                assert!(text.contains(name), "{name}: {file} does not mention it");
            }
            _ => {}
        }
    }
    // The refusals themselves: none at the defaults, each refused row set
    // to something else warns once, naming it.
    let (_d, cfg) = load(&[], "");
    assert!(refusals(&cfg).is_empty());
    let (_d, all) = load(&[], &every_row_set());
    let warned: BTreeSet<String> = refusals(&all)
        .iter()
        .map(|w| match w {
            ConfigWarning::NotSupported { name, .. } => name.clone(),
            other => panic!("not a refusal: {other:?}"),
        })
        .collect();
    let want: BTreeSet<String> = refused.iter().map(|s| s.to_string()).collect();
    assert_eq!(warned, want);
    // Set explicitly to their no-op default, the rows that have one pass.
    let text: String = REFUSED
        .iter()
        .filter_map(|r| {
            params::info(r.name)
                .and_then(|p| p.default)
                .map(|d| format!("{}={d}\n", r.name))
        })
        .collect();
    let (_d, quiet) = load(&[], &text);
    assert!(refusals(&quiet).is_empty(), "{:?}", refusals(&quiet));
    for w in refusals(&all) {
        let msg = w.to_string();
        assert!(msg.starts_with("not supported: SCR_"), "{msg}");
    }
}

/// Hardening issue: a user name or job id is one directory name in
/// `<base>/<user>/scr.<jobid>`; `../victim`, `a/b`, `.`, `..`, NUL and
/// control characters are refused at init, naming the parameter and value.
#[test]
fn user_name_and_job_id_must_be_plain_directory_names() {
    for (key, bad) in [
        ("SCR_USER_NAME", "../victim"),
        ("SCR_USER_NAME", ".."),
        ("SCR_USER_NAME", "."),
        ("SCR_USER_NAME", "a/b"),
        ("SCR_USER_NAME", "a\u{1}b"),
        ("SCR_JOB_ID", "../../etc"),
        ("SCR_JOB_ID", "1\n2"),
        ("SCR_JOB_ID", "x/y"),
    ] {
        let (_d, cfg) = load(&[(key, bad)], "");
        let e = Settings::from_config(&cfg).unwrap_err();
        match &e {
            ConfigError::BadPathComponent {
                key: k, value, at, ..
            } => {
                assert_eq!(k, key);
                assert_eq!(value, bad);
                assert_eq!(*at, Location::Env { name: key.into() });
            }
            other => panic!("{key}={bad:?}: {other}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains(key) && msg.contains(&format!("{bad:?}")),
            "{msg}"
        );
    }
    // A user name from $USER goes through the same check.
    let (_d, cfg) = load(&[("USER", "../victim")], "");
    assert!(matches!(
        Settings::from_config(&cfg),
        Err(ConfigError::BadPathComponent { .. })
    ));
    let (_d, cfg) = load(
        &[("SCR_USER_NAME", "alice.b-1"), ("SCR_JOB_ID", "123.4")],
        "",
    );
    let s = Settings::from_config(&cfg).unwrap();
    assert_eq!(s.job.user_name.as_deref(), Some("alice.b-1"));
    assert_eq!(s.job.job_id, "123.4");
}

/// A redundancy piece below 4 KiB or above 1 GiB is refused at init,
/// naming where it was set; it used to be clamped into that range
/// without a word.
#[test]
fn an_mpi_piece_must_be_four_kib_to_one_gib() {
    for bad in ["0", "1", "4095", "2GB"] {
        let (_d, cfg) = load(&[], &format!("SCR_MPI_BUF_SIZE={bad}\n"));
        let e = Settings::from_config(&cfg).unwrap_err();
        let (key, at) = bad_at(&e);
        assert_eq!(key, "SCR_MPI_BUF_SIZE", "{bad}");
        assert!(
            matches!(at, Location::File { line: 1, .. }),
            "{bad}: {at:?}"
        );
        assert!(e.to_string().contains("4KB to 1GB"), "{bad}: {e}");
    }
    for (good, bytes) in [("4KB", 4 << 10), ("4096", 4096), ("1GB", 1 << 30)] {
        let (_d, cfg) = load(&[("SCR_MPI_BUF_SIZE", good)], "");
        let s = Settings::from_config(&cfg).unwrap();
        assert_eq!(s.cache.mpi_buf_bytes, bytes, "{good}");
    }
}

/// SCR_FLUSH_TYPE acts for SYNC and PTHREAD; the vendor APIs are refused
/// with a warning naming the value and where it was set, and run as SYNC.
#[test]
fn only_the_vendor_flush_types_are_refused() {
    for (v, refused, runs) in [
        ("SYNC", false, FlushType::Sync),
        ("pthread", false, FlushType::Pthread),
        ("BBAPI", true, FlushType::Sync),
        ("datawarp", true, FlushType::Sync),
    ] {
        let (_d, cfg) = load(&[], &format!("SCR_FLUSH_TYPE={v}\n"));
        let w = refusals(&cfg);
        assert_eq!(w.len(), usize::from(refused), "{v}: {w:?}");
        if refused {
            let msg = w[0].to_string();
            assert!(
                msg.contains(&format!("SCR_FLUSH_TYPE={v}")) && msg.contains("system.conf:1"),
                "{msg}"
            );
        }
        let s = Settings::from_config(&cfg).unwrap();
        assert_eq!(s.flush.flush_type.effective(), runs, "{v}");
    }
    assert_eq!(FlushType::Sync.copy_threads(8), 1);
    assert_eq!(FlushType::Bbapi.copy_threads(8), 1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(FlushType::Pthread.copy_threads(8), cores.min(8));
    assert_eq!(FlushType::Pthread.copy_threads(1), 1);
    assert_eq!(FlushType::Pthread.copy_threads(0), 1);
}

/// The keys of a STORE line that do not act are refused, each with a
/// warning naming the store, the key and the line; the ones that act
/// (and their no-op values) pass without a word, and a FLUSH= naming no
/// transfer type stops the load.
#[test]
fn store_keys_that_do_not_act_are_refused_naming_the_store() {
    let quiet = "STORE=/dev/shm GROUP=NODE COUNT=2 ENABLED=1 MKDIR=1 FLUSH=PTHREAD VIEW=LOCAL\n";
    let (_d, cfg) = load(&[], quiet);
    assert!(refusals(&cfg).is_empty(), "{:?}", refusals(&cfg));
    let noisy = "SCR_FLUSH=1\n\
                 STORE=/dev/shm GROUP=NODE COUNT=2\n\
                 STORE=/ssd GROUP=WORLD MKDIR=0 TYPE=bbapi VIEW=GLOBAL\n\
                 STORE=/bb FLUSH=dw\n";
    let (_d, cfg) = load(&[], noisy);
    let got: Vec<String> = refusals(&cfg).iter().map(ToString::to_string).collect();
    let want = [
        "STORE=/bb FLUSH=dw (system file",
        "STORE=/ssd GROUP=WORLD (system file",
        "STORE=/ssd MKDIR=0 (system file",
        "STORE=/ssd TYPE=bbapi (system file",
        "STORE=/ssd VIEW=GLOBAL (system file",
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.contains(w), "{g} / {w}");
    }
    assert!(got[0].contains("system.conf:4"), "{}", got[0]);
    assert!(got[1].contains("system.conf:3"), "{}", got[1]);
    // Such a store still acts as a node-local store, flushed with
    // SCR_FLUSH_TYPE.
    let d = cfg.descriptors().unwrap();
    assert!(d.stores.iter().any(|s| s.path == "/ssd" && s.enabled));
    for bad in ["FLUSH=fast", "TYPE=XOR"] {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("system.conf");
        std::fs::write(&sys, format!("STORE=/dev/shm {bad}\n")).unwrap();
        let env = MapEnv::new([("X", "1")]).with_cwd("/nonexistent/cwd");
        let opts = LoadOptions {
            system_file: Some(sys),
            read_app_conf: false,
        };
        let e = Config::load(&env, &opts).unwrap_err();
        assert!(e.to_string().contains("system.conf:1"), "{bad}: {e}");
    }
}
