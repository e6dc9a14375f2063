//! Scalable Checkpoint/Restart (SCR) for MPI applications, in Rust.
//!
//! Applications write checkpoints to fast node-local storage (the cache),
//! SCR protects them with redundancy across failure groups, restarts in
//! place from the cache after a failure, and copies a subset to the parallel
//! file system (the prefix directory). The behaviour and file formats follow
//! LLNL's SCR (see the developer guide in `shared/spec/`).
//!
//! Modules, bottom up (data flows one way, from the API down to storage):
//! - [`kvtree`]: SCR's "hash" and its binary and file formats.
//! - [`log`]: SCR's text log (parser; the writer comes with the cache tier).
//! - [`interval`]: checkpoint interval models and their estimators.
#![deny(missing_docs)]

pub mod interval;
pub mod kvtree;
pub mod log;
