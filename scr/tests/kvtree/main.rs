//! kvtree integration tests: properties (proptest), byte surgery on real
//! files, and compatibility with the element order LLNL's SCR writes.
//!
//! One binary for all of them (faster to link than one per file). It installs
//! a counting allocator so tests can assert that a decoder never allocates
//! by an untrusted count.

mod alloc_probe;
mod common;
mod compat;
mod props;
mod surgery;
