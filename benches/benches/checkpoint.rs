//! Checkpoint to cache and restart with a node lost, over the thread
//! communicator (4 ranks as threads of this process); the tables and what
//! they mean are described in `benches::checkpoint`. The same code runs
//! under MPI as `checkpoint-mpi` (`benches/mpi-checkpoint.sh`).
//!
//! Run: `cargo bench -p benches --bench checkpoint` (env `BENCH_SIZES_MIB`,
//! default "64,256"; `BENCH_REPS`, default 3; `BENCH_SCHEMES`, default
//! "SINGLE,PARTNER,XOR,RS"; `BENCH_RESTART_MIB`, default 64;
//! `BENCH_PHASES`).

use benches::checkpoint::{run_all, Params, RANKS};
use scr::comm::thread::ThreadComm;

fn main() {
    let params = Params {
        ranks_per_process: RANKS,
        ..Params::from_env()
    };
    let root = tempfile::Builder::new()
        .prefix("scr-bench-")
        .tempdir_in("/dev/shm")
        .expect("tempdir in /dev/shm");
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
