use super::*;

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn strings(argv: &[OsString]) -> Vec<String> {
    argv.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

fn job(nodes: &[(&str, usize)]) -> JobSpec {
    JobSpec {
        program: PathBuf::from("/bin/app"),
        args: os(&["--seed", "7"]),
        nodes: nodes
            .iter()
            .map(|(n, r)| NodeSpec {
                name: n.to_string(),
                ranks: *r,
                env: BTreeMap::new(),
            })
            .collect(),
        env: BTreeMap::new(),
    }
}

#[test]
fn a_template_replaces_node_in_every_argument() {
    let l = TemplateLauncher::new(vec![
        "env".into(),
        "SCR_NODE_NAME={node}".into(),
        "SCR_NODE_ROOT=/sim/{node}".into(),
    ])
    .unwrap();
    let argv = l
        .node_argv("n3", &os(&["scr", "copy", "--id", "4"]))
        .unwrap();
    assert_eq!(
        strings(&argv),
        [
            "env",
            "SCR_NODE_NAME=n3",
            "SCR_NODE_ROOT=/sim/n3",
            "scr",
            "copy",
            "--id",
            "4"
        ]
    );
    // One rank on one node, its variables through `env`.
    let mut j = job(&[("n1", 1)]);
    j.env.insert("A".into(), "x y".into());
    assert_eq!(
        strings(
            &TemplateLauncher::new(vec!["ssh".into(), "{node}".into()])
                .unwrap()
                .job_argv(&j)
                .unwrap()
        ),
        ["ssh", "n1", "env", "A=x y", "/bin/app", "--seed", "7"]
    );
    assert!(matches!(
        l.job_argv(&job(&[("n0", 1), ("n1", 1)])),
        Err(LaunchError::Unsupported { .. })
    ));
    assert!(matches!(
        TemplateLauncher::new(Vec::new()),
        Err(LaunchError::EmptyArgv)
    ));
}

#[test]
fn the_local_launcher_runs_commands_as_they_are() {
    let argv = LocalLauncher
        .node_argv("anything", &os(&["echo", "hi"]))
        .unwrap();
    assert_eq!(strings(&argv), ["echo", "hi"]);
    assert_eq!(
        strings(&LocalLauncher.job_argv(&job(&[("here", 1)])).unwrap()),
        ["/bin/app", "--seed", "7"]
    );
    assert!(matches!(
        LocalLauncher.job_argv(&job(&[("here", 2)])),
        Err(LaunchError::Unsupported { .. })
    ));
    assert!(matches!(
        LocalLauncher.job_argv(&job(&[("here", 0)])),
        Err(LaunchError::NoRanks)
    ));
}

#[test]
fn mpirun_on_simulated_nodes_gives_one_context_per_node() {
    let mut j = job(&[("node0", 2), ("idle", 0), ("node1", 2)]);
    j.env.insert("SCR_CACHE_BASE".into(), "/shared".into());
    j.nodes[2]
        .env
        .insert("SCR_CACHE_BASE".into(), "/tmp/cache/node1".into());
    let argv = strings(&MpirunLauncher::simulated().job_argv(&j).unwrap());
    assert_eq!(
        argv,
        [
            "mpirun",
            "--oversubscribe",
            "-np",
            "2",
            "-x",
            "SCR_CACHE_BASE=/shared",
            "-x",
            "SCR_NODE_NAME=node0",
            "/bin/app",
            "--seed",
            "7",
            ":",
            "-np",
            "2",
            "-x",
            "SCR_CACHE_BASE=/tmp/cache/node1",
            "-x",
            "SCR_NODE_NAME=node1",
            "/bin/app",
            "--seed",
            "7",
        ]
    );
    j.env.insert("A=B".into(), "1".into());
    assert!(matches!(
        MpirunLauncher::simulated().job_argv(&j),
        Err(LaunchError::BadEnvName(n)) if n == "A=B"
    ));
}

#[test]
fn mpirun_on_real_hosts_names_them_with_host() {
    let l = MpirunLauncher {
        program: PathBuf::from("mpirun"),
        args: Vec::new(),
        placement: Placement::Hosts {
            hostfile: Some(PathBuf::from("/etc/hosts.mpi")),
        },
    };
    assert_eq!(
        strings(&l.job_argv(&job(&[("a", 1), ("b", 1)])).unwrap()),
        [
            "mpirun",
            "--hostfile",
            "/etc/hosts.mpi",
            "--host",
            "a,b",
            "--map-by",
            "node",
            "-np",
            "2",
            "/bin/app",
            "--seed",
            "7"
        ]
    );
    assert_eq!(
        strings(&l.node_argv("c", &os(&["hostname"])).unwrap()),
        [
            "mpirun",
            "--hostfile",
            "/etc/hosts.mpi",
            "--host",
            "c",
            "--map-by",
            "node",
            "-np",
            "1",
            "hostname"
        ]
    );
    assert!(strings(&l.job_argv(&job(&[("a", 2), ("b", 2)])).unwrap())
        .windows(2)
        .any(|w| w == ["--host", "a:2,b:2"]));
    assert!(matches!(
        l.job_argv(&job(&[("a", 1), ("b", 2)])),
        Err(LaunchError::Unsupported { .. })
    ));
}

#[test]
fn run_argv_captures_output_and_exit_code() {
    let out = run_argv(
        &os(&["sh", "-c", "echo out; echo err >&2; exit 3"]),
        Duration::from_secs(30),
    )
    .expect("runs");
    assert_eq!(
        (out.code(), out.stdout.as_str(), out.stderr.as_str()),
        (3, "out\n", "err\n")
    );
}

#[test]
fn run_argv_kills_the_whole_group_on_timeout() {
    // A background grandchild holds the pipe open: only a group kill ends
    // it (without one this test would wait 30 s for the pipe to close).
    match run_argv(
        &os(&["sh", "-c", "echo started; sleep 30 & sleep 30"]),
        Duration::from_millis(300),
    ) {
        Err(LaunchError::Timeout { stdout, .. }) => assert_eq!(stdout, "started\n"),
        other => panic!("expected Timeout, got {other:?}"),
    }
}

#[test]
fn a_watcher_can_end_a_stuck_launcher() {
    let mut seen = 0u32;
    let r = LocalLauncher.run(&os(&["sleep", "30"]), Duration::from_secs(60), &mut |pid| {
        seen = pid;
        Watch::LauncherStuck
    });
    assert!(matches!(r, Err(LaunchError::LauncherStuck { .. })), "{r:?}");
    assert_ne!(seen, 0);
}

#[test]
fn a_missing_launcher_is_a_spawn_error() {
    assert!(matches!(
        LocalLauncher.run_on_node(
            "here",
            &os(&["/nonexistent/mpirun"]),
            Duration::from_secs(1)
        ),
        Err(LaunchError::Spawn { .. })
    ));
}
