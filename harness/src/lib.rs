//! harness: runs real MPI jobs on simulated nodes, injects faults,
//! relaunches like `scr_run`, verifies and classifies outcomes.
#![deny(missing_docs)]

pub mod app;
pub mod campaign;
pub mod health;
pub mod launch;
pub mod outcome;
pub mod plot;
pub mod random;
pub mod runlog;
pub mod runloop;
pub mod scenario;
pub mod sweep;
pub mod tools;
pub mod validate;
