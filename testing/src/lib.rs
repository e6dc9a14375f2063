//! Test applications that use the `scr` API as a user's application would,
//! and the deterministic data they write and verify.
#![deny(missing_docs)]

pub mod data;
