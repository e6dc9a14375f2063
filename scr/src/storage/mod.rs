//! Storage: node identity, logical and real node-local paths, the control and cache directories, lexical
//! path handling, whole-file integrity checks, and a writer that CRCs as it writes.

pub mod attrs;
/// Moved to the crate's root (the metadata writer below `records` uses
/// it); kept here for the paths that name it.
pub use crate::beneath;
pub mod crc_writer;
pub mod dirs;
pub mod mapped;
pub mod node;
pub mod path;
pub mod verify;
