//! The communicator layer: exactly the collective and point-to-point
//! operations the library needs, behind one object-safe trait.
//!
//! SCR works on `scr_comm_world` (a duplicate of `MPI_COMM_WORLD`), node-local
//! communicators made by splitting it, and redundancy-set communicators. Every
//! algorithm in this crate is written against [`Comm`], so it runs unchanged on
//! - [`mpi::MpiComm`] — rsmpi over the system's MPI, the production one;
//! - [`thread::ThreadComm`] — ranks as threads in one process, for unit and
//!   property tests at hundreds of ranks and for simulation.
//!
//! [`conformance`] is one test suite that both must pass.

use std::collections::BTreeMap;

pub mod conformance;
mod futex_hash;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod thread;

/// Reduction operators for [`Comm::allreduce_i64`] and [`Comm::allreduce_f64`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum over ranks.
    Sum,
    /// Maximum over ranks.
    Max,
    /// Minimum over ranks.
    Min,
}

/// Why a communication failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// A rank argument outside `0..size`.
    #[error("{op}: rank {rank} is outside this communicator of {size} rank(s)")]
    BadRank {
        /// The operation.
        op: &'static str,
        /// The rank given.
        rank: usize,
        /// Communicator size.
        size: usize,
    },
    /// A bounded wait expired (thread communicator): a peer never arrived.
    #[error("{op}: rank {rank} waited {waited_ms} ms for rank {peer} and gave up")]
    Timeout {
        /// The operation.
        op: &'static str,
        /// The waiting rank.
        rank: usize,
        /// The rank it waited for.
        peer: usize,
        /// How long it waited.
        waited_ms: u64,
    },
    /// A peer rank is gone (its thread ended or panicked).
    #[error("{op}: rank {peer} is gone")]
    PeerGone {
        /// The operation.
        op: &'static str,
        /// The lost rank.
        peer: usize,
    },
    /// Ranks called collectives that do not match (thread communicator
    /// detects this; MPI would hang or abort).
    #[error("{op}: mismatched collective: {detail}")]
    Mismatch {
        /// The operation.
        op: &'static str,
        /// What differed.
        detail: String,
    },
    /// A message larger than the underlying transport can carry.
    #[error("{op}: message of {len} bytes exceeds the transport limit")]
    TooLarge {
        /// The operation.
        op: &'static str,
        /// Message length.
        len: usize,
    },
    /// MPI is not initialised (or already finalised): call `MPI_Init` (or
    /// `mpi::MpiEnv::init`) before building an MPI communicator.
    #[error("{op}: MPI is not initialised or already finalised; initialise MPI first")]
    MpiNotActive {
        /// The operation.
        op: &'static str,
    },
    /// The MPI library returned an error.
    #[error("{op}: MPI error {code}")]
    Mpi {
        /// The operation.
        op: &'static str,
        /// MPI error code.
        code: i32,
    },
}

/// Result of a communicator operation.
pub type CommResult<T> = Result<T, CommError>;

/// The operations SCR needs from a communicator. Collective calls must be
/// made by every rank of the communicator in the same order.
pub trait Comm {
    /// This process's rank.
    fn rank(&self) -> usize;

    /// Number of ranks.
    fn size(&self) -> usize;

    /// Block until every rank has entered.
    fn barrier(&self) -> CommResult<()>;

    /// Broadcast `buf` from `root`; on other ranks `buf` is replaced.
    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> CommResult<()>;

    /// Element-wise reduction of `vals` across ranks; every rank gets the
    /// result in place. All ranks pass slices of the same length.
    fn allreduce_i64(&self, vals: &mut [i64], op: ReduceOp) -> CommResult<()>;

    /// Element-wise reduction of `vals` across ranks, floating point.
    fn allreduce_f64(&self, vals: &mut [f64], op: ReduceOp) -> CommResult<()>;

    /// Logical AND of `v` over all ranks (SCR's `scr_alltrue`).
    fn all_true(&self, v: bool) -> CommResult<bool> {
        let mut x = [i64::from(v)];
        self.allreduce_i64(&mut x, ReduceOp::Min)?;
        Ok(x[0] != 0)
    }

    /// Logical OR of `v` over all ranks.
    fn any_true(&self, v: bool) -> CommResult<bool> {
        let mut x = [i64::from(v)];
        self.allreduce_i64(&mut x, ReduceOp::Max)?;
        Ok(x[0] != 0)
    }

    /// Gather variable-length byte strings at `root`, in rank order.
    /// `Some` on the root, `None` elsewhere.
    fn gather_bytes(&self, root: usize, data: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>>;

    /// Gather variable-length byte strings on every rank, in rank order.
    fn allgather_bytes(&self, data: &[u8]) -> CommResult<Vec<Vec<u8>>>;

    /// Send `send` to `dest` and receive from `src` in one step, without
    /// deadlock (SCR's `MPI_Sendrecv` use in PARTNER and XOR). Either side may
    /// be `None` to only send or only receive. The received message replaces
    /// the contents of `recv` (its capacity is reused: pass the same buffer in
    /// hot loops). Returns the number of bytes received.
    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> CommResult<usize>;

    /// Split into sub-communicators: ranks passing the same `color` form one,
    /// ordered by `(key, old rank)`. `color = None` takes part in the
    /// collective but gets no communicator (MPI_UNDEFINED).
    fn split(&self, color: Option<u32>, key: i64) -> CommResult<Option<Box<dyn Comm>>>;

    /// Sparse all-to-all ("hash exchange"): each rank sends to the few ranks
    /// it names; every rank learns who sent to it and what. Keys of the result
    /// are source ranks. Sending to oneself is allowed.
    fn exchange_sparse(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>>;

    /// Whether this communicator may be handed to another thread of the
    /// same process and used there while this thread goes on with other
    /// communicators ([`Lent`]): true for the thread communicator, and for
    /// MPI only when MPI provides `MPI_THREAD_MULTIPLE`. The default is
    /// false: a communicator that does not say is kept on its thread.
    fn thread_movable(&self) -> bool {
        false
    }
}

/// A communicator lent to another thread (the background encode of
/// [`crate::dataset::protect`]): built only from one whose
/// [`Comm::thread_movable`] is true, and used by one thread at a time,
/// since it is moved, not shared.
pub struct Lent(Box<dyn Comm>);

// SAFETY: `Lent::new` admits only communicators that say they may be used
// from another thread (the thread communicator's state is behind mutexes
// and atomics; an MPI communicator only under MPI_THREAD_MULTIPLE), and a
// `Lent` is moved, never shared (it is not `Sync`), so one thread at a time
// uses it.
unsafe impl Send for Lent {}

impl Lent {
    /// Lend `comm` when it may move to another thread; give it back
    /// unchanged otherwise.
    pub fn new(comm: Box<dyn Comm>) -> Result<Lent, Box<dyn Comm>> {
        if comm.thread_movable() {
            Ok(Lent(comm))
        } else {
            Err(comm)
        }
    }

    /// The communicator.
    pub fn get(&self) -> &dyn Comm {
        self.0.as_ref()
    }

    /// Take it back.
    pub fn into_inner(self) -> Box<dyn Comm> {
        self.0
    }
}

/// Broadcast a value's bytes from `root` using a closure pair, so records
/// can be shipped as packed kvtrees. Convenience over [`Comm::bcast_bytes`].
pub fn bcast_kvtree(
    comm: &dyn Comm,
    root: usize,
    tree: &mut crate::kvtree::KvTree,
) -> Result<(), BcastKvError> {
    let mut buf = if comm.rank() == root {
        tree.pack()
    } else {
        Vec::new()
    };
    comm.bcast_bytes(root, &mut buf)?;
    if comm.rank() != root {
        *tree = crate::kvtree::KvTree::unpack_exact(&buf)?;
    }
    Ok(())
}

/// Failure of [`bcast_kvtree`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BcastKvError {
    /// The broadcast itself failed.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// The received bytes are not a packed kvtree.
    #[error("broadcast kvtree: {0}")]
    Unpack(#[from] crate::kvtree::UnpackError),
}

/// Every communicator can carry the configuration broadcast of
/// [`crate::config::load_collective`] (rank 0 reads, everyone receives).
impl<C: Comm + ?Sized> crate::config::Broadcast for C {
    fn rank(&self) -> usize {
        Comm::rank(self)
    }

    fn bcast_bytes(
        &self,
        root: usize,
        buf: &mut Vec<u8>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Comm::bcast_bytes(self, root, buf).map_err(Into::into)
    }
}
