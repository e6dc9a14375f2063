//! faultsim: seeded, replayable fault plans and a Monte Carlo simulator of
//! jobs running under failures.
#![deny(missing_docs)]

pub mod inject;
pub mod plan;
pub mod seed;
pub mod sim;
