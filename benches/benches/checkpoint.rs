//! Checkpoint to cache and restart with a node lost, over the thread
//! communicator (4 ranks as threads of this process); the tables and what
//! they mean are described in `benches::checkpoint`. The same code runs
//! under MPI as `checkpoint-mpi` (`benches/mpi-checkpoint.sh`).
//!
//! Run: `cargo bench -p benches --bench checkpoint` (env `BENCH_SIZES_MIB`,
//! default "64,256"; `BENCH_REPS`, default 3; `BENCH_SCHEMES`, default
//! "SINGLE,PARTNER,XOR,RS"; `BENCH_RESTART_MIB`, default 64;
//! `BENCH_PHASES`; `BENCH_DIR`, default /dev/shm).

use benches::checkpoint::{run_all, Params, RANKS};
use scr::comm::thread::ThreadComm;

fn main() {
    let params = Params {
        ranks_per_process: RANKS,
        ..Params::from_env()
    };
    // BENCH_DIR: where the simulated nodes' trees go (default /dev/shm; a
    // directory on a disk stands in for a node-local SSD).
    let base = std::env::var("BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into());
    let root = tempfile::Builder::new()
        .prefix("scr-bench-")
        .tempdir_in(&base)
        .unwrap_or_else(|e| panic!("tempdir in {base}: {e}"));
    ThreadComm::run(RANKS, |comm| {
        let world = || {
            comm.split(Some(0), comm.rank() as i64)
                .expect("split")
                .expect("world")
        };
        run_all(comm, &world, root.path(), &params, "thread communicator");
    })
    .expect("bench ranks");
}
