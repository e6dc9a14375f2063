//! What a fault does: the kinds of fault, a dead node's aftermath, how an
//! outage is made and how files are damaged.

use serde::{Deserialize, Serialize};

use super::is_default;
use super::target::Target;
use crate::runtime::ErrorKind;

/// What a fault does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum What {
    /// SIGKILL one rank.
    KillRank {
        /// The rank.
        rank: u32,
    },
    /// SIGKILL every rank of a node, then damage its node-local directories.
    KillNode {
        /// The node.
        node: String,
        /// What happens to its directories.
        #[serde(default, skip_serializing_if = "is_default")]
        then: NodeAftermath,
    },
    /// SIGKILL the `scr postrun` driver itself (the process that indexes
    /// the scavenged datasets, not a node's `scr copy`), at a postrun
    /// point only that process passes.
    KillPostrun,
    /// Every node of the job loses power at once when `rank` reaches the
    /// moment: every process of the job stops, every file below
    /// `SCR_FAULT_DURABLE_ROOTS` loses what was written after its last
    /// fsync (`faultrt::durable`, with the library's journal in
    /// `SCR_FAULT_DURABLE`), then the job dies.
    PowerLoss {
        /// The rank whose moment it is.
        rank: u32,
    },
    /// Every node of the job loses power during `scr postrun` when a
    /// process of the scavenge reaches the point: `node`'s `scr copy`, or,
    /// without a node, whichever process passes it first (the driver's
    /// own points). The driver, which an allocation's epilogue runs on a
    /// node of the job, stops with them; files below
    /// `SCR_FAULT_DURABLE_ROOTS` changed since postrun began lose what was
    /// not fsynced, as for [`What::PowerLoss`].
    PostrunPowerLoss {
        /// The node whose `scr copy` reaches the point.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
    },
    /// A rank exits with a code, without finalizing.
    ExitRank {
        /// The rank.
        rank: u32,
        /// The exit code.
        code: i32,
    },
    /// Damage files.
    Corrupt {
        /// Which files.
        target: Target,
        /// How.
        how: Corruption,
    },
    /// The prefix directory becomes unwritable.
    PfsOutage {
        /// How the outage is made.
        #[serde(default, skip_serializing_if = "is_default")]
        method: OutageMethod,
    },
    /// The cache file system of a node (every node when absent) fills up.
    CacheFull {
        /// The node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// Bytes left free.
        #[serde(default, skip_serializing_if = "is_default")]
        leave_free_bytes: u64,
    },
    /// Injection points sleep: slow I/O.
    SlowIo {
        /// Milliseconds per hit.
        delay_ms: u64,
    },
    /// Injection points return an I/O error.
    IoError {
        /// Which error.
        #[serde(default, skip_serializing_if = "is_default")]
        error: ErrorKind,
    },
}

/// What happens to a killed node's directories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeAftermath {
    /// Removed (the node and its storage are gone).
    #[default]
    RemoveDirs,
    /// Made unreadable (the node is down, its storage unreachable).
    MakeUnreadable,
    /// Left as they are (the processes died, the node is fine).
    Keep,
}

/// How a PFS outage is made (see [`crate::inject::pfs_outage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutageMethod {
    /// `replace-with-file` as root (modes do not stop root), `chmod` otherwise.
    #[default]
    Auto,
    /// Mode 0500 on the prefix directory: works for non-root users only.
    Chmod,
    /// The directory is moved aside and a regular file takes its place:
    /// every create or open below it fails with ENOTDIR, even for root.
    ReplaceWithFile,
}

/// How files are damaged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Corruption {
    /// Flip bits: `count` at seeded offsets, or at these exact bit `offsets`
    /// (bit index = byte offset × 8 + bit).
    BitFlips {
        /// How many bits, at offsets the seed picks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u32>,
        /// Exactly these bit offsets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offsets: Option<Vec<u64>>,
    },
    /// Cut the file to `to_bytes`, or to `fraction` of its length.
    Truncate {
        /// New length in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_bytes: Option<u64>,
        /// New length as a fraction in [0, 1) of the old one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fraction: Option<f64>,
    },
    /// Remove the file.
    Delete,
    /// Overwrite the 20-byte kvtree file header with zeros.
    ZeroKvtreeHeader,
}

impl What {
    /// True for faults carried out inside the library's processes (via `SCR_FAULT_PLAN`).
    pub fn in_process(&self) -> bool {
        matches!(
            self,
            What::KillRank { .. }
                | What::KillPostrun
                | What::PowerLoss { .. }
                | What::PostrunPowerLoss { .. }
                | What::KillNode { .. }
                | What::ExitRank { .. }
                | What::SlowIo { .. }
                | What::IoError { .. }
        )
    }
}
