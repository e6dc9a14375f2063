//! Storage: node identity, the control and cache directories, lexical
//! path handling, and whole-file integrity checks.

pub mod attrs;
pub mod dirs;
pub mod mapped;
pub mod path;
pub mod verify;
