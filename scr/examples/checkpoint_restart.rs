//! The Rust quick start (docs/guide/rust.md): an MPI application that
//! checkpoints through SCR and, when started again, restarts from its newest
//! checkpoint after reading back and checking every byte.
//!
//! Each run first asks SCR for a checkpoint to restart from; rank `r` reads
//! its own file of it and compares every byte with what it wrote. Then the
//! run computes `STEPS` more steps (default 6), checkpointing whenever
//! SCR_Need_checkpoint says so (every second step: the SCR_Config below,
//! which SCR_CHECKPOINT_INTERVAL in the environment overrides) and at the
//! last step. Rank `r`'s file of the checkpoint at step `s` is
//! `ckpt.<s>/rank_<r>.dat` below the current directory, which must be the
//! prefix directory (or below SCR_PREFIX); its bytes depend on `r` and `s`.
//!
//! ```text
//! cargo build --release
//! mpirun -np 4 target/release/myapp 6    # writes ckpt.2, ckpt.4, ckpt.6
//! mpirun -np 4 target/release/myapp 6    # restarts from ckpt.6, writes up to ckpt.12
//! ```
//!
//! Exit codes: 0 ok; 2 a byte read back differed (each rank that found one
//! names its file and the offset); 1 an SCR or MPI error (the job is
//! aborted, so no rank waits for the others forever); 64 bad usage.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
use scr::comm::{Comm, ReduceOp};
use scr::{Flags, InitOptions, Scr};

/// Rank `rank`'s file of the checkpoint taken at step `step`: one file per
/// rank, so no two ranks ever route the same path.
fn file_name(rank: usize, step: u64) -> PathBuf {
    Path::new(&format!("ckpt.{step}")).join(format!("rank_{rank}.dat"))
}

/// What rank `rank` writes at step `step`: 64 KiB plus 1000 bytes per rank,
/// every byte a function of (rank, step, offset).
fn contents(rank: usize, step: u64) -> Vec<u8> {
    let seed = (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ step;
    (0..64 * 1024 + 1000 * rank as u64)
        .map(|i| ((seed ^ i).wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8)
        .collect()
}

/// The step a checkpoint named `ckpt.<step>` was taken at.
fn step_of(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt.")?.parse().ok()
}

/// Stop every rank: an SCR or MPI error on one rank would otherwise leave
/// the others waiting in the next collective call.
fn fail(rank: usize, what: &str, e: &dyn std::fmt::Display) -> ! {
    eprintln!("checkpoint_restart: rank {rank}: {what}: {e}");
    abort_job(1)
}

/// Read this rank's file of the restart checkpoint at `step` and compare
/// every byte; `Err` says what differs.
fn verify(path: &Path, rank: usize, step: u64) -> Result<u64, String> {
    let got = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let want = contents(rank, step);
    if let Some(at) = got.iter().zip(&want).position(|(g, w)| g != w) {
        return Err(format!(
            "{}: byte at offset {at} is {:#04x}, expected {:#04x}",
            path.display(),
            got[at],
            want[at]
        ));
    }
    if got.len() != want.len() {
        let (n, m) = (got.len(), want.len());
        return Err(format!("{}: {n} bytes, expected {m}", path.display()));
    }
    Ok(got.len() as u64)
}

fn main() -> ExitCode {
    let steps = match std::env::args().nth(1).map(|s| s.parse::<u64>()) {
        None => 6,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("usage: checkpoint_restart [STEPS]   (STEPS: a positive number, default 6)");
            return ExitCode::from(64);
        }
    };
    let mpi = MpiEnv::init(); // MPI_Init: the application's, before SCR's
    install_abort_on_panic();
    let app = MpiComm::world().unwrap_or_else(|e| fail(0, "MPI_COMM_WORLD", &e));
    let rank = app.rank();
    let code = run(&app, rank, steps);
    drop(app);
    drop(mpi); // MPI_Finalize
    code
}

fn run(app: &MpiComm, rank: usize, steps: u64) -> ExitCode {
    // SCR gets its own duplicate of MPI_COMM_WORLD.
    let world = MpiComm::world().unwrap_or_else(|e| fail(rank, "MPI_COMM_WORLD", &e));
    let opts = InitOptions {
        configs: vec!["SCR_CHECKPOINT_INTERVAL=2".into()],
        ..InitOptions::default()
    };
    let mut scr =
        Scr::init_with(Box::new(world), opts).unwrap_or_else(|e| fail(rank, "SCR_Init", &e));

    // Restart: the newest checkpoint SCR has, read back and checked.
    let mut step = 0;
    let restart = scr
        .have_restart()
        .unwrap_or_else(|e| fail(rank, "SCR_Have_restart", &e));
    if let Some(name) = restart {
        let mut phase = scr
            .start_restart()
            .unwrap_or_else(|e| fail(rank, "SCR_Start_restart", &e));
        let Some(at) = step_of(&name) else {
            fail(
                rank,
                "SCR_Start_restart",
                &format!("{name:?} is not a checkpoint of this program"),
            )
        };
        let path = phase
            .route_file(file_name(rank, at))
            .unwrap_or_else(|e| fail(rank, "SCR_Route_file", &e));
        let checked = verify(&path, rank, at);
        if let Err(why) = &checked {
            eprintln!("checkpoint_restart: rank {rank}: restart from {name}: MISMATCH {why}");
        }
        // Collective: true only when every rank's file was right.
        let all_valid = phase
            .complete(checked.is_ok())
            .unwrap_or_else(|e| fail(rank, "SCR_Complete_restart", &e));
        if !all_valid {
            if rank == 0 {
                eprintln!("checkpoint_restart: restart from {name} failed: some rank read back bytes that differ from what it wrote");
            }
            let _ = scr.finalize();
            return ExitCode::from(2);
        }
        let mut total = [checked.unwrap_or(0) as i64];
        app.allreduce_i64(&mut total, ReduceOp::Sum)
            .unwrap_or_else(|e| fail(rank, "MPI_Allreduce", &e));
        if rank == 0 {
            let ranks = app.size();
            let bytes = total[0];
            println!("restarted from {name} at step {at}: {ranks} ranks verified {bytes} bytes");
        }
        step = at;
    } else if rank == 0 {
        println!("no checkpoint to restart from: starting at step 0");
    }

    // Compute, and checkpoint when SCR says so (and at the last step).
    let last = step + steps;
    while step < last {
        step += 1; // one step of the computation
        let need = scr
            .need_checkpoint()
            .unwrap_or_else(|e| fail(rank, "SCR_Need_checkpoint", &e));
        if !need && step != last {
            continue;
        }
        let name = format!("ckpt.{step}");
        let mut out = scr
            .start_output(Some(&name), Flags::CHECKPOINT)
            .unwrap_or_else(|e| fail(rank, "SCR_Start_output", &e));
        let path = out
            .route_file(file_name(rank, step))
            .unwrap_or_else(|e| fail(rank, "SCR_Route_file", &e));
        let written = std::fs::write(&path, contents(rank, step));
        if let Err(e) = &written {
            eprintln!(
                "checkpoint_restart: rank {rank}: writing {}: {e}",
                path.display()
            );
        }
        let all_valid = out
            .complete(written.is_ok())
            .unwrap_or_else(|e| fail(rank, "SCR_Complete_output", &e));
        if rank == 0 && all_valid {
            println!("checkpoint {name} written");
        } else if rank == 0 {
            println!("checkpoint {name} failed on some rank: SCR keeps the previous one");
        }
    }
    scr.finalize()
        .unwrap_or_else(|e| fail(rank, "SCR_Finalize", &e));
    if rank == 0 {
        println!("done at step {step}");
    }
    ExitCode::SUCCESS
}
