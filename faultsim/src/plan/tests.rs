//! Plans: the documented examples, validation, contradictions, the files
//! in `faultsim/plans/`, roles, postrun moments.

use super::*;
use crate::runtime::{parse_plan, ErrorKind};

const JSON: &str = r#"{"name": "kill rank 2 as its 3rd encode begins, then damage a filemap",
 "faults": [
  {"what": {"kind": "kill-rank", "rank": 2},
   "when": {"at": "point", "point": "redundancy.encode", "hit": 3}},
  {"what": {"kind": "corrupt",
            "target": {"area": "cache", "node": "n1", "select": {"role": "filemap"}},
            "how": {"kind": "bit-flips", "count": 4}},
   "when": {"at": "after-run", "run": 1}}]}"#;

const TOML: &str = r#"
name = "node n1 dies during the second flush"
[[faults]]
what = { kind = "kill-node", node = "n1", then = "make-unreadable" }
when = { at = "point", point = "flush.file.copied", hit = 2 }
[[faults]]
what = { kind = "pfs-outage" }
when = { at = "between-checkpoints", after = 3 }
[[faults]]
run = 2
what = { kind = "slow-io", delay_ms = 20 }
when = { at = "point", point = "fetch.file", repeat = true, rank = 3 }
"#;

fn topo() -> Topology {
    Topology::simulated(4, 2)
}

#[test]
fn documented_examples_parse_validate_and_round_trip() {
    let plan = Plan::from_json(JSON, "json").expect("json example");
    assert_eq!(plan.validate(&topo()), Ok(vec![]));
    assert_eq!(
        plan.to_env(1).as_deref(),
        Some("redundancy.encode#3@rank:2=kill")
    );
    assert_eq!(plan.external().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
    let again = Plan::from_toml(&plan.to_toml().expect("toml"), "t").expect("reparse");
    assert_eq!(again, plan);

    let plan = Plan::from_toml(TOML, "toml").expect("toml example");
    assert_eq!(plan.validate(&topo()), Ok(vec![]));
    assert_eq!(
        plan.to_env(1).as_deref(),
        Some("flush.file.copied#2@node:n1=kill-node")
    );
    assert_eq!(
        plan.to_env(2).as_deref(),
        Some("fetch.file#1+@rank:3=delay:20")
    );
    assert_eq!(plan.to_env(3), None);
    // The kill-node leaves directories for the harness, and the outage.
    assert_eq!(plan.external().map(|(i, _)| i).collect::<Vec<_>>(), [0, 1]);
    let again = Plan::from_json(&plan.to_json(), "j").expect("reparse");
    assert_eq!(again, plan);
    for run in 1..=2 {
        let env = plan.to_env(run).expect("env");
        assert_eq!(
            parse_plan(&env).expect("scr parses it"),
            plan.fault_plan(run)
        );
    }
}

#[test]
fn application_moments_become_api_points() {
    let plan = Plan {
        faults: vec![
            Fault {
                what: What::KillRank { rank: 1 },
                when: When::DuringComplete { checkpoint: 2 },
                run: 1,
            },
            Fault {
                what: What::ExitRank { rank: 0, code: 4 },
                when: When::BetweenCheckpoints { after: 3 },
                run: 1,
            },
            Fault {
                what: What::IoError {
                    error: ErrorKind::Enospc,
                },
                when: When::DuringStart { checkpoint: 1 },
                run: 1,
            },
        ],
        ..Plan::default()
    };
    assert_eq!(plan.validate(&topo()), Ok(vec![]));
    assert_eq!(
        plan.to_env(1).as_deref(),
        Some("api.complete_output#2@rank:1=kill;app.compute#3@rank:0=exit:4;api.start_output#1=error:enospc")
    );
}

fn one_fault(what: What, when: When) -> Plan {
    Plan {
        faults: vec![Fault { what, when, run: 1 }],
        ..Plan::default()
    }
}

/// The second hit of `point` during postrun (none: just before it).
fn at(point: Option<&str>) -> When {
    When::Postrun {
        point: point.map(str::to_string),
        hit: 2,
        repeat: false,
    }
}

fn point(p: &str) -> When {
    When::Point {
        point: p.into(),
        hit: 1,
        repeat: false,
        rank: None,
    }
}

#[test]
fn invalid_plans_are_typed_errors() {
    let t = topo();
    let err = |p: Plan| p.validate(&t).expect_err("invalid plan");
    assert!(matches!(
        err(one_fault(What::KillRank { rank: 8 }, point("fetch.file"))),
        PlanError::NoSuchRank {
            rank: 8,
            ranks: 8,
            ..
        }
    ));
    assert!(matches!(
        err(one_fault(
            What::KillNode {
                node: "n9".into(),
                then: NodeAftermath::Keep
            },
            point("fetch.file")
        )),
        PlanError::NoSuchNode { .. }
    ));
    assert!(matches!(
        err(one_fault(
            What::KillRank { rank: 1 },
            When::BeforeRun { run: 1 }
        )),
        PlanError::BadMoment { .. }
    ));
    assert!(matches!(
        err(one_fault(
            What::PfsOutage {
                method: OutageMethod::Auto
            },
            point("fetch.file")
        )),
        PlanError::BadMoment { .. }
    ));
    assert!(matches!(
        err(one_fault(
            What::SlowIo { delay_ms: 1 },
            When::AfterRun { run: 1 }
        )),
        PlanError::BadMoment { .. }
    ));
    let corrupt = |how| What::Corrupt {
        target: Target {
            area: Area::Cache,
            node: None,
            dataset: None,
            select: Selector::Role(Role::AppFile),
            files: None,
        },
        how,
    };
    let after = When::AfterRun { run: 1 };
    for how in [
        Corruption::BitFlips {
            count: None,
            offsets: None,
        },
        Corruption::BitFlips {
            count: Some(0),
            offsets: None,
        },
        Corruption::BitFlips {
            count: Some(1),
            offsets: Some(vec![1]),
        },
        Corruption::Truncate {
            to_bytes: None,
            fraction: Some(1.5),
        },
        Corruption::Truncate {
            to_bytes: Some(1),
            fraction: Some(0.5),
        },
    ] {
        let e = err(one_fault(corrupt(how.clone()), after.clone()));
        assert!(
            matches!(e, PlanError::Invalid { index: 0, .. }),
            "{how:?}: {e}"
        );
    }
    let e = err(one_fault(
        What::KillNode {
            node: "n0".into(),
            then: NodeAftermath::RemoveDirs,
        },
        When::Point {
            point: "fetch.file".into(),
            hit: 1,
            repeat: false,
            rank: Some(5),
        },
    ));
    assert!(
        e.to_string().contains("rank 5 does not run on node n0"),
        "{e}"
    );
    let e = err(one_fault(
        What::KillRank { rank: 1 },
        When::Point {
            point: "fetch.file".into(),
            hit: 0,
            repeat: false,
            rank: None,
        },
    ));
    assert!(e.to_string().contains("start at 1"), "{e}");
}

#[test]
fn contradictions_and_unknown_points() {
    let t = topo();
    let mut plan = one_fault(What::KillRank { rank: 1 }, point("fetch.file"));
    plan.faults.push(Fault {
        what: What::ExitRank { rank: 1, code: 3 },
        when: point("fetch.file"),
        run: 1,
    });
    assert!(matches!(
        plan.validate(&t),
        Err(PlanError::Contradiction {
            first: 0,
            second: 1,
            ..
        })
    ));
    plan.faults[1].run = 2;
    assert_eq!(plan.validate(&t), Ok(vec![]), "different runs do not clash");
    let plan = one_fault(What::KillRank { rank: 1 }, point("my.new.point"));
    assert_eq!(
        plan.validate(&t),
        Ok(vec![Warning::UnknownPoint {
            index: 0,
            point: "my.new.point".into()
        }])
    );
}

#[test]
fn unknown_fields_and_kinds_are_rejected_with_position() {
    let e = Plan::from_json(
        r#"{"faults":[{"what":{"kind":"kill-rank","rnak":1},"when":{"at":"after-run","run":1}}]}"#,
        "p.json",
    )
    .expect_err("typo");
    assert!(e.to_string().starts_with("p.json: not a fault plan"), "{e}");
    assert!(e.to_string().contains("rnak"), "{e}");
    let e = Plan::from_toml(
        "[[faults]]\nwhat = { kind = \"melt\" }\nwhen = { at = \"after-run\", run = 1 }\n",
        "p.toml",
    )
    .expect_err("unknown kind");
    assert!(e.to_string().contains("melt"), "{e}");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("plan.toml");
    std::fs::write(&path, TOML).expect("write");
    assert_eq!(Plan::read(&path), Plan::from_toml(TOML, "x"));
    assert!(matches!(
        Plan::read(dir.path().join("none.json")),
        Err(PlanError::Read { .. })
    ));
}

#[test]
fn example_plans_in_the_repo_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).expect("faultsim/plans") {
        let path = entry.expect("entry").path();
        let plan = Plan::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let warnings = plan
            .validate(&topo())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(warnings, [], "{}", path.display());
        assert!(!plan.faults.is_empty(), "{}", path.display());
        read += 1;
    }
    assert!(read >= 2, "example plans missing from {}", dir.display());
}

#[test]
fn roles_follow_the_scr_layout() {
    let cases = [
        ("scr.dataset.3/rank_0.ckpt", Some(Role::AppFile)),
        ("scr.dataset.3/sub/dir/out.h5", Some(Role::AppFile)),
        ("scr.dataset.3/.scr/1_of_4_in_0.xor", Some(Role::ParityFile)),
        (
            "scr.dataset.3/.scr/12_of_16_in_8.rs",
            Some(Role::ParityFile),
        ),
        ("filemap.scrinfo", Some(Role::MasterFilemap)),
        ("filemap_7.scrinfo", Some(Role::Filemap)),
        ("scr.dataset.3/.scr/7.scrfilemap", Some(Role::Filemap)),
        (".scr/index.scr", Some(Role::Index)),
        (".scr/scr.dataset.3/summary.scr", Some(Role::Summary)),
        (
            ".scr/scr.dataset.3/rank2file.0.0.scr",
            Some(Role::Rank2file),
        ),
        (".scr/halt.scr", Some(Role::Halt)),
        ("flush.scr", Some(Role::Flush)),
        ("nodes.scr", Some(Role::Nodes)),
        ("x_of_4_in_0.xor", None),
        ("random.txt", None),
        ("scr.dataset.3/file.lock", None),
    ];
    for (path, role) in cases {
        assert_eq!(Role::of(Path::new(path)), role, "{path}");
    }
    let glob = Selector::Glob("scr.dataset.*/*.ckpt".into());
    assert!(glob.matches(Path::new("scr.dataset.3/rank_0.ckpt")));
    assert!(!glob.matches(Path::new("scr.dataset.3/sub/rank_0.ckpt")));
    assert!(Selector::Glob("**/*.xor".into()).matches(Path::new("a/b/.scr/1_of_2_in_0.xor")));
}

#[test]
fn postrun_moments_route_faults_to_the_scavenge() {
    let text = r#"
[[faults]]
what = { kind = "kill-node", node = "n1", then = "keep" }
when = { at = "postrun", point = "scavenge.file", hit = 2 }
[[faults]]
what = { kind = "pfs-outage" }
when = { at = "postrun" }
[[faults]]
what = { kind = "kill-rank", rank = 1 }
when = { at = "point", point = "scavenge.file", hit = 2 }
"#;
    let plan = Plan::from_toml(text, "t").expect("parses");
    assert_eq!(plan.validate(&topo()), Ok(vec![]));
    // The postrun point is not a launch's; a launch's point with the
    // same name and hit does not contradict it.
    assert_eq!(
        plan.postrun_fault_plan().to_string(),
        "scavenge.file#2@node:n1=kill-node"
    );
    assert_eq!(
        plan.fault_plan(1).to_string(),
        "scavenge.file#2@rank:1=kill"
    );
    let ext: Vec<usize> = plan.external().map(|(i, _)| i).collect();
    assert_eq!(ext, [1]);
    assert!(plan.points().contains("scavenge.file"));
    let bad = one_fault(
        What::KillRank { rank: 1 },
        When::Postrun {
            point: Some("scavenge.file".into()),
            hit: 1,
            repeat: false,
        },
    );
    let e = bad.validate(&topo()).unwrap_err().to_string();
    assert!(e.contains("no rank runs during postrun"), "{e}");
    let bad = one_fault(
        What::Corrupt {
            target: Target {
                area: Area::Cache,
                node: None,
                dataset: None,
                select: Selector::Role(Role::AppFile),
                files: None,
            },
            how: Corruption::Delete,
        },
        When::Postrun {
            point: Some("scavenge.file".into()),
            hit: 1,
            repeat: false,
        },
    );
    assert!(bad.validate(&topo()).is_err());
    let mut late = plan.clone();
    late.faults[1].run = 2;
    let e = late.validate(&topo()).unwrap_err().to_string();
    assert!(e.contains("leave `run` out"), "{e}");
}

/// `what` is a fault of `scr postrun`'s processes at a point: valid there
/// (its compact form `compact`), in no launch's plan, and refused inside a
/// launch and before postrun without a point.
fn assert_postrun_point_only(what: impl Fn() -> What, at_point: &str, compact: &str) {
    let t = topo();
    let plan = one_fault(what(), at(Some(at_point)));
    assert_eq!(plan.validate(&t), Ok(vec![]));
    assert!(plan.faults[0].what.in_process());
    assert_eq!(plan.postrun_fault_plan().to_string(), compact);
    assert_eq!(plan.fault_plan(1).to_string(), "");
    for when in [point(at_point), at(None), When::AfterRun { run: 1 }] {
        let e = one_fault(what(), when)
            .validate(&t)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scr postrun"), "{e}");
    }
}

#[test]
fn kill_postrun_kills_the_driver_at_a_postrun_point_only() {
    // Matched by point alone: the driver has no rank and no node.
    assert_postrun_point_only(
        || What::KillPostrun,
        "meta.index.renamed",
        "meta.index.renamed#2=kill",
    );
}

#[test]
fn a_postrun_power_loss_is_a_postrun_point_of_a_node_or_of_any_process() {
    let t = topo();
    let n1 = || What::PostrunPowerLoss {
        node: Some("n1".into()),
    };
    assert_postrun_point_only(n1, "scavenge.file", "scavenge.file#2@node:n1=power-loss");
    let any = one_fault(
        What::PostrunPowerLoss { node: None },
        at(Some("meta.index.renamed")),
    );
    assert_eq!(any.validate(&t), Ok(vec![]));
    assert_eq!(
        any.postrun_fault_plan().to_string(),
        "meta.index.renamed#2=power-loss"
    );
    // Not on a node the job does not have.
    let elsewhere = What::PostrunPowerLoss {
        node: Some("n9".into()),
    };
    assert!(one_fault(elsewhere, at(Some("scavenge.file")))
        .validate(&t)
        .is_err());
    // In a plan's text.
    let text = r#"
[[faults]]
what = { kind = "postrun-power-loss", node = "n1" }
when = { at = "postrun", point = "scavenge.file", hit = 1 }
"#;
    let parsed: Plan = toml::from_str(text).unwrap();
    assert_eq!(parsed.faults[0].what, n1());
}

#[test]
fn a_power_loss_is_a_rank_moment_in_process_and_reaches_the_runtime() {
    let t = topo();
    let plan = one_fault(What::PowerLoss { rank: 1 }, point("meta.index.synced"));
    assert_eq!(plan.validate(&t), Ok(vec![]));
    assert!(plan.faults[0].what.in_process());
    assert_eq!(
        plan.to_env(1).as_deref(),
        Some("meta.index.synced#1@rank:1=power-loss")
    );
    // No rank runs between launches or during postrun.
    let between = one_fault(What::PowerLoss { rank: 1 }, When::AfterRun { run: 1 });
    assert!(between.validate(&t).is_err());
    let out_of_range = one_fault(What::PowerLoss { rank: 8 }, point("fetch.file"));
    assert!(out_of_range.validate(&t).is_err());
}
