//! faultsim: seeded, replayable fault plans and a Monte Carlo simulator of
//! jobs running under failures.
#![deny(missing_docs)]

pub mod inject;
pub mod plan;
pub mod seed;
pub mod sim;

/// The fault runtime behind `scr`'s injection points (the `faultrt`
/// crate): the `SCR_FAULT_PLAN` types that [`plan::Plan::to_env`] writes,
/// the environment variable names, the fault log, `/proc` readers.
pub use faultrt as runtime;
