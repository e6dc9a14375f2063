//! Storage: node identity, the control and cache directories, and lexical
//! path handling.

pub mod dirs;
pub mod mapped;
pub mod path;
