//! `mpirun-sim`: run a program under `mpirun` on simulated nodes (like
//! SCR's `scr_run`, without the restart loop), with a bounded wait.
//!
//! `mpirun-sim --nodes 2 --ranks-per-node 2 [--base VAR=DIR] [--env VAR=VALUE] -- prog args…`
//! prints the job's output and exits with its exit code (124 on timeout,
//! 127 when the launcher cannot start).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use harness::launch::{LaunchError, MpiJob};

#[derive(Parser, Debug)]
#[command(about = "Run an MPI program on simulated nodes with a bounded wait")]
struct Args {
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 2)]
    nodes: usize,
    /// Ranks on each node.
    #[arg(long, default_value_t = 2)]
    ranks_per_node: usize,
    /// Kill the whole job after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
    /// Per-node directory variable: VAR=DIR gives node N `VAR=DIR/nodeN`.
    #[arg(long, value_name = "VAR=DIR")]
    base: Vec<String>,
    /// A variable for every rank: VAR=VALUE (repeatable).
    #[arg(long = "env", value_name = "VAR=VALUE")]
    env: Vec<String>,
    /// The launcher.
    #[arg(long, default_value = "mpirun")]
    mpirun: PathBuf,
    /// Print the argument vector before running.
    #[arg(long)]
    verbose: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let (program, args) = match a.command.split_first() {
        Some(x) => x,
        None => {
            eprintln!("mpirun-sim: no program given");
            return ExitCode::from(2);
        }
    };
    let mut job = MpiJob::simulated(program, a.nodes, a.ranks_per_node)
        .args(args.iter().cloned())
        .timeout(Duration::from_secs(a.timeout_s));
    job.mpirun = a.mpirun;
    for b in &a.base {
        let Some((var, dir)) = b.split_once('=') else {
            eprintln!("mpirun-sim: --base wants VAR=DIR, got {b:?}");
            return ExitCode::from(2);
        };
        job = job.node_base(var, std::path::Path::new(dir));
    }
    for e in &a.env {
        let Some((var, value)) = e.split_once('=') else {
            eprintln!("mpirun-sim: --env wants VAR=VALUE, got {e:?}");
            return ExitCode::from(2);
        };
        job = job.env(var, value);
    }
    if a.verbose {
        match job.argv() {
            Ok(v) => eprintln!(
                "mpirun-sim: {}",
                v.iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            Err(e) => eprintln!("mpirun-sim: {e}"),
        }
    }
    match job.run() {
        Ok(out) => {
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            ExitCode::from(u8::try_from(out.code()).unwrap_or(1))
        }
        Err(LaunchError::Timeout {
            after,
            stdout,
            stderr,
        }) => {
            print!("{stdout}");
            eprint!("{stderr}");
            eprintln!("mpirun-sim: job killed after {after:?}");
            ExitCode::from(124)
        }
        Err(e @ LaunchError::Spawn { .. }) => {
            eprintln!("mpirun-sim: {e}");
            ExitCode::from(127)
        }
        Err(e) => {
            eprintln!("mpirun-sim: {e}");
            ExitCode::from(2)
        }
    }
}
