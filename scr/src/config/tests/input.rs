//! Messages for config files that are not what they should be: each says
//! what is wrong with the file, where, and what to do — never "fix its
//! permissions" for a file whose bytes are wrong.

use super::*;

#[test]
fn a_too_large_config_file_says_so_not_permissions() {
    let f = Fixture::new();
    let p = f.path("huge.conf");
    std::fs::File::create(&p)
        .unwrap()
        .set_len(MAX_FILE_BYTES + 1)
        .unwrap();
    let err = f
        .var("SCR_CONF_FILE", p.to_str().unwrap())
        .load()
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::TooLarge { path, limit } if *path == p && *limit == MAX_FILE_BYTES),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains("larger than") && !shown.contains("permission"),
        "{shown}"
    );
}

#[test]
fn an_app_conf_with_a_bad_crc_is_damaged_not_a_permission_problem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.conf");
    let mut t = crate::kvtree::KvTree::new();
    t.set_kv("SCR_FLUSH", "4");
    crate::kvtree::file::write(&path, &t).unwrap();
    let mut b = std::fs::read(&path).unwrap();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    std::fs::write(&path, &b).unwrap();
    let err = serial::read_app_conf(dir.path(), &path).unwrap_err();
    assert!(
        matches!(&err, ConfigError::Damaged { path: p, message } if *p == path && message.contains("CRC32")),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains("is damaged")
            && shown.contains("remove it")
            && !shown.contains("permission"),
        "{shown}"
    );
    // A directory in its place is still the operating system's refusal.
    let d = dir.path().join("dir.conf");
    std::fs::create_dir(&d).unwrap();
    assert!(matches!(
        serial::read_app_conf(dir.path(), &d),
        Err(ConfigError::Io { .. })
    ));
}

/// SCR 3.1 leaves an empty `app.conf` in the prefixes it ran in: no
/// settings, not damage (the tools read it in such a prefix). A file cut
/// short after some bytes is still damaged.
#[test]
fn an_empty_app_conf_as_scr31_leaves_it_holds_no_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.conf");
    std::fs::write(&path, b"").unwrap();
    let l = serial::read_app_conf(dir.path(), &path).unwrap();
    assert!(l.values.is_empty() && l.ckpts.is_empty(), "{l:?}");
    std::fs::write(&path, b"SCRH").unwrap();
    assert!(matches!(
        serial::read_app_conf(dir.path(), &path),
        Err(ConfigError::Damaged { .. })
    ));
}

#[test]
fn a_binary_config_file_is_reported_at_the_line_of_its_first_binary_byte() {
    let f = Fixture::new();
    let p = f.path("user.conf");
    std::fs::write(&p, b"SCR_FLUSH=4\n# ok\nSCR_CACHE_SIZE=\x00\x01\x02\n").unwrap();
    let err = f
        .var("SCR_CONF_FILE", p.to_str().unwrap())
        .load()
        .unwrap_err();
    assert_eq!(file_at(&err), (p.clone(), 3, 16), "{err:?}");
    let shown = err.to_string();
    assert!(
        shown.contains(":3:16") && shown.contains("0x00") && shown.contains("offset 32"),
        "{shown}"
    );
    // Invalid UTF-8 too, after a multi-byte character on the same line.
    let g = Fixture::new();
    let q = g.path("latin1.conf");
    std::fs::write(
        &q,
        "SCR_FLUSH=4\nSCR_PREFIX=/é/"
            .bytes()
            .chain([0xe9, b'\n'])
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let err = g
        .var("SCR_CONF_FILE", q.to_str().unwrap())
        .load()
        .unwrap_err();
    assert_eq!(file_at(&err), (q, 2, 15), "{err:?}");
}

#[test]
fn a_missing_scr_conf_file_is_a_warning() {
    let f = Fixture::new();
    let p = f.path("not-there.conf");
    let cfg = f.var("SCR_CONF_FILE", p.to_str().unwrap()).load().unwrap();
    let w = cfg
        .warnings()
        .iter()
        .find(|w| matches!(w, ConfigWarning::MissingUserFile { path } if *path == p));
    let w = w.unwrap_or_else(|| panic!("{:?}", cfg.warnings()));
    assert!(w.to_string().contains("no such file"), "{w}");
    // The default user file (<prefix>/.scrconf) is optional: no warning.
    let cfg = Fixture::new().load().unwrap();
    assert!(
        !cfg.warnings()
            .iter()
            .any(|w| matches!(w, ConfigWarning::MissingUserFile { .. })),
        "{:?}",
        cfg.warnings()
    );
}
