//! The communication-free core of SCR's redundancy schemes (SINGLE, PARTNER,
//! XOR, RS): field arithmetic, codecs, chunk layouts and set selection, as
//! pure functions over in-memory buffers and file lists.
//!
//! The cache tier drives these over a communicator (the pipelined ring of
//! `scr_reddesc_apply_xor()`); everything here is deterministic and testable
//! without MPI.
//!
//! - [`apply`]: the collective layer: applying PARTNER/XOR/RS to a set over a
//!   communicator and rebuilding lost members (`scr_reddesc_apply()`,
//!   `scr_reddesc_recover()`).
//! - [`gf256`]: GF(2^8) arithmetic and region kernels (`xor_into`, `mul_add_into`).
//! - [`rs`]: systematic Reed–Solomon erasure codec and the RS set layout.
//! - [`xor`]: the XOR set layout, encode and single-member rebuild, the ring
//!   schedule and the pipelined piece plan.
//! - [`logical`]: a member's files read and written as one zero-padded logical
//!   file (`scr_read_pad_n()` / `scr_write_pad_n()`).
//! - [`sets`]: failure-group-aware set and partner selection
//!   (`scr_set_partners()`, `scr_reddesc_create_xor()`).

use std::path::PathBuf;

pub mod apply;
pub mod gf256;
pub mod logical;
pub mod rs;
pub mod sets;
pub mod xor;

/// Why a redundancy computation could not be done. Nothing in this module
/// panics on bad input: inconsistent sizes, too many losses and I/O failures
/// all end here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedundancyError {
    /// The set is too small (or too large) for the requested parity.
    #[error(
        "a set of {members} members cannot carry {parity} parity members: need 1 <= parity < members <= 256; \
         lower SET_FAILURES or raise SET_SIZE"
    )]
    BadGeometry {
        /// Members in the set (or data shards for the plain codec).
        members: usize,
        /// Parity members requested (SET_FAILURES; 1 for XOR).
        parity: usize,
    },
    /// More members are missing than the scheme tolerates: the set cannot be
    /// rebuilt and the dataset must come from another level or the prefix.
    #[error(
        "{missing} members of the set are missing but the scheme tolerates {tolerated}: \
         the dataset cannot be rebuilt from cache; fetch it from the prefix"
    )]
    TooManyMissing {
        /// Members (or shards) missing.
        missing: usize,
        /// Most losses the scheme survives.
        tolerated: usize,
    },
    /// A buffer has the wrong length for the set's layout.
    #[error("member {member}: {what} is {actual} bytes but the layout needs {expected}")]
    SizeMismatch {
        /// Index of the member (or shard) in the set.
        member: usize,
        /// Which buffer: "logical file", "parity", "xor chunk", "shard".
        what: &'static str,
        /// Length the layout requires.
        expected: u64,
        /// Length given.
        actual: u64,
    },
    /// A per-member list (sizes, presence flags, buffers) has the wrong count.
    #[error("{what} lists {actual} entries but the set has {expected} members")]
    CountMismatch {
        /// Which list.
        what: &'static str,
        /// Entries the set needs.
        expected: usize,
        /// Entries given.
        actual: usize,
    },
    /// An index (member, slot, stripe, chunk, step) outside the set.
    #[error("{what} {index} is out of range: the set has {limit}")]
    OutOfRange {
        /// What the index counts: "member", "slot", "stripe", "chunk", "step", "parity row".
        what: &'static str,
        /// The index given.
        index: usize,
        /// One past the largest valid index.
        limit: usize,
    },
    /// A rebuilt member's zero padding came out non-zero: the surviving data
    /// or parity do not belong together (corrupt, or from another dataset).
    #[error(
        "member {member}: rebuilt padding is not zero, so the surviving files are inconsistent \
         (corrupt or from different datasets); do not restart from them"
    )]
    InconsistentSet {
        /// The rebuilt member whose padding was not zero.
        member: usize,
    },
    /// A pipelined transfer needs pieces of at least one byte.
    #[error("the piece size (SCR_MPI_BUF_SIZE) must be at least 1 byte")]
    ZeroPieceSize,
    /// A set size of zero was requested.
    #[error("SET_SIZE must be at least 1")]
    ZeroSetSize,
    /// PARTNER with a hop distance of zero would copy every rank onto itself.
    #[error("HOP_DISTANCE must be at least 1")]
    ZeroHopDistance,
    /// A file of the logical file has a size other than the recorded one.
    #[error("{path}: file is {actual} bytes but its metadata records {expected}")]
    FileSize {
        /// The file.
        path: PathBuf,
        /// Size recorded in the metadata.
        expected: u64,
        /// Size found on disk.
        actual: u64,
    },
    /// An I/O call on one of a member's files failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// `Ok(())` when `index < limit`, else [`RedundancyError::OutOfRange`].
pub(crate) fn check_index(
    what: &'static str,
    index: usize,
    limit: usize,
) -> Result<(), RedundancyError> {
    if index >= limit {
        return Err(RedundancyError::OutOfRange { what, index, limit });
    }
    Ok(())
}

/// Chunk size of a set: the least size such that `data_chunks` chunks hold
/// the largest member's logical file, ceil(max_bytes / data_chunks) — the
/// "chunk size" computed in `scr_reddesc_apply_xor()` (there with
/// `data_chunks = N − 1`; RS uses `N − k`).
pub fn chunk_bytes(max_logical_bytes: u64, data_chunks: usize) -> Result<u64, RedundancyError> {
    if data_chunks == 0 {
        return Err(RedundancyError::BadGeometry {
            members: data_chunks,
            parity: 0,
        });
    }
    Ok(max_logical_bytes.div_ceil(data_chunks as u64))
}
