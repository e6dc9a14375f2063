//! `scr have-restart` (SCR 3.1's `scr_have_restart`): an MPI program the
//! run loop launches on a relaunch's nodes before the application, when
//! the job gave a restart command (`--restart-cmd`): SCR_Init restarts in
//! place as the application's would (distributes, rebuilds, fetches), then
//! rank 0 prints the name SCR_Have_restart gives, or nothing when there is
//! no checkpoint to restart from. It ends without SCR_Finalize's flush or
//! exit reason ([`scr::Scr::end_helper_run`]): the job goes on.

use crate::error::CliError;

/// Run under a launcher, every rank; see the module documentation.
#[cfg(feature = "mpi")]
pub fn have_restart(tagged: bool) -> Result<(), CliError> {
    use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
    use scr::comm::Comm as _;
    use scr::exit::Code;

    install_abort_on_panic();
    let env = MpiEnv::init();
    // Any failure leaves the other ranks inside a collective: end the job
    // (no MPI_Finalize waiting for them), naming the rank and the call.
    let fail = |rank: Option<usize>, call: &str, e: &dyn std::fmt::Display| -> ! {
        let who = rank.map_or(String::new(), |r| format!("rank {r}: "));
        eprintln!("scr have-restart: {who}{call}: {e}");
        abort_job(Code::Failed as i32)
    };
    let world = MpiComm::world().unwrap_or_else(|e| fail(None, "MPI_COMM_WORLD", &e));
    let rank = world.rank();
    let mut scr =
        scr::Scr::init(Box::new(world)).unwrap_or_else(|e| fail(Some(rank), "SCR_Init", &e));
    let name = scr
        .have_restart()
        .unwrap_or_else(|e| fail(Some(rank), "SCR_Have_restart", &e));
    scr.end_helper_run()
        .unwrap_or_else(|e| fail(Some(rank), "end of the helper run", &e));
    if rank == 0 {
        match (name, tagged) {
            (Some(name), false) => println!("{name}"),
            (None, false) => {}
            (name, true) => println!("{}{}", crate::launch_cmds::TAG, name.unwrap_or_default()),
        }
    }
    drop(env);
    Ok(())
}

/// Without MPI (`scr` built without the `mpi` feature) there is no job to
/// ask.
#[cfg(not(feature = "mpi"))]
pub fn have_restart(_tagged: bool) -> Result<(), CliError> {
    Err(CliError::Usage(
        "scr have-restart: this scr was built without MPI (feature `mpi`)".into(),
    ))
}
