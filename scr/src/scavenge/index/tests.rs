use super::*;
use std::fs;

/// A prefix whose index holds datasets 1..=4 (3 incomplete, 4 a FAILED
/// fetch), named `ckpt.<id>` in directories `ckpt.<id>`, plus dataset 5
/// named `out` in `scr.dataset.5`.
fn prefix_with_index() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut idx = Index::default();
    for id in 1..=4 {
        let ds = Dataset {
            name: Some(format!("ckpt.{id}")),
            ckpt: Some(id),
            ..Dataset::new(id)
        };
        idx.set_dataset(id, &format!("ckpt.{id}"), ds, id != 3);
        idx.mark_flushed(id, &format!("ckpt.{id}"), timestamp(1_000 + id));
    }
    idx.mark_failed(4, "ckpt.4", timestamp(2_000));
    let out = Dataset {
        name: Some("out".into()),
        flag_output: Some(true),
        ..Dataset::new(5)
    };
    idx.set_dataset(5, "scr.dataset.5", out, true);
    idx.set_current("ckpt.4");
    fs::create_dir_all(dir.path().join(META_DIR)).unwrap();
    idx.write_file(index_path(dir.path())).unwrap();
    dir
}

#[test]
fn names_resolve_by_dataset_name_then_directory_then_id() {
    let d = prefix_with_index();
    let idx = read_index(d.path()).unwrap();
    assert_eq!(resolve(&idx, "out"), vec![(5, "scr.dataset.5".to_string())]);
    assert_eq!(
        resolve(&idx, "scr.dataset.5/"),
        vec![(5, "scr.dataset.5".to_string())]
    );
    assert_eq!(resolve(&idx, "2"), vec![(2, "ckpt.2".to_string())]);
    assert!(resolve(&idx, "nothing").is_empty());
}

#[test]
fn listing_is_newest_first_and_marks_current() {
    let d = prefix_with_index();
    let IndexListing { current, rows } = list(d.path()).unwrap();
    assert_eq!(current.as_deref(), Some("ckpt.4"));
    assert_eq!(
        rows.iter().map(|r| r.id).collect::<Vec<_>>(),
        [5, 4, 3, 2, 1]
    );
    assert!(rows[1].current && rows[1].failed.len() == 1);
    assert_eq!(rows[0].checkpoint, Some(false));
    assert_eq!(rows[2].complete, Some(false));
    assert_eq!(rows[4].flushed.as_deref(), Some("1970-01-01T00:16:41"));
}

#[test]
fn current_warns_about_copies_a_restart_would_skip() {
    let d = prefix_with_index();
    let r = set_current(d.path(), "ckpt.2").unwrap();
    assert_eq!((r.id, r.dir.as_str(), r.warning), (2, "ckpt.2", None));
    let r = set_current(d.path(), "ckpt.3").unwrap();
    assert!(r.warning.unwrap().contains("not complete"));
    let r = set_current(d.path(), "ckpt.4").unwrap();
    assert!(r.warning.unwrap().contains("failed"));
    assert_eq!(
        read_index(d.path()).unwrap().current.as_deref(),
        Some("ckpt.4")
    );
    assert!(matches!(
        set_current(d.path(), "ckpt.9"),
        Err(ScavengeError::UnknownName { .. })
    ));
}

#[test]
fn drop_removes_entries_and_drop_after_the_newer_ones() {
    let d = prefix_with_index();
    assert_eq!(
        drop_name(d.path(), "ckpt.1").unwrap(),
        vec![(1, "ckpt.1".into())]
    );
    assert!(matches!(
        drop_name(d.path(), "ckpt.1"),
        Err(ScavengeError::UnknownName { .. })
    ));
    let gone = drop_after(d.path(), "ckpt.3").unwrap();
    assert_eq!(
        gone,
        vec![(4, "ckpt.4".to_string()), (5, "scr.dataset.5".to_string())]
    );
    let idx = read_index(d.path()).unwrap();
    assert_eq!(idx.datasets.keys().copied().collect::<Vec<_>>(), [2, 3]);
    // CURRENT named a dropped directory: cleared, so a restart takes the newest.
    assert_eq!(idx.current, None);
    assert_eq!(drop_after(d.path(), "ckpt.3").unwrap(), vec![]);
}

#[test]
fn directory_names_must_stay_below_the_prefix() {
    let p = Path::new("/p/sim");
    assert_eq!(relative_dir(p, "ckpt.1/").unwrap(), "ckpt.1");
    assert_eq!(relative_dir(p, "/p/sim/a/b").unwrap(), "a/b");
    for bad in ["/elsewhere/x", "../x", ".scr", ".scr/x", "", "a/../b"] {
        assert!(
            matches!(
                relative_dir(p, bad),
                Err(ScavengeError::NotBelowPrefix { .. } | ScavengeError::OutsidePrefix { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn redundancy_file_names_parse_for_both_schemes() {
    assert_eq!(
        parse_set_file("3_of_4_in_0.xor"),
        Some((CopyType::Xor, 2, 4, 0))
    );
    assert_eq!(
        parse_set_file("1_of_6_in_7.rs"),
        Some((CopyType::Rs, 0, 6, 7))
    );
    assert_eq!(parse_set_file("5_of_4_in_0.rs"), None);
    assert_eq!(parse_set_file("rank_0.ckpt"), None);
}

#[test]
fn inspect_finds_missing_short_and_excess_ranks() {
    let mut s = Scan {
        ranks: Some(4),
        ..Scan::default()
    };
    let entry = |n: usize, expected: u64| {
        let mut r = RankScan {
            expected,
            ..RankScan::default()
        };
        for i in 0..n {
            r.files.insert(
                format!("f{i}"),
                (Meta::default(), Rank2FileEntry::default()),
            );
        }
        r
    };
    s.rank.insert(0, entry(2, 2));
    s.rank.insert(1, entry(1, 2));
    let mut damaged = entry(1, 1);
    damaged.damaged.push("f9: marked incomplete".into());
    s.rank.insert(3, damaged);
    assert_eq!(inspect(&mut s), vec![1, 2, 3]);
    assert!(s.invalid.is_empty());
    s.rank.insert(0, entry(3, 2));
    s.rank.insert(7, entry(0, 0));
    inspect(&mut s);
    assert_eq!(s.invalid.len(), 2, "{:?}", s.invalid);
}

#[test]
fn a_directory_without_metadata_is_not_a_dataset() {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir_all(d.path().join("empty/.scr")).unwrap();
    assert!(matches!(
        add_dir(d.path(), "empty"),
        Err(ScavengeError::NotADataset { .. })
    ));
    assert!(matches!(
        add_dir(d.path(), "absent"),
        Err(ScavengeError::NoSuchDir { .. })
    ));
    // A damaged rank filemap is named.
    fs::write(d.path().join("empty/.scr/0.scrfilemap"), b"garbage").unwrap();
    let e = add_dir(d.path(), "empty").unwrap_err().to_string();
    assert!(e.contains("0.scrfilemap") || e.contains("rank 0"), "{e}");
}

/// The dataset walk of `scr index --rebuild` lists what is below the
/// prefix: a link there — to a dataset directory or an SCR 3.1 metadata
/// directory outside it — is no dataset, and neither is a directory whose
/// `summary.scr` is a link. (Until 2026-11-28 `.scr/scr.dataset.<id>`
/// links were taken for datasets: `is_dir` followed them.)
#[test]
fn the_dataset_walk_lists_only_what_is_below_the_prefix_never_through_a_link() {
    let t = tempfile::tempdir().unwrap();
    let prefix = t.path().join("prefix");
    let out = t.path().join("out");
    for d in ["ckpt.1/.scr", "ckpt.3/.scr", ".scr/scr.dataset.4"] {
        fs::create_dir_all(prefix.join(d)).unwrap();
    }
    for d in ["planted/.scr", "scr.dataset.7"] {
        fs::create_dir_all(out.join(d)).unwrap();
    }
    fs::write(prefix.join("ckpt.1/.scr").join(SUMMARY_FILE), b"s").unwrap();
    fs::write(out.join("planted/.scr").join(SUMMARY_FILE), b"s").unwrap();
    let link = std::os::unix::fs::symlink;
    link(out.join("planted"), prefix.join("ckpt.2")).unwrap();
    link(out.join("scr.dataset.7"), prefix.join(".scr/scr.dataset.7")).unwrap();
    link(
        out.join("planted/.scr").join(SUMMARY_FILE),
        prefix.join("ckpt.3/.scr").join(SUMMARY_FILE),
    )
    .unwrap();
    let found = find_targets(&prefix).unwrap();
    assert_eq!(
        found,
        [Target::Dir(DatasetDir("ckpt.1".into())), Target::Id(4)],
        "{found:?}"
    );
    // Asked for by id, a link is not taken for an SCR 3.1 dataset.
    assert_eq!(Target::parse(&prefix, "4").unwrap(), Target::Id(4));
    assert_eq!(
        Target::parse(&prefix, "7").unwrap(),
        Target::Dir(DatasetDir("7".into()))
    );
}

/// A file the rank2file map lists is checked through a handle opened below
/// the prefix: a link in its place (or on the way) is a problem, however
/// right the bytes it leads to.
#[test]
fn a_listed_file_is_checked_below_the_prefix_never_through_a_link() {
    let t = tempfile::tempdir().unwrap();
    let prefix = t.path().join("prefix");
    fs::create_dir_all(prefix.join("ckpt.1")).unwrap();
    fs::create_dir_all(t.path().join("out")).unwrap();
    let bytes = b"the checkpoint";
    let crc = crc32fast::hash(bytes);
    let real = prefix.join("ckpt.1/rank_0");
    fs::write(&real, bytes).unwrap();
    fs::write(t.path().join("out/rank_1"), bytes).unwrap();
    std::os::unix::fs::symlink(t.path().join("out/rank_1"), prefix.join("ckpt.1/rank_1")).unwrap();
    std::os::unix::fs::symlink(t.path().join("out"), prefix.join("alt")).unwrap();
    let size = Some(bytes.len() as u64);
    assert_eq!(verify::problem_of(&prefix, &real, size, Some(crc)), None);
    let p = verify::problem_of(&prefix, &real, size, Some(crc ^ 1)).unwrap();
    assert!(p.contains("CRC32"), "{p}");
    for linked in ["ckpt.1/rank_1", "alt/rank_1"] {
        let p = verify::problem_of(&prefix, &prefix.join(linked), size, Some(crc));
        assert!(
            p.as_deref().is_some_and(|p| p.contains("link")),
            "{linked}: {p:?}"
        );
    }
}
