//! Shared helpers for the benchmarks: timing and ratio reporting.
#![deny(missing_docs)]
