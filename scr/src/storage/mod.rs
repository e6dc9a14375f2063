//! Storage: node identity, logical and real node-local paths, the control and cache directories, lexical
//! path handling, whole-file integrity checks, and a writer that CRCs as it writes.

pub mod attrs;
pub mod beneath;
pub mod crc_writer;
pub mod dirs;
pub mod mapped;
pub mod node;
pub mod path;
pub mod verify;
