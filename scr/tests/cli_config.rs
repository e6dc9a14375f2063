//! Integration tests of the `scr` command-line tool, run as a user would,
//! with a controlled environment (nothing inherited from the test runner).

use std::path::Path;
use std::process::{Command, Output};

/// Run `scr args...` in the package directory with exactly `vars` set.
fn scr(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("run scr")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The fixture of `config::tests::report_of_a_fixed_configuration`, as
/// environment variables of a job.
const FIXED: &[(&str, &str)] = &[
    ("SCR_CONF_FILE", "tests/data/config/user.conf"),
    ("SCR_CONFIG_FILE", "tests/data/config/system.conf"),
    ("SCR_PREFIX", "/nonexistent/p/run"),
    ("SCR_FLUSH", "4"),
    ("SLURM_JOBID", "77"),
    ("SCR_TEST_HOME", "/home/t"),
    ("USER", "alice"),
];

#[test]
fn config_json_for_a_fixed_configuration() {
    let o = scr(&["config", "--json"], FIXED);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    insta::assert_snapshot!("scr_config_json", stdout(&o));
    // Warnings go to stderr, one per line, naming the file and line.
    let err = stderr(&o);
    assert!(err.contains("scr: warning: ignoring SCR_LOG_SYSLOG_ENABLE from user file tests/data/config/user.conf:6"), "{err}");
    assert!(
        err.contains("scr: warning: unknown parameter MY_TOOL_OPT"),
        "{err}"
    );
}

#[test]
fn config_table_shows_values_and_sources() {
    let o = scr(&["config"], FIXED);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_default()
            .to_string()
    };
    assert!(
        row("SCR_FLUSH").ends_with("environment"),
        "{}",
        row("SCR_FLUSH")
    );
    assert!(row("SCR_SET_SIZE").ends_with("user file tests/data/config/user.conf:2"));
    assert!(row("SCR_FETCH_WIDTH").ends_with("system file tests/data/config/system.conf:18"));
    assert!(row("SCR_CACHE_BYPASS").contains(" 0 "));
    assert!(row("SCR_CURRENT").ends_with("unset"));
    assert!(out.contains("CKPT=2 INTERVAL=8 GROUP=SWITCH STORE=/ssd TYPE=PARTNER"));
}

#[test]
fn config_key_prints_one_value() {
    let o = scr(&["config", "SCR_FLUSH"], FIXED);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "4\n"));
    let o = scr(&["config", "CKPT=1 SET_SIZE"], FIXED);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "8\n"));
    let o = scr(&["config", "--json", "SCR_SET_SIZE"], FIXED);
    assert_eq!(stdout(&o).trim(), r#"{"name":"SCR_SET_SIZE","value":"4"}"#);
    // Unset: nothing on stdout, exit 1, a message.
    let o = scr(&["config", "SCR_CURRENT"], FIXED);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(1), ""));
    assert!(stderr(&o).contains("SCR_CURRENT is not set"));
}

#[test]
fn config_errors_name_file_and_line_and_exit_config() {
    let mut vars = FIXED.to_vec();
    vars[0] = ("SCR_CONF_FILE", "tests/data/config/bad.conf");
    let o = scr(&["config"], &vars);
    assert_eq!(o.status.code(), Some(7), "CONFIG");
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains("tests/data/config/bad.conf:3:23"), "{err}");
    assert!(err.contains("no key SIZE"), "{err}");
    vars[0] = ("SCR_CONF_FILE", "tests/data/config/user.conf");
    vars.push(("SCR_SET_SIZE", "many"));
    let o = scr(&["config", "SCR_FLUSH"], &vars);
    assert_eq!(o.status.code(), Some(7), "CONFIG");
    assert!(
        stderr(&o).contains("environment variable SCR_SET_SIZE"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn config_usage_errors_exit_2() {
    for args in [
        &["config", "SCR_FLUSH=3"][..],
        &["config", "CKPT=0"],
        &["config", "--bogus"],
        &["config", "A", "B"],
    ] {
        let o = scr(args, FIXED);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), "", "{args:?}");
    }
}

#[test]
fn config_reads_values_a_job_set_with_scr_config() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().to_str().unwrap();
    let env = scr::config::MapEnv::new([("SCR_PREFIX", prefix)]).with_cwd(prefix);
    let opts = scr::config::LoadOptions {
        system_file: Some(dir.path().join("none")),
        read_app_conf: false,
    };
    let mut cfg = scr::config::Config::load(&env, &opts).unwrap();
    cfg.apply_scr_config("SCR_HALT_SECONDS=600").unwrap();
    cfg.apply_scr_config("CKPT=0 TYPE=PARTNER").unwrap();
    let written = cfg.write_app_conf(Path::new(prefix)).unwrap();
    assert!(written.ends_with(".scr/app.conf"));
    let vars = [
        ("SCR_PREFIX", prefix),
        ("SCR_CONFIG_FILE", "/nonexistent/system.conf"),
    ];
    let o = scr(&["config"], &vars);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let row = out
        .lines()
        .find(|l| l.starts_with("SCR_HALT_SECONDS "))
        .unwrap();
    assert!(
        row.contains(" 600 ") && row.ends_with("SCR_Config"),
        "{row}"
    );
    let o = scr(&["config", "CKPT=0 TYPE"], &vars);
    assert_eq!(stdout(&o), "PARTNER\n");
}
