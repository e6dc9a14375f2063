//! Test applications that use the `scr` API as a user's application would.
#![deny(missing_docs)]
