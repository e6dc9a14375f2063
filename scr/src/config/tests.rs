use std::path::{Path, PathBuf};

use super::*;

/// A directory holding the test's config files, and an environment whose
/// working directory does not exist (so no stray `.scrconf` is read).
struct Fixture {
    dir: tempfile::TempDir,
    vars: Vec<(String, String)>,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            vars: vec![("USER".into(), "alice".into())],
        }
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn var(mut self, k: &str, v: &str) -> Self {
        self.vars.push((k.into(), v.into()));
        self
    }
    fn user(self, text: &str) -> Self {
        let p = self.file("user.conf", text);
        self.var("SCR_CONF_FILE", p.to_str().unwrap())
    }
    fn system(&self, text: &str) -> PathBuf {
        self.file("system.conf", text)
    }
    fn env(&self) -> MapEnv {
        MapEnv::new(self.vars.clone()).with_cwd("/nonexistent/cwd")
    }
    fn load(&self) -> Result<Config, ConfigError> {
        let sys = self.path("system.conf");
        Config::load(
            &self.env(),
            &LoadOptions {
                system_file: Some(sys),
                read_app_conf: false,
            },
        )
    }
}

fn file_at(err: &ConfigError) -> (PathBuf, u32, u32) {
    let at = match err {
        ConfigError::Syntax { at, .. }
        | ConfigError::UnterminatedQuote { at, .. }
        | ConfigError::UndefinedVariable { at, .. }
        | ConfigError::BadValue { at, .. }
        | ConfigError::UnknownDescriptorKey { at, .. }
        | ConfigError::UnknownCopyType { at, .. }
        | ConfigError::DuplicateDescriptor { at, .. }
        | ConfigError::UnknownReference { at, .. } => at,
        other => panic!("no location in {other:?}"),
    };
    match at {
        Location::File { path, line, column } => (path.clone(), *line, *column),
        other => panic!("not a file location: {other:?}"),
    }
}

fn src(cfg: &Config, name: &str) -> (String, Source) {
    let e = cfg.get(name).unwrap_or_else(|| panic!("{name} unset"));
    (e.value, e.source)
}

// ---------------------------------------------------------------- defaults

#[test]
fn defaults_and_derived_values() {
    let f = Fixture::new().var("SLURM_JOBID", "4242");
    let cfg = f.load().unwrap();
    assert_eq!(src(&cfg, "SCR_FLUSH"), ("10".into(), Source::Default));
    assert_eq!(src(&cfg, "SCR_CACHE_BYPASS"), ("0".into(), Source::Default));
    assert_eq!(
        src(&cfg, "SCR_JOB_ID"),
        (
            "4242".into(),
            Source::Derived {
                from: "$SLURM_JOBID".into()
            }
        )
    );
    assert_eq!(
        src(&cfg, "SCR_USER_NAME"),
        (
            "alice".into(),
            Source::Derived {
                from: "$USER".into()
            }
        )
    );
    assert_eq!(
        src(&cfg, "SCR_PREFIX"),
        (
            "/nonexistent/cwd".into(),
            Source::Derived {
                from: "current directory".into()
            }
        )
    );
    assert_eq!(cfg.get("SCR_CURRENT"), None);
    assert_eq!(cfg.get_bytes("SCR_MPI_BUF_SIZE").unwrap(), Some(1 << 20));
    assert_eq!(cfg.get_f64("SCR_FLUSH_ASYNC_PERCENT").unwrap(), Some(0.0));
    assert_eq!(cfg.get_bool("SCR_CRC_ON_FLUSH").unwrap(), Some(true));
    assert!(cfg.warnings().is_empty());
}

#[test]
fn job_id_falls_back_to_defjobid() {
    let cfg = Fixture::new().load().unwrap();
    assert_eq!(
        src(&cfg, "SCR_JOB_ID"),
        ("defjobid".into(), Source::Default)
    );
}

// -------------------------------------------------------------- precedence

#[test]
fn each_layer_overrides_the_next() {
    let f = Fixture::new().user("# user\n\nSCR_FLUSH=3\nSCR_SET_SIZE=5\n");
    f.system("SCR_FLUSH=1\nSCR_SET_SIZE=1\nSCR_HALT_SECONDS=1\nSCR_FETCH_WIDTH=9\n");
    let user = f.path("user.conf");
    let sys = f.path("system.conf");
    let f = f.var("SCR_FLUSH", "4");
    let mut cfg = f.load().unwrap();
    cfg.apply_scr_config("SCR_FLUSH=2").unwrap();
    cfg.apply_scr_config("SCR_SET_SIZE=2").unwrap();
    cfg.apply_scr_config("SCR_HALT_SECONDS=2").unwrap();
    // env > user > SCR_Config > system > default
    assert_eq!(src(&cfg, "SCR_FLUSH"), ("4".into(), Source::Env));
    assert_eq!(
        src(&cfg, "SCR_SET_SIZE"),
        (
            "5".into(),
            Source::UserFile {
                path: user,
                line: 4
            }
        )
    );
    assert_eq!(
        src(&cfg, "SCR_HALT_SECONDS"),
        ("2".into(), Source::ScrConfig)
    );
    assert_eq!(
        src(&cfg, "SCR_FETCH_WIDTH"),
        ("9".into(), Source::SystemFile { path: sys, line: 4 })
    );
    assert_eq!(
        src(&cfg, "SCR_FLUSH_WIDTH"),
        ("256".into(), Source::Default)
    );
    // Unsetting through SCR_Config leaves the other sources alone.
    cfg.apply_scr_config("SCR_HALT_SECONDS=").unwrap();
    cfg.apply_scr_config("SCR_FLUSH=").unwrap();
    assert_eq!(src(&cfg, "SCR_HALT_SECONDS").0, "1");
    assert_eq!(src(&cfg, "SCR_FLUSH"), ("4".into(), Source::Env));
}

#[test]
fn environment_overrides_a_system_derived_default() {
    let cfg = Fixture::new()
        .var("SCR_PREFIX", "/p/run")
        .var("SCR_USER_NAME", "bob")
        .load()
        .unwrap();
    assert_eq!(src(&cfg, "SCR_PREFIX"), ("/p/run".into(), Source::Env));
    assert_eq!(src(&cfg, "SCR_USER_NAME"), ("bob".into(), Source::Env));
}

#[test]
fn empty_environment_values_count_as_unset() {
    let cfg = Fixture::new().var("SCR_FLUSH", "").load().unwrap();
    assert_eq!(src(&cfg, "SCR_FLUSH"), ("10".into(), Source::Default));
}

#[test]
fn user_file_defaults_to_prefix_scrconf_and_scr_conf_file_replaces_it() {
    let f = Fixture::new();
    let prefix = f.dir.path().join("prefix");
    std::fs::create_dir(&prefix).unwrap();
    std::fs::write(prefix.join(".scrconf"), "SCR_FLUSH=7\n").unwrap();
    let f = f.var("SCR_PREFIX", prefix.to_str().unwrap());
    let cfg = f.load().unwrap();
    assert_eq!(cfg.user_file(), Some(prefix.join(".scrconf").as_path()));
    assert_eq!(src(&cfg, "SCR_FLUSH").0, "7");
    let f = f.user("SCR_FLUSH=8\n");
    let cfg = f.load().unwrap();
    assert_eq!(src(&cfg, "SCR_FLUSH").0, "8");
}

#[test]
fn system_file_comes_from_scr_config_file_when_not_overridden() {
    let f = Fixture::new();
    let p = f.file("site.conf", "SCR_FLUSH=6\n");
    let env = f.env();
    let mut env2 = env.clone();
    env2.vars
        .insert("SCR_CONFIG_FILE".into(), p.display().to_string());
    let cfg = Config::load(&env2, &LoadOptions::default()).unwrap();
    assert_eq!(cfg.system_file(), Some(p.as_path()));
    assert_eq!(
        src(&cfg, "SCR_FLUSH"),
        ("6".into(), Source::SystemFile { path: p, line: 1 })
    );
}

#[test]
fn missing_files_are_not_errors_but_unreadable_ones_are() {
    let f = Fixture::new().var("SCR_CONF_FILE", "/nonexistent/user.conf");
    assert!(f.load().is_ok());
    // A directory cannot be read as a file.
    let dir = f.dir.path().display().to_string();
    let err = f.var("SCR_CONF_FILE", &dir).load().unwrap_err();
    assert!(
        matches!(&err, ConfigError::Io { path, .. } if path.display().to_string() == dir),
        "{err:?}"
    );
    assert!(err.to_string().contains("SCR_CONF_FILE"), "{err}");
}

// ------------------------------------------------------- refused, warnings

#[test]
fn parameters_users_may_not_set_are_ignored_with_warnings() {
    let f = Fixture::new()
        .user("SCR_LOG_SYSLOG_ENABLE=0\nSCR_FLUSH=3\n")
        .var("SCR_LOG_DB_PASS", "hunter2");
    f.system("SCR_LOG_DB_HOST=db.site\n");
    let user = f.path("user.conf");
    let cfg = f.load().unwrap();
    assert_eq!(
        src(&cfg, "SCR_LOG_SYSLOG_ENABLE"),
        ("1".into(), Source::Default)
    );
    assert_eq!(cfg.get("SCR_LOG_DB_PASS"), None);
    assert_eq!(src(&cfg, "SCR_LOG_DB_HOST").0, "db.site");
    assert_eq!(
        cfg.warnings(),
        &[
            ConfigWarning::NotUserSettable {
                name: "SCR_LOG_DB_PASS".into(),
                source: Source::Env
            },
            ConfigWarning::NotUserSettable {
                name: "SCR_LOG_SYSLOG_ENABLE".into(),
                source: Source::UserFile {
                    path: user,
                    line: 1
                }
            },
        ]
    );
    assert!(cfg.warnings()[1].to_string().contains("user.conf:1"));
}

#[test]
fn unknown_parameters_are_kept_with_a_warning() {
    let f = Fixture::new().user("SCR_FLUSHH=3\nMY_TOOL_OPT=x\n");
    let cfg = f.load().unwrap();
    assert_eq!(cfg.warnings().len(), 2);
    assert!(
        matches!(&cfg.warnings()[0], ConfigWarning::UnknownParameter { name, .. } if name == "MY_TOOL_OPT")
    );
    assert_eq!(src(&cfg, "SCR_FLUSHH").0, "3");
    let names: Vec<String> = cfg.all().into_iter().map(|e| e.name).collect();
    assert!(
        names.ends_with(&["MY_TOOL_OPT".to_string(), "SCR_FLUSHH".to_string()]),
        "{names:?}"
    );
}

// ------------------------------------------------------- malformed input

fn user_err(text: &str) -> ConfigError {
    Fixture::new().user(text).load().unwrap_err()
}

#[test]
fn unknown_key_in_a_descriptor_line() {
    let err = user_err("SCR_FLUSH=1\nSTORE=/ssd GROUP=NODE SIZE=3\n");
    assert!(
        matches!(&err, ConfigError::UnknownDescriptorKey { key, .. } if key == "SIZE"),
        "{err:?}"
    );
    let (path, line, col) = file_at(&err);
    assert!(path.ends_with("user.conf"));
    assert_eq!((line, col), (2, 23));
    assert!(err.to_string().contains("user.conf:2:23"), "{err}");
    let err = user_err("CKPT=0 FOO=1\n");
    assert!(
        matches!(&err, ConfigError::UnknownDescriptorKey { descriptor, .. } if descriptor == "CKPT")
    );
}

#[test]
fn bad_numbers_name_file_and_line() {
    for (text, line, key) in [
        ("SCR_FLUSH=ten\n", 1, "SCR_FLUSH"),
        ("\nSCR_CACHE_BYPASS=yes\n", 2, "SCR_CACHE_BYPASS"),
        ("SCR_MPI_BUF_SIZE=1QB\n", 1, "SCR_MPI_BUF_SIZE"),
        ("STORE=/ssd COUNT=x\n", 1, "COUNT"),
        ("CKPT=0 SET_SIZE=-1\n", 1, "SET_SIZE"),
        ("CKPT=zero\n", 1, "CKPT"),
        ("SCR_COPY_TYPE=RAID\n", 1, "SCR_COPY_TYPE"),
    ] {
        let err = user_err(text);
        assert!(
            matches!(&err, ConfigError::BadValue { key: k, .. } if k == key),
            "{text:?}: {err:?}"
        );
        assert_eq!(file_at(&err).1, line, "{text:?}");
    }
}

#[test]
fn bad_environment_value_names_the_variable() {
    let err = Fixture::new().var("SCR_FLUSH", "often").load().unwrap_err();
    assert_eq!(
        err,
        ConfigError::BadValue {
            at: Location::Env {
                name: "SCR_FLUSH".into()
            },
            key: "SCR_FLUSH".into(),
            value: "often".into(),
            expected: "a non-negative integer".into()
        }
    );
}

#[test]
fn unterminated_quote_gives_line_and_column() {
    let err = user_err("SCR_FLUSH=1\nSCR_PREFIX=\"/a b\n");
    assert!(matches!(
        err,
        ConfigError::UnterminatedQuote { quote: '"', .. }
    ));
    assert_eq!(file_at(&err).1..=file_at(&err).2, 2..=12);
}

#[test]
fn duplicate_ckpt_index() {
    let err = user_err("CKPT=0 TYPE=XOR\nCKPT=1 INTERVAL=2\nCKPT=0 TYPE=SINGLE\n");
    match &err {
        ConfigError::DuplicateDescriptor {
            descriptor,
            name,
            first_line,
            ..
        } => {
            assert_eq!(
                (descriptor.as_str(), name.as_str(), *first_line),
                ("CKPT", "0", 1)
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(file_at(&err).1, 3);
    let err = user_err("STORE=/a\nSTORE=/a COUNT=2\n");
    assert!(matches!(
        err,
        ConfigError::DuplicateDescriptor { first_line: 1, .. }
    ));
}

#[test]
fn ckpt_lines_need_one_with_interval_one() {
    let err = user_err("CKPT=0 INTERVAL=2\nCKPT=1 INTERVAL=4\n");
    assert!(
        matches!(&err, ConfigError::NoIntervalOne { at } if at.ends_with("user.conf")),
        "{err:?}"
    );
}

#[test]
fn ckpt_indices_must_be_sequential() {
    let err = user_err("CKPT=0\nCKPT=2\n");
    assert!(
        matches!(err, ConfigError::CkptNotSequential { expected: 1, .. }),
        "{err:?}"
    );
}

#[test]
fn unknown_copy_type() {
    let err = user_err("CKPT=0 TYPE=RAID6\n");
    assert!(matches!(&err, ConfigError::UnknownCopyType { value, .. } if value == "RAID6"));
    assert_eq!(file_at(&err).1, 1);
}

#[test]
fn syntax_errors() {
    for (text, col) in [
        ("SCR_FLUSH\n", 1),
        ("SCR_FLUSH=1 SCR_FETCH=0\n", 13),
        ("  =5\n", 3),
        ("STORE=/a COUNT\n", 10),
        ("STORE=\n", 1),
    ] {
        let err = user_err(text);
        assert!(
            matches!(err, ConfigError::Syntax { .. }),
            "{text:?}: {err:?}"
        );
        assert_eq!(file_at(&err).1..=file_at(&err).2, 1..=col, "{text:?}");
    }
    assert!(matches!(
        user_err("A=\"x\0\"\n"),
        ConfigError::Syntax { .. }
    ));
    assert!(matches!(
        user_err(&"x".repeat(MAX_LINE_CHARS + 1)),
        ConfigError::Syntax { .. }
    ));
}

#[test]
fn non_utf8_file_is_an_error_not_a_panic() {
    let f = Fixture::new();
    let p = f.path("user.conf");
    std::fs::write(&p, b"SCR_FLUSH=\xff\n").unwrap();
    let err = f
        .var("SCR_CONF_FILE", p.to_str().unwrap())
        .load()
        .unwrap_err();
    assert!(matches!(err, ConfigError::Syntax { .. }), "{err:?}");
}

#[test]
fn a_bad_line_anywhere_rejects_the_whole_file() {
    let f = Fixture::new();
    let env = f.env();
    let err = parse_text(
        "SCR_FLUSH=3\nSTORE=/a\nSCR_FETCH=maybe\n",
        Path::new("/x.conf"),
        &env,
    )
    .unwrap_err();
    assert_eq!(file_at(&err), (PathBuf::from("/x.conf"), 3, 1));
    // Nothing from the good lines leaks: load fails as a whole.
    assert!(Fixture::new()
        .user("SCR_FLUSH=3\nSCR_FETCH=maybe\n")
        .load()
        .is_err());
}

// ------------------------------------------------------------- expansion

#[test]
fn variable_expansion_and_quotes() {
    let f = Fixture::new()
        .var("HOME", "/home/alice")
        .var("JOB", "42")
        .user(concat!(
            "SCR_PREFIX=$HOME/run${JOB}x\n",
            "SCR_CLUSTER_NAME=\"big $JOB cluster\"  # comment\n",
            "SCR_JOB_NAME='$HOME'\n",
            "SCR_CURRENT=ckpt.$\n",
            "SCR_NODELIST=a=b\n",
            "MY_OPT=\"a\"'b'c\n",
            "  # only a comment\n",
        ));
    let cfg = f.load().unwrap();
    assert_eq!(src(&cfg, "SCR_PREFIX").0, "/home/alice/run42x");
    assert_eq!(src(&cfg, "SCR_CLUSTER_NAME").0, "big 42 cluster");
    assert_eq!(src(&cfg, "SCR_JOB_NAME").0, "$HOME");
    assert_eq!(src(&cfg, "SCR_CURRENT").0, "ckpt.$");
    assert_eq!(src(&cfg, "SCR_NODELIST").0, "a=b");
    assert_eq!(src(&cfg, "MY_OPT").0, "abc");
}

#[test]
fn undefined_and_malformed_variables_are_errors() {
    let err = user_err("SCR_PREFIX=/p/$NOPE/x\n");
    assert!(
        matches!(&err, ConfigError::UndefinedVariable { name, .. } if name == "NOPE"),
        "{err:?}"
    );
    assert_eq!(file_at(&err).1, 1);
    assert!(matches!(
        user_err("SCR_PREFIX=${HOME\n"),
        ConfigError::Syntax { .. }
    ));
    assert!(matches!(
        user_err("SCR_PREFIX=${1X}\n"),
        ConfigError::Syntax { .. }
    ));
}

#[test]
fn descriptor_values_are_expanded() {
    let f = Fixture::new()
        .var("SSD", "/ssd")
        .user("STORE=$SSD COUNT=2\nCKPT=0 STORE=${SSD}\n");
    let d = f.load().unwrap().descriptors().unwrap();
    assert_eq!(d.stores[0].path, "/ssd");
    assert_eq!(d.ckpts[0].store, "/ssd");
}

// -------------------------------------------------------------- SCR_Config

fn fresh() -> Config {
    Fixture::new().load().unwrap()
}

#[test]
fn scr_config_set_query_unset() {
    let mut cfg = fresh();
    assert_eq!(
        cfg.apply_scr_config("SCR_FLUSH").unwrap().as_deref(),
        Some("10")
    );
    assert_eq!(cfg.apply_scr_config("SCR_FLUSH=20").unwrap(), None);
    assert_eq!(
        cfg.apply_scr_config("SCR_FLUSH").unwrap().as_deref(),
        Some("20")
    );
    assert_eq!(cfg.apply_scr_config("scr_flush=21").unwrap(), None);
    assert_eq!(
        cfg.apply_scr_config("SCR_FLUSH").unwrap().as_deref(),
        Some("21")
    );
    assert_eq!(cfg.apply_scr_config("SCR_FLUSH=").unwrap(), None);
    assert_eq!(
        cfg.apply_scr_config("SCR_FLUSH").unwrap().as_deref(),
        Some("10")
    );
    assert_eq!(cfg.apply_scr_config("SCR_CURRENT").unwrap(), None);
    assert_eq!(cfg.apply_scr_config("NOT_A_PARAM").unwrap(), None);
}

#[test]
fn scr_config_values_may_hold_equals_and_quotes() {
    let mut cfg = fresh();
    cfg.apply_scr_config("SCR_PREFIX=\"/my/dir/with/=/sign\"")
        .unwrap();
    assert_eq!(
        cfg.apply_scr_config("SCR_PREFIX").unwrap().as_deref(),
        Some("/my/dir/with/=/sign")
    );
    cfg.apply_scr_config("SCR_PREFIX=/a=b").unwrap();
    assert_eq!(src(&cfg, "SCR_PREFIX"), ("/a=b".into(), Source::ScrConfig));
    cfg.apply_scr_config("SCR_CLUSTER_NAME='two words'")
        .unwrap();
    assert_eq!(src(&cfg, "SCR_CLUSTER_NAME").0, "two words");
    // SCR_Config values are literal: no expansion.
    cfg.apply_scr_config("SCR_CURRENT=$HOME").unwrap();
    assert_eq!(src(&cfg, "SCR_CURRENT").0, "$HOME");
}

#[test]
fn scr_config_multi_item_set_and_sub_query() {
    let mut cfg = fresh();
    cfg.apply_scr_config("STORE=/dev/shm COUNT=2").unwrap();
    cfg.apply_scr_config("CKPT=0 TYPE=XOR SET_SIZE=16").unwrap();
    cfg.apply_scr_config("CKPT=0 GROUP=NODE").unwrap();
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 TYPE").unwrap().as_deref(),
        Some("XOR")
    );
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 SET_SIZE").unwrap().as_deref(),
        Some("16")
    );
    assert_eq!(
        cfg.apply_scr_config("ckpt=0 group").unwrap().as_deref(),
        Some("NODE")
    );
    // Sub-keys nobody set report the value in effect.
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 INTERVAL").unwrap().as_deref(),
        Some("1")
    );
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 BYPASS").unwrap().as_deref(),
        Some("0")
    );
    assert_eq!(
        cfg.apply_scr_config("STORE=/dev/shm MKDIR")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    assert_eq!(cfg.apply_scr_config("STORE=/dev/shm VIEW").unwrap(), None);
    assert_eq!(cfg.apply_scr_config("CKPT=7 TYPE").unwrap(), None);
    assert_eq!(cfg.apply_scr_config("CKPT=0 NOSUCH").unwrap(), None);
    assert_eq!(cfg.apply_scr_config("GROUPS=n1 RACK").unwrap(), None);
    cfg.apply_scr_config("GROUPS=n1 RACK=r7").unwrap();
    assert_eq!(
        cfg.apply_scr_config("GROUPS=n1 RACK").unwrap().as_deref(),
        Some("r7")
    );
    cfg.apply_scr_config("CKPT=1 INTERVAL=4 TYPE=PARTNER")
        .unwrap();
    assert_eq!(
        cfg.apply_scr_config("CKPT").unwrap().as_deref(),
        Some("0 1")
    );
    // An empty sub-value unsets it.
    cfg.apply_scr_config("CKPT=0 SET_SIZE=").unwrap();
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 SET_SIZE").unwrap().as_deref(),
        Some("8"),
        "back to SCR_SET_SIZE"
    );
    let d = cfg.descriptors().unwrap();
    assert!(!d.implicit_ckpt);
    assert_eq!(d.ckpts.len(), 2);
    assert_eq!(
        d.ckpts[0].set_size, 8,
        "SET_SIZE falls back to SCR_SET_SIZE"
    );
    assert_eq!(d.ckpts[1].copy_type, CopyType::Partner);
    assert_eq!(d.stores[0].count, 2);
    cfg.apply_scr_config("CKPT=").unwrap();
    assert_eq!(cfg.apply_scr_config("CKPT").unwrap(), None);
    assert!(cfg.descriptors().unwrap().implicit_ckpt);
}

#[test]
fn scr_config_refusals_are_typed_and_change_nothing() {
    let mut cfg = fresh();
    let before = cfg.clone();
    for key in [
        "CACHE",
        "CACHEDIR",
        "CNTLDIR",
        "SCR_CACHE_BASE",
        "SCR_CACHE_SIZE",
        "SCR_CNTL_BASE",
        "SCR_EXCLUDE_NODES",
        "SCR_JOB_NAME",
        "SCR_LOG_ENABLE",
        "SCR_LOG_DB_ENABLE",
        "SCR_LOG_DB_HOST",
        "SCR_LOG_SYSLOG_ENABLE",
        "SCR_LOG_TXT_ENABLE",
        "SCR_WATCHDOG_TIMEOUT",
        "SCR_WATCHDOG_TIMEOUT_PFS",
    ] {
        for text in [format!("{key}=1"), format!("{key}=")] {
            assert_eq!(
                cfg.apply_scr_config(&text),
                Err(ConfigError::Refused { key: key.into() }),
                "{text}"
            );
        }
    }
    assert!(ConfigError::Refused {
        key: "SCR_CACHE_SIZE".into()
    }
    .to_string()
    .contains("config file"));
    // Queries of refused names are fine.
    assert_eq!(
        cfg.apply_scr_config("SCR_CACHE_SIZE").unwrap().as_deref(),
        Some("1")
    );
    assert_eq!(cfg, before);
}

#[test]
fn scr_config_errors_change_nothing() {
    let mut cfg = fresh();
    cfg.apply_scr_config("CKPT=0 TYPE=XOR").unwrap();
    let before = cfg.clone();
    for text in [
        "",
        "   ",
        "SCR_FLUSH=x",
        "SCR_FLUSH=1 SCR_FETCH=0",
        "CKPT=0 TYPE=RAID6",
        "CKPT=0 SIZE=3",
        "CKPT=0 SET_SIZE=16 COUNT=1",
        "CKPT=x TYPE=XOR",
        "CKPT=0 TYPE SET_SIZE",
        "CKPT=0 TYPE SET_SIZE=2",
        "CKPT TYPE",
        "CKPT= TYPE=XOR",
        "SCR_PREFIX=\"/unterminated",
    ] {
        assert!(cfg.apply_scr_config(text).is_err(), "{text:?} should fail");
        assert_eq!(cfg, before, "{text:?} changed the configuration");
    }
    let err = cfg.apply_scr_config("CKPT=0 TYPE=RAID6").unwrap_err();
    assert!(
        err.to_string()
            .contains("SCR_Config(\"CKPT=0 TYPE=RAID6\")"),
        "{err}"
    );
}

#[test]
fn scr_config_after_init_only_queries() {
    let mut cfg = fresh();
    cfg.mark_initialized();
    assert!(matches!(
        cfg.apply_scr_config("SCR_FLUSH=3"),
        Err(ConfigError::AfterInit { .. })
    ));
    assert!(matches!(
        cfg.apply_scr_config("CKPT=0 TYPE=XOR"),
        Err(ConfigError::AfterInit { .. })
    ));
    assert_eq!(
        cfg.apply_scr_config("SCR_FLUSH").unwrap().as_deref(),
        Some("10")
    );
}

// ------------------------------------------------------------- descriptors

#[test]
fn implicit_descriptors_follow_the_parameters() {
    let mut cfg = fresh();
    assert_eq!(
        cfg.apply_scr_config("CKPT=0 TYPE").unwrap().as_deref(),
        Some("XOR")
    );
    assert_eq!(
        cfg.apply_scr_config("CKPT").unwrap(),
        None,
        "no CKPT lines, only the implicit one"
    );
    let d = cfg.descriptors().unwrap();
    assert!(d.implicit_stores && d.implicit_ckpt);
    // Cache and control share /dev/shm by default: one store.
    assert_eq!(d.stores.len(), 1);
    assert_eq!(
        (d.stores[0].path.as_str(), d.stores[0].count),
        ("/dev/shm", 1)
    );
    let c = &d.ckpts[0];
    assert_eq!(
        (c.index, c.interval, c.group.as_str(), c.store.as_str()),
        (0, 1, "NODE", "/dev/shm")
    );
    assert_eq!(
        (c.copy_type, c.set_size, c.set_failures, c.bypass, c.output),
        (CopyType::Xor, 8, 2, false, false)
    );

    cfg.apply_scr_config("SCR_COPY_TYPE=partner").unwrap();
    cfg.apply_scr_config("SCR_SET_SIZE=4").unwrap();
    cfg.apply_scr_config("SCR_CACHE_BYPASS=1").unwrap();
    let f = Fixture::new()
        .var("SCR_CNTL_BASE", "/tmp/cntl")
        .var("SCR_CACHE_BASE", "/tmp/cache")
        .var("SCR_CACHE_SIZE", "3");
    let mut cfg2 = f.load().unwrap();
    cfg2.apply_scr_config("SCR_COPY_TYPE=partner").unwrap();
    let d = cfg2.descriptors().unwrap();
    let stores: Vec<(&str, u64)> = d
        .stores
        .iter()
        .map(|s| (s.path.as_str(), s.count))
        .collect();
    assert_eq!(stores, [("/tmp/cache", 3), ("/tmp/cntl", 0)]);
    assert_eq!(
        (d.ckpts[0].store.as_str(), d.ckpts[0].copy_type),
        ("/tmp/cache", CopyType::Partner)
    );
    let c = &cfg.descriptors().unwrap().ckpts[0];
    assert_eq!(
        (c.copy_type, c.set_size, c.bypass),
        (CopyType::Partner, 4, true)
    );
}

const GUIDE_EXAMPLE: &str = "\
GROUPS=zin1  POWER=psu1  SWITCH=0
GROUPS=zin2  POWER=psu1  SWITCH=1
STORE=/tmp          GROUP=NODE   COUNT=1
STORE=/ssd          GROUP=NODE   COUNT=3  TYPE=bbapi
STORE=/dev/persist  GROUP=NODE   COUNT=1  ENABLED=1  MKDIR=0
STORE=/p/lscratcha  GROUP=WORLD  FLUSH=pthread VIEW=global
# instruct SCR to use the CKPT descriptors from the config file
SCR_COPY_TYPE=FILE
CKPT=0 INTERVAL=1 GROUP=NODE   STORE=/tmp TYPE=XOR     SET_SIZE=16
CKPT=1 INTERVAL=4 GROUP=NODE   STORE=/ssd TYPE=XOR     SET_SIZE=8 SET_FAILURES= OUTPUT= BYPASS= ENABLED=
CKPT=2 INTERVAL=8 GROUP=SWITCH STORE=/ssd TYPE=PARTNER
";

#[test]
fn developer_guide_descriptors_parse_with_defaults_filled_in() {
    let f = Fixture::new();
    f.system(GUIDE_EXAMPLE);
    let d = f.load().unwrap().descriptors().unwrap();
    assert_eq!(d.groups.len(), 2);
    assert_eq!(d.groups[1].groups["SWITCH"], "1");
    assert_eq!(d.group_names, ["NODE", "WORLD", "POWER", "SWITCH"]);
    let ssd = d.stores.iter().find(|s| s.path == "/ssd").unwrap();
    assert_eq!(
        (ssd.count, ssd.enabled, ssd.mkdir, ssd.flush.as_deref()),
        (3, true, true, Some("bbapi"))
    );
    let persist = d.stores.iter().find(|s| s.path == "/dev/persist").unwrap();
    assert!(!persist.mkdir);
    let pfs = d.stores.iter().find(|s| s.path == "/p/lscratcha").unwrap();
    assert_eq!(
        (pfs.group.as_str(), pfs.count, pfs.view.as_deref()),
        ("WORLD", 1, Some("GLOBAL"))
    );
    let c: Vec<(u64, &str, CopyType, u64, u64)> = d
        .ckpts
        .iter()
        .map(|c| {
            (
                c.interval,
                c.group.as_str(),
                c.copy_type,
                c.set_size,
                c.set_failures,
            )
        })
        .collect();
    assert_eq!(
        c,
        [
            (1, "NODE", CopyType::Xor, 16, 2),
            (4, "NODE", CopyType::Xor, 8, 2),
            (8, "SWITCH", CopyType::Partner, 8, 2)
        ]
    );
    assert!(d.ckpts.iter().all(|c| c.enabled && !c.output && !c.bypass));
}

#[test]
fn descriptors_come_whole_from_the_highest_source() {
    let f = Fixture::new().user("STORE=/dev/shm COUNT=1\nCKPT=0 TYPE=SINGLE\n");
    f.system(GUIDE_EXAMPLE);
    let d = f.load().unwrap().descriptors().unwrap();
    assert_eq!(d.ckpts.len(), 1);
    assert_eq!(d.ckpts[0].copy_type, CopyType::Single);
    assert_eq!(d.stores.len(), 1);
    assert_eq!(d.groups.len(), 2, "groups still come from the system file");
}

#[test]
fn copy_type_file_without_ckpt_lines_is_an_error() {
    let f = Fixture::new().user("SCR_COPY_TYPE=FILE\n");
    let user = f.path("user.conf");
    assert_eq!(
        f.load().unwrap_err(),
        ConfigError::NoCkptDescriptors {
            source_: Source::UserFile {
                path: user,
                line: 1
            }
        }
    );
}

#[test]
fn descriptors_must_name_defined_groups_and_stores() {
    let err = user_err("STORE=/dev/shm\nCKPT=0 STORE=/ssd\n");
    assert!(
        matches!(&err, ConfigError::UnknownReference { key, value, .. } if key == "STORE" && value == "/ssd")
    );
    assert_eq!(file_at(&err).1, 2);
    assert!(
        err.to_string().contains("/dev/shm"),
        "lists the stores that exist: {err}"
    );
    let err = user_err("STORE=/ssd GROUP=RACK\n");
    assert!(matches!(&err, ConfigError::UnknownReference { key, .. } if key == "GROUP"));
    let err = Fixture::new().var("SCR_GROUP", "RACK").load().unwrap_err();
    assert!(
        matches!(
            err,
            ConfigError::UnknownReference {
                at: Location::Env { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

// ----------------------------------------------------------- serialisation

fn rich_config() -> Config {
    let f = Fixture::new()
        .var("SCR_FLUSH", "4")
        .var("SCR_LOG_DB_PASS", "x")
        .var("SLURM_JOBID", "77")
        .user("SCR_JOB_NAME=\nSCR_CLUSTER_NAME='with space and = and #'\nODD_KEY=ünïcode\n");
    f.system(GUIDE_EXAMPLE);
    let mut cfg = f.load().unwrap();
    cfg.apply_scr_config("SCR_HALT_SECONDS=30").unwrap();
    cfg.apply_scr_config("STORE=/dev/shm COUNT=2").unwrap();
    cfg.apply_scr_config("CKPT=0 TYPE=RS SET_FAILURES=3")
        .unwrap();
    cfg.apply_scr_config("CKPT=1").unwrap();
    cfg.apply_scr_config("GROUPS=n1 RACK=a").unwrap();
    cfg
}

#[test]
fn kvtree_round_trip_keeps_everything() {
    let mut cfg = rich_config();
    assert!(!cfg.warnings().is_empty());
    for initialized in [false, true] {
        if initialized {
            cfg.mark_initialized();
        }
        let packed = cfg.to_kvtree().pack();
        let back = Config::from_kvtree(&KvTree::unpack_exact(&packed).unwrap()).unwrap();
        assert_eq!(back, cfg);
        assert_eq!(back.all(), cfg.all());
        assert_eq!(back.descriptors(), cfg.descriptors());
    }
}

#[test]
fn damaged_kvtree_is_a_typed_error() {
    let good = rich_config().to_kvtree();
    let mut cases = Vec::new();
    let mut t = good.clone();
    t.unset("VERSION");
    cases.push(t);
    let mut t = good.clone();
    t.set_val("VERSION", "9");
    cases.push(t);
    let mut t = good.clone();
    t.set_val("INIT", "2");
    cases.push(t);
    let mut t = good.clone();
    t.unset("APP");
    cases.push(t);
    let mut t = good.clone();
    t.entry("USER")
        .entry("PARAM")
        .entry("SCR_JOB_NAME")
        .set_val("LINE", "one");
    cases.push(t);
    let mut t = good.clone();
    t.entry("SYSTEM").entry("CKPT").set("x", KvTree::new());
    cases.push(t);
    let mut t = good.clone();
    t.entry("WARN").set_val("0", "{not json");
    cases.push(t);
    let mut t = good.clone();
    t.entry("ENV").entry("SCR_FLUSH").set_kv("5", "");
    t.entry("ENV").entry("SCR_FLUSH").entry("6");
    cases.push(t);
    cases.push(KvTree::new());
    for (i, t) in cases.iter().enumerate() {
        assert!(
            matches!(Config::from_kvtree(t), Err(ConfigError::Serialized { .. })),
            "case {i}"
        );
    }
}

#[test]
fn app_conf_persists_scr_config_values_for_scripts() {
    let cfg = rich_config();
    let f = Fixture::new();
    let prefix = f.path("prefix");
    let path = cfg.write_app_conf(&prefix).unwrap();
    assert_eq!(path, prefix.join(".scr/app.conf"));
    // SCR's own hash layout, readable by `scr print`.
    let tree = crate::kvtree::file::read(&path).unwrap();
    assert_eq!(tree.val("SCR_HALT_SECONDS"), Some("30"));
    assert_eq!(
        tree.get_kv("CKPT", "0").and_then(|c| c.val("TYPE")),
        Some("RS")
    );
    let f = f.var("SCR_PREFIX", prefix.to_str().unwrap());
    let opts = LoadOptions {
        system_file: Some(f.path("none.conf")),
        read_app_conf: true,
    };
    let loaded = Config::load(&f.env(), &opts).unwrap();
    assert_eq!(loaded.scr_config_layer(), cfg.scr_config_layer());
    assert_eq!(
        src(&loaded, "SCR_HALT_SECONDS"),
        ("30".into(), Source::ScrConfig)
    );
}

// --------------------------------------------------------- collective load

/// Ranks as threads sharing one broadcast slot; enough for the one collective.
struct ThreadBcast {
    rank: usize,
    slot: std::sync::Arc<(std::sync::Mutex<Option<Vec<u8>>>, std::sync::Condvar)>,
}

impl Broadcast for ThreadBcast {
    fn rank(&self) -> usize {
        self.rank
    }
    fn bcast_bytes(
        &self,
        root: usize,
        buf: &mut Vec<u8>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let (lock, cv) = &*self.slot;
        let mut g = lock.lock().map_err(|e| e.to_string())?;
        if self.rank == root {
            *g = Some(buf.clone());
            cv.notify_all();
        } else {
            let (g2, timeout) = cv
                .wait_timeout_while(g, std::time::Duration::from_secs(30), |v| v.is_none())
                .map_err(|e| e.to_string())?;
            if timeout.timed_out() {
                return Err("root never broadcast".into());
            }
            g = g2;
            buf.clone_from(g.as_ref().ok_or("empty slot")?);
        }
        Ok(())
    }
}

fn run_ranks(
    n: usize,
    env_of: impl Fn(usize) -> MapEnv + Sync,
    opts: &LoadOptions,
) -> Vec<Result<Config, ConfigError>> {
    let slot = std::sync::Arc::new((std::sync::Mutex::new(None), std::sync::Condvar::new()));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let comm = ThreadBcast {
                    rank,
                    slot: slot.clone(),
                };
                let env = env_of(rank);
                s.spawn(move || load_collective(&comm, &env, opts))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn collective_load_gives_every_rank_rank_zeros_configuration() {
    let f = Fixture::new().user("SCR_FLUSH=3\n");
    f.system(GUIDE_EXAMPLE);
    let opts = LoadOptions {
        system_file: Some(f.path("system.conf")),
        read_app_conf: false,
    };
    // Other ranks see a different (even broken) environment: only rank 0's counts.
    let results = run_ranks(
        4,
        |r| {
            if r == 0 {
                f.env()
            } else {
                MapEnv::new([("SCR_FLUSH", "junk")])
            }
        },
        &opts,
    );
    let expected = Config::load(&f.env(), &opts).unwrap();
    for r in results {
        assert_eq!(r.unwrap(), expected);
    }
}

#[test]
fn collective_load_error_on_rank_zero_reaches_every_rank() {
    let f = Fixture::new().user("CKPT=0 TYPE=RAID6\n");
    let opts = LoadOptions {
        system_file: Some(f.path("none.conf")),
        read_app_conf: false,
    };
    let results = run_ranks(3, |_| f.env(), &opts);
    let expected = Config::load(&f.env(), &opts).unwrap_err();
    assert!(matches!(expected, ConfigError::UnknownCopyType { .. }));
    for r in results {
        assert_eq!(r.unwrap_err(), expected);
    }
}

#[test]
fn collective_load_reports_a_failed_broadcast() {
    struct Broken;
    impl Broadcast for Broken {
        fn rank(&self) -> usize {
            1
        }
        fn bcast_bytes(
            &self,
            _: usize,
            _: &mut Vec<u8>,
        ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
            Err("peer gone".into())
        }
    }
    let err = load_collective(&Broken, &MapEnv::default(), &LoadOptions::default()).unwrap_err();
    assert_eq!(
        err,
        ConfigError::Comm {
            message: "peer gone".into()
        }
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        "[^\u{0}]{0,12}"
    }

    fn desc() -> impl Strategy<Value = DescLine> {
        (
            proptest::collection::btree_map("[A-Z_]{1,8}", text(), 0..4),
            any::<u32>(),
        )
            .prop_map(|(items, line)| DescLine { items, line })
    }

    fn layer() -> impl Strategy<Value = Layer> {
        (
            proptest::option::of("/[a-z/]{0,10}"),
            proptest::collection::btree_map("[A-Z_]{1,10}", (text(), any::<u32>()), 0..5),
            proptest::collection::btree_map("[a-z0-9]{1,6}", desc(), 0..3),
            proptest::collection::btree_map(text(), desc(), 0..3),
            proptest::collection::btree_map(0u32..8, desc(), 0..3),
        )
            .prop_map(|(path, values, groups, stores, ckpts)| Layer {
                path: path.map(PathBuf::from),
                values: values
                    .into_iter()
                    .map(|(k, (value, line))| (k, Setting { value, line }))
                    .collect(),
                groups,
                stores,
                ckpts,
            })
    }

    proptest! {
        #[test]
        fn any_configuration_survives_kvtree_and_pack(
            env in proptest::collection::btree_map("[A-Z_]{1,10}", text(), 0..5),
            derived in proptest::collection::btree_map("[A-Z_]{1,10}", (text(), text()), 0..3),
            user in layer(), app in layer(), system in layer(), initialized in any::<bool>(),
            warn_names in proptest::collection::vec(text(), 0..3),
        ) {
            let warnings = warn_names
                .into_iter()
                .map(|name| ConfigWarning::UnknownParameter { name, source: Source::Env })
                .collect();
            let cfg = Config { env, derived, user, app: Layer { path: None, ..app }, system, warnings, initialized };
            let packed = cfg.to_kvtree().pack();
            let back = Config::from_kvtree(&KvTree::unpack_exact(&packed).unwrap()).unwrap();
            prop_assert_eq!(back, cfg);
        }

        #[test]
        fn quoted_values_come_back_exactly(v in "[^\u{0}'\n\r]{0,30}", key in "[A-Z_]{1,10}") {
            let mut cfg = fresh();
            let name = format!("X_{key}");
            if !v.is_empty() {
                cfg.apply_scr_config(&format!("{name}='{v}'")).unwrap();
                prop_assert_eq!(cfg.apply_scr_config(&name).unwrap(), Some(v.clone()));
            }
            let env = MapEnv::default();
            let layer = parse_text(&format!("{name}='{v}'  # c\n"), Path::new("/f"), &env).unwrap();
            prop_assert_eq!(&layer.values[&name].value, &v);
        }

        #[test]
        fn scr_config_never_panics(s in "[ -~]{0,40}") {
            let mut cfg = fresh();
            let _ = cfg.apply_scr_config(&s);
        }

        #[test]
        fn config_files_never_panic(s in "[ -~\n]{0,80}") {
            let env = MapEnv::new([("HOME", "/h")]);
            let _ = parse_text(&s, Path::new("/f"), &env);
        }
    }
}

// ------------------------------------------------------------------ report

#[test]
fn report_of_a_fixed_configuration() {
    // Committed fixture files, named relative to the package directory
    // (cargo runs tests there) so the snapshot holds no temporary paths.
    let env = MapEnv::new([
        ("SCR_CONF_FILE", "tests/data/config/user.conf"),
        ("SCR_CONFIG_FILE", "tests/data/config/system.conf"),
        ("SCR_PREFIX", "/p/run"),
        ("SCR_FLUSH", "4"),
        ("SLURM_JOBID", "77"),
        ("SCR_LOG_DB_PASS", "x"),
        ("SCR_TEST_HOME", "/home/t"),
        ("USER", "alice"),
    ]);
    let mut cfg = Config::load(&env, &LoadOptions::default()).unwrap();
    cfg.apply_scr_config("SCR_HALT_SECONDS=30").unwrap();
    let r = report::Report::new(&cfg).unwrap();
    insta::assert_snapshot!("report_table", r.to_table());
    insta::assert_snapshot!("report_json", r.to_json());
}

mod input;
