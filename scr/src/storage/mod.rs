//! Storage: node identity, logical and real node-local paths, the control and cache directories, lexical
//! path handling, and whole-file integrity checks.

pub mod attrs;
pub mod dirs;
pub mod mapped;
pub mod node;
pub mod path;
pub mod verify;
