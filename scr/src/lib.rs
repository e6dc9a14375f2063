//! Scalable Checkpoint/Restart (SCR) for MPI applications, in Rust.
//!
//! Applications write checkpoints to fast node-local storage (the cache),
//! SCR protects them with redundancy across failure groups, restarts in
//! place from the cache after a failure, and copies a subset to the parallel
//! file system (the prefix directory). The behaviour and file formats follow
//! LLNL's SCR; docs/design.md draws the modules and the data paths of a
//! checkpoint, a restart and a flush through them.
//!
//! Modules, bottom up (data flows one way, from the API down to storage):
//! - [`kvtree`]: SCR's "hash" and its binary and file formats.
//! - [`scheme`]: the redundancy scheme enum ([`CopyType`]) every layer names.
//! - [`records`]: typed views of SCR's metadata files (filemap, index, summary, …).
//! - [`storage`]: node identity, control/cache directories, path handling,
//!   whole-file CRC32 checks.
//! - [`clock`]: the one reading of time ([`clock::Clock`]), injectable.
//! - [`comm`]: the communicator trait (MPI or in-process threads).
//! - [`config`]: parameters, config files, SCR_Config, descriptors, and
//!   [`config::Settings`] (every parameter typed, parsed once at init).
//! - [`redundancy`]: the arithmetic of the SINGLE/PARTNER/XOR/RS schemes:
//!   GF(2^8), codecs, chunk layouts, set selection (no communication).
//! - [`cache`]: the job's runtime state: nodes, stores, redundancy sets,
//!   the filemap ([`cache::Job`]).
//! - [`dataset`]: a dataset's life in cache: start, route, complete,
//!   encode, evict/delete, and restart in place (verify and rebuild).
//! - [`api`]: the user API ([`Scr`], phases, [`Flags`]).
//! - [`halt`]: halt conditions (the halt file, SCR_HALT_SECONDS, `scr halt`).
//! - [`fault`]: the hook of the testbed's injection points, compiled in only
//!   with the `fault-injection` feature (which pulls in the `faultrt` runtime).
//! - [`log`]: SCR's event log: one entry type, the [`log::sink::LogSink`]s
//!   (text, syslog, SQLite, PostgreSQL) and the parser.
//! - [`prefix`]: flush, fetch, the index and the flush file.
//! - [`launch`]: the [`launch::Launcher`] trait (argv vectors, bounded waits).
//! - [`scavenge`]: the serial commands that save a dataset from cache after
//!   the last run (`scr copy`, `scr index`, `scr postrun`).
//! - [`interval`]: checkpoint interval models and their estimators.
//! - [`error`]: the crate's error, [`ScrError`], carrying each layer's typed
//!   error; [`ids`]: the [`DatasetId`] and [`Rank`] newtypes.
//! - [`exit`]: the one exit-code table of the `scr` and `scr-harness` commands;
//!   [`cli_docs`]: their man pages and shell completions, from their clap definitions.
#![deny(missing_docs)]

pub mod api;
pub mod beneath;
pub mod cache;
pub mod civil;
#[cfg(feature = "cli")]
pub mod cli_docs;
pub mod clock;
pub mod comm;
pub mod config;
pub mod dataset;
pub mod durable;
pub mod error;
pub mod exit;
pub mod fault;
pub mod halt;
pub mod ids;
pub mod interval;
pub mod kvtree;
pub mod launch;
pub mod log;
pub mod prefix;
pub mod records;
pub mod redundancy;
pub mod runloop;
pub mod scavenge;
pub mod scheme;
pub mod storage;
pub mod units;

pub use api::{
    Flags, InitOptions, OutputPhase, RestartPhase, RoutedWriter, Scr, MAX_FILENAME, VERSION,
};
pub use error::{ScrError, ScrResult};
pub use ids::{DatasetId, Rank};
pub use scheme::CopyType;
