//! harness: runs real MPI jobs on simulated nodes.
#![deny(missing_docs)]

pub mod app;
pub mod launch;
