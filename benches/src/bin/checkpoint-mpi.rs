//! `checkpoint-mpi`: the checkpoint-to-cache benchmark (`benches::checkpoint`)
//! over MPI, one process per rank. Launch it with 4 ranks:
//! `mpirun -np 4 --oversubscribe target/release/checkpoint-mpi` (see
//! `benches/mpi-checkpoint.sh`, which also bounds the run with a timeout).
//! Each rank's simulated node is given explicitly (n0…n3, a spare n4 for the
//! restart), as in the thread version, so no per-rank environment is needed.
//! Parameters come from the same `BENCH_*` variables; `BENCH_DIR` (default
//! /dev/shm) is where the simulated nodes' trees are made.

use benches::checkpoint::{run_all, Params};
use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
use scr::comm::Comm;

fn main() {
    install_abort_on_panic();
    let env = MpiEnv::init();
    let comm = match MpiComm::world() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("checkpoint-mpi: {e}");
            abort_job(1)
        }
    };
    let params = Params::from_env();
    // Rank 0 makes the directory and tells the others where it is.
    let base = std::env::var("BENCH_DIR").unwrap_or_else(|_| "/dev/shm".into());
    let dir = (comm.rank() == 0).then(|| {
        tempfile::Builder::new()
            .prefix("scr-bench-mpi-")
            .tempdir_in(&base)
            .expect("tempdir")
    });
    let mut path = dir
        .as_ref()
        .map(|d| d.path().to_string_lossy().into_owned().into_bytes())
        .unwrap_or_default();
    comm.bcast_bytes(0, &mut path).expect("bcast");
    let root = std::path::PathBuf::from(String::from_utf8(path).expect("utf-8 path"));
    let world = || -> Box<dyn Comm> { Box::new(MpiComm::world().expect("MPI world")) };
    run_all(
        &comm,
        &world,
        &root,
        &params,
        "MPI communicator (one process per rank)",
    );
    comm.barrier().expect("barrier");
    drop(dir);
    drop(comm);
    drop(env);
}
