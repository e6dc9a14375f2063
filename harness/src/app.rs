//! Running the test application `scr_app` (crate `testing`) on simulated
//! nodes and reading what it reports: the building block of the cache-tier
//! MPI tests and of `ci/demo`.
//!
//! A [`SimCluster`] is a directory: one tree per simulated node
//! (`<root>/<node>`, given to the node's ranks as `SCR_NODE_ROOT`, so their
//! `/dev/shm` is `<root>/<node>/dev/shm`) and a shared prefix directory
//! (`<root>/prefix`). Losing a node is removing its tree
//! ([`SimCluster::remove_node`]); a relaunch names other nodes, e.g. a spare
//! in place of the lost one.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::launch::{JobOutput, LaunchError, MpiJob};

/// Variable rooting a simulated node's node-local directories (read by `scr`).
pub const NODE_ROOT_VAR: &str = "SCR_NODE_ROOT";

/// Exit code of `scr_app --fail-after`: a simulated crash.
pub const CRASH_EXIT_CODE: i32 = 42;

/// Simulated nodes (directory trees) and a prefix directory under one root.
#[derive(Debug, Clone)]
pub struct SimCluster {
    /// Directory holding every node tree and the prefix.
    pub root: PathBuf,
    /// The `scr_app` binary.
    pub app: PathBuf,
    /// Ranks on each node of a job.
    pub ranks_per_node: usize,
    /// Variables every rank sees (SCR parameters).
    pub env: BTreeMap<String, String>,
    /// Bound on each job.
    pub timeout: Duration,
}

/// What one run of `scr_app` reported.
#[derive(Debug, Clone)]
pub struct AppRun {
    /// The job's exit status and output.
    pub output: JobOutput,
    /// Rank 0's final `SCR_APP restart=…` line, parsed (absent after a
    /// crash or an abort).
    pub summary: Option<Summary>,
    /// `Some(k)` when the run crashed on purpose after `k` checkpoints.
    pub crashed_after: Option<u64>,
}

/// Rank 0's final line: `SCR_APP restart=<name|none> source=<cache|rebuilt|none>
/// verified_bytes=<N> checkpoints_written=<K> status=<ok|MISMATCH|…>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Checkpoint restarted from, `None` for `restart=none`.
    pub restart: Option<String>,
    /// `cache`, `rebuilt` or `none`.
    pub source: String,
    /// Bytes read back and verified on all ranks.
    pub verified_bytes: u64,
    /// Checkpoints written by this run.
    pub checkpoints_written: u64,
    /// `ok`, `MISMATCH` (wrong bytes were read), `UNEXPECTED`, `error`.
    pub status: String,
}

impl Summary {
    /// Parse a summary line (`None` when it is not one).
    pub fn parse(line: &str) -> Option<Summary> {
        let rest = line.trim().strip_prefix("SCR_APP ")?;
        let fields: BTreeMap<&str, &str> = rest
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let restart = fields.get("restart")?;
        Some(Summary {
            restart: (*restart != "none").then(|| restart.to_string()),
            source: fields.get("source")?.to_string(),
            verified_bytes: fields.get("verified_bytes")?.parse().ok()?,
            checkpoints_written: fields.get("checkpoints_written")?.parse().ok()?,
            status: fields.get("status")?.to_string(),
        })
    }
}

impl AppRun {
    /// Every `SCR_APP` line rank 0 printed.
    pub fn app_lines(&self) -> Vec<&str> {
        self.output
            .stdout
            .lines()
            .filter(|l| l.starts_with("SCR_APP "))
            .collect()
    }

    /// Lines reporting wrong bytes (must always be empty).
    pub fn mismatch_lines(&self) -> Vec<&str> {
        self.app_lines()
            .into_iter()
            .filter(|l| l.starts_with("SCR_APP MISMATCH"))
            .collect()
    }

    /// The whole output, for assertion messages.
    pub fn transcript(&self) -> String {
        format!(
            "exit code {} after {:.1} s\n--- stdout\n{}--- stderr\n{}",
            self.output.code(),
            self.output.elapsed.as_secs_f64(),
            self.output.stdout,
            self.output.stderr
        )
    }
}

impl SimCluster {
    /// A cluster under `root` (created, with its prefix directory) running
    /// `app` with 2 ranks per node and a 60 s bound per job.
    pub fn new(root: impl Into<PathBuf>, app: impl Into<PathBuf>) -> io::Result<SimCluster> {
        let root = root.into();
        fs::create_dir_all(root.join("prefix"))?;
        let mut env = BTreeMap::new();
        env.insert(
            "SCR_PREFIX".to_string(),
            root.join("prefix").to_string_lossy().into_owned(),
        );
        env.insert("SCR_JOB_ID".to_string(), "4242".to_string());
        Ok(SimCluster {
            root,
            app: app.into(),
            ranks_per_node: 2,
            env,
            timeout: Duration::from_secs(60),
        })
    }

    /// Set an SCR parameter (or any variable) for every later job.
    pub fn set(&mut self, name: &str, value: &str) -> &mut SimCluster {
        self.env.insert(name.to_string(), value.to_string());
        self
    }

    /// The tree of node `node`.
    pub fn node_root(&self, node: &str) -> PathBuf {
        self.root.join(node)
    }

    /// Lose node `node`: remove its whole tree (cache and control
    /// directories).
    pub fn remove_node(&self, node: &str) -> io::Result<()> {
        fs::remove_dir_all(self.node_root(node))
    }

    /// The job running `scr_app args…` on `nodes` (in rank order).
    pub fn job(&self, nodes: &[&str], args: &[String]) -> MpiJob {
        let mut job = MpiJob::simulated(&self.app, nodes.len(), self.ranks_per_node)
            .args(args.iter().cloned())
            .timeout(self.timeout);
        for (spec, name) in job.nodes.iter_mut().zip(nodes) {
            spec.name = name.to_string();
        }
        for (k, v) in &self.env {
            job = job.env(k.clone(), v.clone());
        }
        job.node_base(NODE_ROOT_VAR, &self.root)
    }

    /// Run `scr_app args…` on `nodes` and parse what rank 0 reported.
    pub fn run(&self, nodes: &[&str], args: &[String]) -> Result<AppRun, LaunchError> {
        let output = self.job(nodes, args).run()?;
        let summary = output.stdout.lines().rev().find_map(Summary::parse);
        let crashed_after = output.stdout.lines().find_map(|l| {
            l.strip_prefix("SCR_APP crash after_checkpoints=")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
        Ok(AppRun {
            output,
            summary,
            crashed_after,
        })
    }

    /// Cached copies of application file `file_name` on node `node` (every
    /// file of that name below the node's tree).
    pub fn cached_files(&self, node: &str, file_name: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![self.node_root(node)];
        // Bounded walk: a node tree holds a few hundred entries at most.
        let mut budget = 100_000usize;
        while let Some(dir) = stack.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    return found;
                }
                let path = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() => stack.push(path),
                    Ok(t) if t.is_file() && e.file_name() == file_name => found.push(path),
                    _ => {}
                }
            }
        }
        found.sort();
        found
    }
}

/// `None` when MPI jobs can run here; else why not (only a missing
/// `mpirun` is a reason for an MPI test to skip).
pub fn mpirun_missing() -> Option<String> {
    match std::process::Command::new("mpirun")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(_) => None,
        Err(e) => Some(format!("mpirun not runnable ({e})")),
    }
}

/// A binary of this workspace for a test: `$<var>` when set, else `name`
/// beside the running test's own target directory
/// (`target/<profile>/deps/<test>-<hash>` → `target/<profile>/<name>`).
pub fn workspace_binary(var: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// `scr_app` and `scr` for an MPI test named `test` (`SCR_APP_BIN`,
/// `SCR_BIN` override where they are looked for), or `None` after saying
/// why the test skips (no `mpirun`). A binary missing is a failure that
/// says how to build it.
pub fn app_and_scr_for(test: &str) -> Option<(PathBuf, PathBuf)> {
    if let Some(why) = mpirun_missing() {
        eprintln!("SKIP {test}: {why}");
        return None;
    }
    let app = workspace_binary("SCR_APP_BIN", "scr_app");
    let scr = workspace_binary("SCR_BIN", "scr");
    for b in [&app, &scr] {
        assert!(
            b.is_file(),
            "{} is missing: cargo build -p testing --bin scr_app -p scr --bin scr --features scr/cli (or set SCR_APP_BIN / SCR_BIN)",
            b.display()
        );
    }
    Some((app, scr))
}

/// Flip bit `bit` (0–7) of byte `offset` of `path` in place.
pub fn flip_bit(path: &Path, offset: u64, bit: u8) -> io::Result<()> {
    let mut bytes = fs::read(path)?;
    let len = bytes.len();
    let b = bytes.get_mut(offset as usize).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: offset {offset} beyond {len} bytes", path.display()),
        )
    })?;
    *b ^= 1 << (bit % 8);
    fs::write(path, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_parse() {
        let s = Summary::parse(
            "SCR_APP restart=ckpt.3 source=rebuilt verified_bytes=1234 checkpoints_written=1 status=ok",
        )
        .expect("parses");
        assert_eq!(s.restart.as_deref(), Some("ckpt.3"));
        assert_eq!(
            (s.source.as_str(), s.verified_bytes, s.checkpoints_written),
            ("rebuilt", 1234, 1)
        );
        assert_eq!(s.status, "ok");
        let none = Summary::parse(
            "SCR_APP restart=none source=none verified_bytes=0 checkpoints_written=0 status=MISMATCH",
        )
        .expect("parses");
        assert_eq!((none.restart, none.status.as_str()), (None, "MISMATCH"));
        assert_eq!(
            Summary::parse("SCR_APP checkpoint name=ckpt.1 complete=true"),
            None
        );
        assert_eq!(Summary::parse("restart=x"), None);
    }

    #[test]
    fn jobs_name_nodes_and_root_their_trees() {
        let c = SimCluster::new(
            std::env::temp_dir().join(format!("harness-app-{}", std::process::id())),
            "/bin/app",
        )
        .expect("cluster");
        let argv: Vec<String> = c
            .job(&["n0", "n4"], &["--seed".into(), "1".into()])
            .argv()
            .expect("argv")
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let root = c.root.to_string_lossy().into_owned();
        assert!(argv.contains(&"SCR_NODE_NAME=n4".to_string()));
        assert!(argv.contains(&format!("SCR_NODE_ROOT={root}/n4")));
        assert!(argv.contains(&format!("SCR_PREFIX={root}/prefix")));
        fs::remove_dir_all(&c.root).expect("cleanup");
    }

    #[test]
    fn flip_bit_changes_exactly_one_bit() {
        let dir = std::env::temp_dir().join(format!("harness-flip-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let f = dir.join("f");
        fs::write(&f, [0u8, 0xff, 7]).expect("write");
        flip_bit(&f, 1, 3).expect("flip");
        assert_eq!(fs::read(&f).expect("read"), [0u8, 0xf7, 7]);
        assert!(flip_bit(&f, 3, 0).is_err());
        fs::remove_dir_all(&dir).expect("cleanup");
    }
}
