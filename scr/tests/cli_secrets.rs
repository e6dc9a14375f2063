//! Hardening issue: `scr config` printed SCR_LOG_DB_PASS in clear (table,
//! `--json`, and `scr config SCR_LOG_DB_PASS`), and `scr interval --db`
//! took a libpq string `host=... password=...` for an SQLite path and
//! echoed it. Secrets are `***` everywhere.

use std::process::{Command, Output};

const SECRET: &str = "hunter2-s3cret";

fn scr(args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scr"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_clear()
        .envs(vars.iter().copied())
        .output()
        .expect("run scr")
}

fn all_output(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A system config file with the password and a URL holding it.
fn system_file(dir: &std::path::Path) -> String {
    let p = dir.join("system.conf");
    std::fs::write(
        &p,
        format!(
            "SCR_LOG_DB_PASS={SECRET}\nSCR_LOG_DB_HOST=postgresql://bob:{SECRET}@db.example:5432/logs?password={SECRET}\n"
        ),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn scr_config_never_prints_the_log_database_password() {
    let dir = tempfile::tempdir().unwrap();
    let sys = system_file(dir.path());
    let vars = [
        ("SCR_CONFIG_FILE", sys.as_str()),
        ("SCR_PREFIX", "/nonexistent/p"),
        ("USER", "alice"),
    ];
    for args in [
        &["config"][..],
        &["config", "--json"],
        &["config", "SCR_LOG_DB_PASS"],
        &["config", "--json", "SCR_LOG_DB_PASS"],
        &["config", "SCR_LOG_DB_HOST"],
    ] {
        let o = scr(args, &vars);
        let out = all_output(&o);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {out}");
        assert!(!out.contains(SECRET), "{args:?} shows the secret: {out}");
        assert!(
            out.contains("***"),
            "{args:?}: the secret is shown as ***: {out}"
        );
    }
    // The table still says where the password came from.
    let o = scr(&["config"], &vars);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let row = out
        .lines()
        .find(|l| l.starts_with("SCR_LOG_DB_PASS"))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains("***") && row.contains("system file"), "{row}");
    let row = out
        .lines()
        .find(|l| l.starts_with("SCR_LOG_DB_HOST"))
        .unwrap_or_default()
        .to_string();
    assert!(
        row.contains("postgresql://bob:***@db.example:5432"),
        "{row}"
    );
}

#[test]
fn a_libpq_connection_string_is_not_taken_for_a_file_nor_echoed() {
    let db = format!("host=127.0.0.1 port=1 dbname=none password={SECRET} connect_timeout=1");
    let o = scr(&["interval", "--db", &db], &[("USER", "alice")]);
    let out = all_output(&o);
    assert_ne!(o.status.code(), Some(0), "{out}");
    assert!(!out.contains(SECRET), "the password is echoed: {out}");
    // It was understood as a server, not as an SQLite file name.
    assert!(
        !out.to_lowercase().contains("sqlite") && !out.contains("no such file"),
        "{out}"
    );
}
