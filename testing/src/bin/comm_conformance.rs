//! The communicator conformance suite under real MPI: run it with
//! `mpirun -np 4 comm_conformance [seed]`. Every rank prints its result; rank
//! 0 ends with exactly `N passed, M failed` and the job exits non-zero on any
//! failure (MPI_Abort when a communication error leaves ranks out of step).
//! `SCR_COMM_CHUNK_BYTES=N` makes MPI carry large messages in N-byte pieces;
//! `SCR_COMM_NBX_RANKS=N` runs sparse exchanges as NBX from N ranks on (1:
//! always), as a job of `scr::comm::mpi::DEFAULT_NBX_RANKS` ranks would.

use std::process::ExitCode;

use scr::comm::conformance;
use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
use scr::comm::Comm;

fn main() -> ExitCode {
    install_abort_on_panic();
    let env = MpiEnv::init();
    let seed = match std::env::args().nth(1) {
        None => conformance::DEFAULT_SEED,
        Some(s) => {
            let parsed = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            };
            match parsed {
                Ok(v) => v,
                Err(e) => {
                    eprintln!("comm_conformance: bad seed {s:?}: {e}");
                    abort_job(2)
                }
            }
        }
    };
    // SCR_COMM_CHUNK_BYTES (tests only) shrinks MPI messages so the
    // multi-chunk paths run with small data.
    let chunk = std::env::var("SCR_COMM_CHUNK_BYTES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let nbx = std::env::var("SCR_COMM_NBX_RANKS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let comm = match MpiComm::world() {
        Ok(c) => {
            let c = match chunk {
                Some(bytes) => c.with_chunk_bytes(bytes),
                None => c,
            };
            match nbx {
                Some(ranks) => c.with_nbx_ranks(ranks),
                None => c,
            }
        }
        Err(e) => {
            eprintln!("comm_conformance: {e}");
            abort_job(1)
        }
    };
    let node = std::env::var("SCR_NODE_NAME").unwrap_or_else(|_| "-".to_string());
    let (rank, size) = (comm.rank(), comm.size());
    // Failures are printed as they happen: a failure can leave the ranks out
    // of step, and then the run never returns (the launcher's timeout ends it).
    let mut print_now = |f: &conformance::Failure| eprintln!("rank {rank}: {f}");
    let (report, ok) = match conformance::run_with_observer(&comm, seed, &mut print_now) {
        Ok(r) => (r, true),
        Err(f) => {
            if f.aborted.is_some() {
                // Ranks are out of step in the collective sequence: no
                // further collective could complete, so end the job.
                eprintln!("rank {rank}: {f}");
                abort_job(1)
            }
            (f.report, false)
        }
    };
    println!(
        "rank {rank}/{size} node {node} seed {seed:#x}: {} passed, {} failed",
        report.passed(),
        report.failed()
    );
    // Let every rank's line come out before rank 0's summary.
    if comm.barrier().is_err() {
        abort_job(1)
    }
    if rank == 0 {
        println!("{} passed, {} failed", report.passed(), report.failed());
    }
    drop(comm);
    drop(env);
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
