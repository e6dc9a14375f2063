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
//! - [`records`]: typed views of SCR's metadata files (filemap, index, summary, …).
//! - [`storage`]: node identity, control/cache directories, path handling.
//! - [`comm`]: the communicator trait (MPI or in-process threads).
//! - [`config`]: parameters, config files, SCR_Config, descriptors.
//! - [`redundancy`]: the arithmetic of the SINGLE/PARTNER/XOR/RS schemes:
//!   GF(2^8), codecs, chunk layouts, set selection (no communication).
//! - [`cache`]: datasets in node-local cache, filemaps, restart in place.
//! - [`api`]: the user API ([`Scr`], phases, [`Flags`]).
//! - [`halt`]: halt conditions (the halt file, SCR_HALT_SECONDS, `scr halt`).
//! - [`fault`]: injection points for the testbed, compiled in only with the
//!   `fault-injection` feature.
//! - [`log`]: SCR's text log (parser; the writer comes with the cache tier).
//! - [`scavenge`]: the serial commands that save a dataset from cache after
//!   the last run (`scr copy`, `scr index`, `scr postrun`).
//! - [`interval`]: checkpoint interval models and their estimators.
#![deny(missing_docs)]

pub mod api;
pub mod cache;
pub mod clock;
pub mod comm;
pub mod config;
pub mod fault;
pub mod halt;
pub mod interval;
pub mod kvtree;
pub mod launch;
pub mod log;
pub mod prefix;
pub mod records;
pub mod redundancy;
pub mod scavenge;
pub mod storage;

pub use api::{Flags, InitOptions, OutputPhase, RestartPhase, Scr, MAX_FILENAME, VERSION};
pub use cache::{ScrError, ScrResult};
