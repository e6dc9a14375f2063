//! The production communicator: [`MpiComm`] over rsmpi's raw MPI bindings.
//!
//! Why raw `mpi::ffi` calls rather than rsmpi's safe wrappers: the safe layer
//! aborts the job on any MPI error and cannot express "receive a message of
//! unknown length into this reused buffer" or chunking; SCR must map errors to
//! [`CommError`] and reuse buffers in its hot paths (RUNTIME.md: a fresh
//! allocation per message costs a factor 2–3). Every communicator this module
//! creates has `MPI_ERRORS_RETURN` set, so failures come back as codes.
//!
//! Like SCR, [`MpiComm::world`] never communicates on `MPI_COMM_WORLD` itself:
//! it duplicates it (SCR's `scr_comm_world`), so library messages never match
//! the application's.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_void};

use mpi::ffi;

use super::{Comm, CommError, CommResult, ReduceOp};

/// Default largest piece sent in one MPI message. MPI counts are `int`; 1 GiB keeps
/// far below `i32::MAX` while making the chunk count of any real message tiny.
pub const DEFAULT_CHUNK_BYTES: usize = 1 << 30;

/// From this many ranks on, a sparse exchange runs NBX (synchronous sends
/// and a nonblocking barrier) instead of counting each rank's messages
/// with a reduce-scatter of P flags. Measured on 4 and 8 ranks
/// (results/scale.md, "The sparse exchange under MPI"), NBX costs 1.3 to
/// 2.3 times as much per exchange (tens of microseconds); the count's O(P)
/// vector per rank is what grows, so NBX takes over where it would reach
/// 64 KiB per rank.
pub const DEFAULT_NBX_RANKS: usize = 16_384;

/// Tag of `sendrecv_bytes` messages.
const TAG_SENDRECV: c_int = 1;
/// Tags of `exchange_sparse`: alternate by call parity. A rank can be at most
/// one exchange ahead of a peer (the barrier that ends the next exchange
/// needs the peer), so two tags keep consecutive exchanges apart.
const TAG_EXCHANGE: [c_int; 2] = [2, 3];

/// A real address for empty buffers. An empty slice's pointer is dangling
/// (address 1 for bytes), and OpenMPI defines `MPI_IN_PLACE` as `(void *)1`:
/// passing it as a zero-length buffer silently turns the call into an
/// in-place one (allgatherv then fails with MPI_ERR_ARG).
static EMPTY: [u8; 8] = [0; 8];

fn send_ptr(data: &[u8]) -> *const c_void {
    if data.is_empty() {
        EMPTY.as_ptr() as *const c_void
    } else {
        data.as_ptr() as *const c_void
    }
}

fn check(op: &'static str, rc: c_int) -> CommResult<()> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(CommError::Mpi { op, code: rc })
    }
}

fn to_count(op: &'static str, len: usize) -> CommResult<c_int> {
    c_int::try_from(len).map_err(|_| CommError::TooLarge { op, len })
}

/// Whether MPI is initialised and not yet finalised.
pub fn mpi_is_active() -> bool {
    let mut init: c_int = 0;
    let mut fin: c_int = 0;
    // SAFETY: both calls may be made at any time, even before MPI_Init.
    unsafe {
        ffi::MPI_Initialized(&mut init);
        ffi::MPI_Finalized(&mut fin);
    }
    init != 0 && fin == 0
}

/// Owns MPI's initialisation when this crate made it, for Rust applications
/// (C applications call `MPI_Init` themselves; then use [`MpiComm::world`]
/// directly). Dropping it calls `MPI_Finalize` if [`MpiEnv::init`] initialised
/// MPI; drop every [`MpiComm`] first.
pub struct MpiEnv {
    _universe: Option<::mpi::environment::Universe>,
}

impl MpiEnv {
    /// Initialise MPI unless it already is, asking for
    /// `MPI_THREAD_MULTIPLE` (`MPI_Init_thread`), which
    /// SCR_ENCODE_ASYNC needs; an MPI that provides less still runs, and
    /// SCR then protects checkpoints synchronously with a warning.
    pub fn init() -> MpiEnv {
        MpiEnv {
            _universe: ::mpi::initialize_with_threading(::mpi::Threading::Multiple).map(|(u, _)| u),
        }
    }
}

/// Install a panic hook that prints the panic and then calls
/// `MPI_Abort(MPI_COMM_WORLD, 1)`. Without it a Rust panic hangs the whole
/// job: unwinding reaches `MPI_Finalize`, which waits for ranks blocked in a
/// collective (RUNTIME.md). Call once, early in `main`.
pub fn install_abort_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        if mpi_is_active() {
            eprintln!("panic: calling MPI_Abort(MPI_COMM_WORLD, 1)");
            // SAFETY: MPI is initialised and not finalised; MPI_Abort does not return.
            unsafe {
                ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1);
            }
        }
    }));
}

/// End the whole job now: `MPI_Abort(MPI_COMM_WORLD, code)` when MPI is
/// active, else exit the process with `code`.
pub fn abort_job(code: i32) -> ! {
    if mpi_is_active() {
        // SAFETY: MPI is initialised and not finalised.
        unsafe {
            ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
        }
    }
    std::process::exit(code)
}

/// End this process cleanly: `MPI_Finalize` when MPI is active, then
/// `exit(code)` (SCR_HALT_EXIT; every rank calls it after a barrier).
pub fn finalize_and_exit(code: i32) -> ! {
    if mpi_is_active() {
        // SAFETY: MPI is initialised and not finalised; communicators still
        // held by the application stay valid handles until exit.
        unsafe {
            ffi::MPI_Finalize();
        }
    }
    std::process::exit(code)
}

/// A [`Comm`] over an MPI communicator (SCR's `scr_comm_world` and the
/// communicators split from it). Not `Send`: MPI handles belong to the thread
/// that uses them (MPI is initialised with `MPI_THREAD_SINGLE`).
pub struct MpiComm {
    comm: ffi::MPI_Comm,
    /// A duplicate used only by `exchange_sparse`, whose any-source receives
    /// must never see `sendrecv_bytes` messages.
    exchange: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    exchanges: Cell<u64>,
    /// Largest single MPI message; every rank of a communicator must agree.
    chunk_bytes: usize,
    /// From this many ranks on, `exchange_sparse` runs NBX instead of
    /// counting messages with a reduce-scatter; every rank must agree.
    nbx_ranks: usize,
}

impl std::fmt::Debug for MpiComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiComm")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl MpiComm {
    /// Duplicate `MPI_COMM_WORLD` (as `scr_comm_world`). MPI must already be
    /// initialised, by [`MpiEnv::init`], rsmpi, or a C application's `MPI_Init`.
    pub fn world() -> CommResult<MpiComm> {
        if !mpi_is_active() {
            return Err(CommError::MpiNotActive {
                op: "MpiComm::world",
            });
        }
        // SAFETY: MPI is active and MPI_COMM_WORLD is a valid communicator.
        unsafe { Self::duplicate_of(ffi::RSMPI_COMM_WORLD) }
    }

    /// Duplicate an existing communicator handle (e.g. one a C application
    /// passes in).
    ///
    /// # Safety
    /// `comm` must be a valid intra-communicator and MPI must be active.
    pub unsafe fn duplicate_of(comm: ffi::MPI_Comm) -> CommResult<MpiComm> {
        let mut dup = MaybeUninit::uninit();
        // SAFETY: caller guarantees `comm` is valid.
        check("MPI_Comm_dup", unsafe {
            ffi::MPI_Comm_dup(comm, dup.as_mut_ptr())
        })?;
        // SAFETY: MPI_Comm_dup succeeded, so `dup` is initialised and owned by us.
        unsafe { Self::adopt(dup.assume_init()) }
    }

    /// Take ownership of `comm` (freed on drop): set `MPI_ERRORS_RETURN`,
    /// make the exchange duplicate, cache rank and size.
    unsafe fn adopt(comm: ffi::MPI_Comm) -> CommResult<MpiComm> {
        let mut this = MpiComm {
            comm,
            // SAFETY: reading an immutable handle constant.
            exchange: unsafe { ffi::RSMPI_COMM_NULL },
            rank: 0,
            size: 0,
            exchanges: Cell::new(0),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            nbx_ranks: DEFAULT_NBX_RANKS,
        };
        // SAFETY: `comm` is valid; `this` frees it on every error path below.
        unsafe {
            check(
                "MPI_Comm_set_errhandler",
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
            )?;
            let (mut rank, mut size) = (0, 0);
            check("MPI_Comm_rank", ffi::MPI_Comm_rank(comm, &mut rank))?;
            check("MPI_Comm_size", ffi::MPI_Comm_size(comm, &mut size))?;
            this.rank = rank as usize;
            this.size = size as usize;
            let mut ex = MaybeUninit::uninit();
            check("MPI_Comm_dup", ffi::MPI_Comm_dup(comm, ex.as_mut_ptr()))?;
            this.exchange = ex.assume_init();
        }
        Ok(this)
    }

    /// Use pieces of at most `bytes` (clamped to `1..=DEFAULT_CHUNK_BYTES`)
    /// for large messages, here and in communicators split from this one.
    /// Every rank must pass the same value. Small values let tests exercise
    /// the multi-chunk paths with messages of a few MiB.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> MpiComm {
        self.chunk_bytes = bytes.clamp(1, DEFAULT_CHUNK_BYTES);
        self
    }

    /// Run sparse exchanges as NBX from `ranks` ranks on (default
    /// [`DEFAULT_NBX_RANKS`]; 1: always). Every rank must pass the same
    /// value; communicators split from this one inherit it.
    pub fn with_nbx_ranks(mut self, ranks: usize) -> MpiComm {
        self.nbx_ranks = ranks.max(1);
        self
    }

    /// The underlying MPI handle (for the C API).
    pub fn as_raw(&self) -> ffi::MPI_Comm {
        self.comm
    }

    fn check_rank(&self, op: &'static str, rank: usize) -> CommResult<()> {
        if rank < self.size {
            Ok(())
        } else {
            Err(CommError::BadRank {
                op,
                rank,
                size: self.size,
            })
        }
    }

    /// Start sending `data` to `dest` as chunks of at most `chunk_bytes`;
    /// a message whose last chunk is full is followed by an empty chunk, so
    /// the receiver stops at the first short chunk without a length header.
    /// `synchronous`: each chunk's request completes only once the
    /// receiver has matched it (`MPI_Issend`).
    #[allow(clippy::too_many_arguments)]
    fn isend_chunks(
        &self,
        op: &'static str,
        comm: ffi::MPI_Comm,
        dest: usize,
        tag: c_int,
        data: &[u8],
        synchronous: bool,
        requests: &mut Vec<ffi::MPI_Request>,
    ) -> CommResult<()> {
        let send = if synchronous {
            ffi::MPI_Issend
        } else {
            ffi::MPI_Isend
        };
        let mut offset = 0;
        loop {
            let len = (data.len() - offset).min(self.chunk_bytes);
            let mut req = MaybeUninit::uninit();
            // SAFETY: the buffer outlives the request: callers wait on all
            // requests before `data` goes out of scope.
            check(op, unsafe {
                send(
                    send_ptr(&data[offset..]),
                    len as c_int,
                    ffi::RSMPI_UINT8_T,
                    dest as c_int,
                    tag,
                    comm,
                    req.as_mut_ptr(),
                )
            })?;
            // SAFETY: the send succeeded and initialised the request.
            requests.push(unsafe { req.assume_init() });
            offset += len;
            if len < self.chunk_bytes {
                return Ok(());
            }
        }
    }

    /// Receive one chunked message from `src` (or any source) into `out`,
    /// reusing its capacity. Returns the source.
    fn recv_chunks(
        &self,
        op: &'static str,
        comm: ffi::MPI_Comm,
        src: Option<usize>,
        tag: c_int,
        out: &mut Vec<u8>,
    ) -> CommResult<usize> {
        out.clear();
        // SAFETY: reading a constant.
        let source = src.map_or(unsafe { ffi::RSMPI_ANY_SOURCE }, |s| s as c_int);
        self.recv_appending(op, comm, source, tag, out)
    }

    /// Receive chunks from `source` at the end of `out` until a short one
    /// ends the message; with `MPI_ANY_SOURCE`, the first chunk's source
    /// sends the rest. Returns the source.
    fn recv_appending(
        &self,
        op: &'static str,
        comm: ffi::MPI_Comm,
        mut source: c_int,
        tag: c_int,
        out: &mut Vec<u8>,
    ) -> CommResult<usize> {
        loop {
            let mut msg = MaybeUninit::uninit();
            let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
            // SAFETY: valid communicator; out-pointers are valid.
            check(op, unsafe {
                ffi::MPI_Mprobe(source, tag, comm, msg.as_mut_ptr(), status.as_mut_ptr())
            })?;
            // SAFETY: MPI_Mprobe succeeded, so status and msg are initialised.
            let (msg, status) = unsafe { (msg.assume_init(), status.assume_init()) };
            let len = self.mrecv_append(op, msg, &status, out)?;
            // Later chunks of this message come from the same source.
            source = status.MPI_SOURCE;
            if len < self.chunk_bytes {
                return Ok(source as usize);
            }
        }
    }

    /// Receive the chunk `msg`, matched by a probe whose status is
    /// `status`, at the end of `out`. Returns its length.
    fn mrecv_append(
        &self,
        op: &'static str,
        mut msg: ffi::MPI_Message,
        status: &ffi::MPI_Status,
        out: &mut Vec<u8>,
    ) -> CommResult<usize> {
        let mut count: c_int = 0;
        // SAFETY: status is a valid received status.
        check(op, unsafe {
            ffi::MPI_Get_count(status, ffi::RSMPI_UINT8_T, &mut count)
        })?;
        let len = usize::try_from(count).map_err(|_| CommError::Mpi { op, code: count })?;
        // At least one byte, so the pointer is real (see EMPTY).
        out.reserve(len.max(1));
        let start = out.len();
        let mut st = MaybeUninit::<ffi::MPI_Status>::zeroed();
        // SAFETY: `out` has room for `len` more bytes; MPI writes exactly
        // `len` bytes (the probed size) before we extend the length.
        unsafe {
            check(
                op,
                ffi::MPI_Mrecv(
                    out.as_mut_ptr().add(start) as *mut c_void,
                    count,
                    ffi::RSMPI_UINT8_T,
                    &mut msg,
                    st.as_mut_ptr(),
                ),
            )?;
            out.set_len(start + len);
        }
        Ok(len)
    }

    /// The receiving side of a sparse exchange (NBX): take every message
    /// of the exchange's `tag` as it arrives; once this rank's synchronous
    /// sends (`requests`) have all been matched, enter a nonblocking
    /// barrier; when the barrier completes, every rank's sends have been
    /// matched, so every message to this rank is in `received`.
    fn nbx_receive(
        &self,
        op: &'static str,
        tag: c_int,
        requests: &mut [ffi::MPI_Request],
        received: &mut BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<()> {
        let mut barrier: Option<ffi::MPI_Request> = None;
        loop {
            let mut flag: c_int = 0;
            let mut msg = MaybeUninit::uninit();
            let mut status = MaybeUninit::<ffi::MPI_Status>::zeroed();
            // SAFETY: valid communicator; out-pointers are valid.
            check(op, unsafe {
                ffi::MPI_Improbe(
                    ffi::RSMPI_ANY_SOURCE,
                    tag,
                    self.exchange,
                    &mut flag,
                    msg.as_mut_ptr(),
                    status.as_mut_ptr(),
                )
            })?;
            if flag != 0 {
                // SAFETY: a message matched, so msg and status are set.
                let (msg, status) = unsafe { (msg.assume_init(), status.assume_init()) };
                let mut buf = Vec::new();
                let len = self.mrecv_append(op, msg, &status, &mut buf)?;
                let src = status.MPI_SOURCE;
                if len == self.chunk_bytes {
                    self.recv_appending(op, self.exchange, src, tag, &mut buf)?;
                }
                received.insert(src as usize, buf);
                continue;
            }
            let mut done: c_int = 0;
            match barrier.as_mut() {
                None => {
                    if requests.is_empty() {
                        done = 1;
                    } else {
                        // SAFETY: every request came from a successful send.
                        check(op, unsafe {
                            ffi::MPI_Testall(
                                requests.len() as c_int,
                                requests.as_mut_ptr(),
                                &mut done,
                                ffi::RSMPI_STATUSES_IGNORE,
                            )
                        })?;
                    }
                    if done != 0 {
                        let mut req = MaybeUninit::uninit();
                        // SAFETY: valid communicator, out-pointer valid.
                        check(op, unsafe {
                            ffi::MPI_Ibarrier(self.exchange, req.as_mut_ptr())
                        })?;
                        // SAFETY: MPI_Ibarrier succeeded.
                        barrier = Some(unsafe { req.assume_init() });
                        continue;
                    }
                }
                Some(req) => {
                    // SAFETY: `req` is the active barrier request.
                    check(op, unsafe {
                        ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE)
                    })?;
                    if done != 0 {
                        return Ok(());
                    }
                }
            }
            // Nothing arrived and nothing completed: let the other
            // processes of an oversubscribed node run.
            std::thread::yield_now();
        }
    }

    fn wait_all(&self, op: &'static str, requests: &mut [ffi::MPI_Request]) -> CommResult<()> {
        if requests.is_empty() {
            return Ok(());
        }
        // SAFETY: every request came from a successful MPI_Isend.
        check(op, unsafe {
            ffi::MPI_Waitall(
                requests.len() as c_int,
                requests.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        })
    }

    /// Allgather of one `u64` per rank.
    fn allgather_u64(&self, op: &'static str, v: u64) -> CommResult<Vec<u64>> {
        let mut all = vec![0u64; self.size];
        // SAFETY: send buffer of 1 u64, receive buffer of `size` u64.
        check(op, unsafe {
            ffi::MPI_Allgather(
                &v as *const u64 as *const c_void,
                1,
                ffi::RSMPI_UINT64_T,
                all.as_mut_ptr() as *mut c_void,
                1,
                ffi::RSMPI_UINT64_T,
                self.comm,
            )
        })?;
        Ok(all)
    }

    /// Byte counts and displacements for a v-collective, or TooLarge.
    fn layout(op: &'static str, lens: &[u64]) -> CommResult<(Vec<c_int>, Vec<c_int>, usize)> {
        let mut counts = Vec::with_capacity(lens.len());
        let mut displs = Vec::with_capacity(lens.len());
        let mut total: usize = 0;
        for &l in lens {
            let l = usize::try_from(l).map_err(|_| CommError::TooLarge {
                op,
                len: usize::MAX,
            })?;
            displs.push(to_count(op, total)?);
            counts.push(to_count(op, l)?);
            total = total.checked_add(l).ok_or(CommError::TooLarge {
                op,
                len: usize::MAX,
            })?;
        }
        to_count(op, total)?;
        Ok((counts, displs, total))
    }

    fn split_parts(buf: &[u8], lens: &[u64]) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(lens.len());
        let mut off = 0;
        for &l in lens {
            let l = l as usize;
            out.push(buf[off..off + l].to_vec());
            off += l;
        }
        out
    }

    fn allreduce_raw(
        &self,
        op: &'static str,
        vals: *mut c_void,
        tmp: *const c_void,
        len: usize,
        dtype: ffi::MPI_Datatype,
        rop: ReduceOp,
    ) -> CommResult<()> {
        // SAFETY: reading operator constants.
        let mpi_op = unsafe {
            match rop {
                ReduceOp::Sum => ffi::RSMPI_SUM,
                ReduceOp::Max => ffi::RSMPI_MAX,
                ReduceOp::Min => ffi::RSMPI_MIN,
            }
        };
        let count = to_count(op, len)?;
        // SAFETY: both buffers hold `len` elements of `dtype`.
        check(op, unsafe {
            ffi::MPI_Allreduce(tmp, vals, count, dtype, mpi_op, self.comm)
        })
    }
}

impl Drop for MpiComm {
    fn drop(&mut self) {
        // After MPI_Finalize handles are gone; freeing them would be an error.
        if !mpi_is_active() {
            return;
        }
        // SAFETY: both handles are owned by this value (or null).
        unsafe {
            if self.exchange != ffi::RSMPI_COMM_NULL {
                ffi::MPI_Comm_free(&mut self.exchange);
            }
            if self.comm != ffi::RSMPI_COMM_NULL {
                ffi::MPI_Comm_free(&mut self.comm);
            }
        }
    }
}

/// Whether MPI provides `MPI_THREAD_MULTIPLE` (so a communicator may be
/// used from a second thread while the application calls MPI in its own).
pub fn thread_multiple() -> bool {
    if !mpi_is_active() {
        return false;
    }
    let mut provided: c_int = 0;
    // SAFETY: MPI is active; MPI_Query_thread only writes `provided`.
    let rc = unsafe { ffi::MPI_Query_thread(&mut provided) };
    // SAFETY: reading an immutable constant.
    rc == 0 && provided == unsafe { ffi::RSMPI_THREAD_MULTIPLE }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn thread_movable(&self) -> bool {
        thread_multiple()
    }

    fn size(&self) -> usize {
        self.size
    }

    fn barrier(&self) -> CommResult<()> {
        // SAFETY: valid communicator.
        check("MPI_Barrier", unsafe { ffi::MPI_Barrier(self.comm) })
    }

    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> CommResult<()> {
        self.check_rank("bcast", root)?;
        let mut len = buf.len() as u64;
        // SAFETY: one u64 on every rank.
        check("bcast", unsafe {
            ffi::MPI_Bcast(
                &mut len as *mut u64 as *mut c_void,
                1,
                ffi::RSMPI_UINT64_T,
                root as c_int,
                self.comm,
            )
        })?;
        let len = usize::try_from(len).map_err(|_| CommError::TooLarge {
            op: "bcast",
            len: usize::MAX,
        })?;
        if self.rank != root {
            buf.clear();
            buf.resize(len, 0);
        }
        for chunk in buf.chunks_mut(self.chunk_bytes) {
            // SAFETY: every rank has a buffer of `len` bytes, chunked identically.
            check("bcast", unsafe {
                ffi::MPI_Bcast(
                    chunk.as_mut_ptr() as *mut c_void,
                    chunk.len() as c_int,
                    ffi::RSMPI_UINT8_T,
                    root as c_int,
                    self.comm,
                )
            })?;
        }
        Ok(())
    }

    fn allreduce_i64(&self, vals: &mut [i64], op: ReduceOp) -> CommResult<()> {
        if vals.is_empty() {
            return Ok(());
        }
        let tmp = vals.to_vec();
        // SAFETY: reading a datatype constant.
        let dtype = unsafe { ffi::RSMPI_INT64_T };
        self.allreduce_raw(
            "allreduce_i64",
            vals.as_mut_ptr() as *mut c_void,
            tmp.as_ptr() as *const c_void,
            vals.len(),
            dtype,
            op,
        )
    }

    fn allreduce_f64(&self, vals: &mut [f64], op: ReduceOp) -> CommResult<()> {
        if vals.is_empty() {
            return Ok(());
        }
        let tmp = vals.to_vec();
        // SAFETY: reading a datatype constant.
        let dtype = unsafe { ffi::RSMPI_DOUBLE };
        self.allreduce_raw(
            "allreduce_f64",
            vals.as_mut_ptr() as *mut c_void,
            tmp.as_ptr() as *const c_void,
            vals.len(),
            dtype,
            op,
        )
    }

    fn gather_bytes(&self, root: usize, data: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>> {
        const OP: &str = "gather";
        self.check_rank(OP, root)?;
        // Every rank learns all lengths, so all agree on TooLarge without a
        // second round.
        let lens = self.allgather_u64(OP, data.len() as u64)?;
        let (counts, displs, total) = Self::layout(OP, &lens)?;
        // One spare byte keeps the pointer real when everything is empty.
        let mut all = vec![0u8; if self.rank == root { total + 1 } else { 1 }];
        // SAFETY: counts/displs describe `all` on the root; ignored elsewhere.
        check(OP, unsafe {
            ffi::MPI_Gatherv(
                send_ptr(data),
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                all.as_mut_ptr() as *mut c_void,
                counts.as_ptr(),
                displs.as_ptr(),
                ffi::RSMPI_UINT8_T,
                root as c_int,
                self.comm,
            )
        })?;
        Ok((self.rank == root).then(|| Self::split_parts(&all, &lens)))
    }

    fn allgather_bytes(&self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        const OP: &str = "allgather";
        let lens = self.allgather_u64(OP, data.len() as u64)?;
        let (counts, displs, total) = Self::layout(OP, &lens)?;
        let mut all = vec![0u8; total + 1];
        // SAFETY: counts/displs describe `all`.
        check(OP, unsafe {
            ffi::MPI_Allgatherv(
                send_ptr(data),
                data.len() as c_int,
                ffi::RSMPI_UINT8_T,
                all.as_mut_ptr() as *mut c_void,
                counts.as_ptr(),
                displs.as_ptr(),
                ffi::RSMPI_UINT8_T,
                self.comm,
            )
        })?;
        Ok(Self::split_parts(&all, &lens))
    }

    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> CommResult<usize> {
        const OP: &str = "sendrecv";
        if let Some((dest, _)) = send {
            self.check_rank(OP, dest)?;
        }
        if let Some(src) = recv_from {
            self.check_rank(OP, src)?;
        }
        let mut requests = Vec::new();
        if let Some((dest, data)) = send {
            let posted = self.isend_chunks(
                OP,
                self.comm,
                dest,
                TAG_SENDRECV,
                data,
                false,
                &mut requests,
            );
            if let Err(e) = posted {
                // Pieces already posted read `data`: finish them before returning.
                let _ = self.wait_all(OP, &mut requests);
                return Err(e);
            }
        }
        let received = match recv_from {
            Some(src) => self
                .recv_chunks(OP, self.comm, Some(src), TAG_SENDRECV, recv)
                .map(|_| recv.len()),
            None => Ok(0),
        };
        // Wait even if the receive failed: the send buffer must outlive the requests.
        let waited = self.wait_all(OP, &mut requests);
        let n = received?;
        waited?;
        Ok(n)
    }

    fn split(&self, color: Option<u32>, key: i64) -> CommResult<Option<Box<dyn Comm>>> {
        const OP: &str = "split";
        // MPI colors and keys are non-negative/any `int`; ours are u32 and
        // i64. Share them, then hand MPI dense colors and each rank's final
        // position as key, which preserves the (key, rank) order exactly.
        let enc = color.map_or(u64::MAX, u64::from);
        let colors = self.allgather_u64(OP, enc)?;
        let keys = self.allgather_u64(OP, key as u64)?;
        let (mpi_color, mpi_key) = match color {
            None => {
                // SAFETY: reading a constant.
                (unsafe { ffi::RSMPI_UNDEFINED }, 0)
            }
            Some(_) => {
                let mut distinct: Vec<u64> =
                    colors.iter().copied().filter(|&c| c != u64::MAX).collect();
                distinct.sort_unstable();
                distinct.dedup();
                let dense = distinct.binary_search(&enc).unwrap_or(0);
                let mut members: Vec<(i64, usize)> = (0..self.size)
                    .filter(|&r| colors[r] == enc)
                    .map(|r| (keys[r] as i64, r))
                    .collect();
                members.sort_unstable();
                let pos = members
                    .iter()
                    .position(|&(_, r)| r == self.rank)
                    .unwrap_or(0);
                (to_count(OP, dense)?, to_count(OP, pos)?)
            }
        };
        let mut newcomm = MaybeUninit::uninit();
        // SAFETY: valid communicator and out-pointer.
        check(OP, unsafe {
            ffi::MPI_Comm_split(self.comm, mpi_color, mpi_key, newcomm.as_mut_ptr())
        })?;
        // SAFETY: MPI_Comm_split succeeded.
        let newcomm = unsafe { newcomm.assume_init() };
        // SAFETY: reading a constant.
        if newcomm == unsafe { ffi::RSMPI_COMM_NULL } {
            return Ok(None);
        }
        // SAFETY: a fresh communicator from MPI_Comm_split, now owned here.
        let c = unsafe { Self::adopt(newcomm) }?
            .with_chunk_bytes(self.chunk_bytes)
            .with_nbx_ranks(self.nbx_ranks);
        Ok(Some(Box::new(c)))
    }

    fn exchange_sparse(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>> {
        const OP: &str = "exchange_sparse";
        let seq = self.exchanges.get();
        self.exchanges.set(seq + 1);
        let tag = TAG_EXCHANGE[(seq % 2) as usize];
        // A bad destination is reported to its sender after the exchange, so
        // its peers still complete instead of hanging.
        let bad = sends.keys().copied().find(|&d| d >= self.size);
        let nbx = self.size >= self.nbx_ranks;
        let peers = || {
            sends
                .iter()
                .filter(|(&d, _)| d < self.size && d != self.rank)
        };
        // Below `nbx_ranks`, as SCR 3.1's scr_hash_exchange does: a
        // reduce-scatter of a 0/1 vector of P flags tells each rank how
        // many messages it will receive (O(P) per rank, the fastest at
        // small P). From `nbx_ranks` on, NBX (Hoefler et al., 2010): no
        // counts; synchronous sends and a nonblocking barrier end the
        // exchange once every message is matched, O(log P) steps and
        // memory for the messages only.
        let incoming = if nbx {
            None
        } else {
            let mut flags = vec![0 as c_int; self.size];
            for (&d, _) in peers() {
                flags[d] = 1;
            }
            let mut incoming: c_int = 0;
            // SAFETY: `size` ints in, one int out per rank.
            check(OP, unsafe {
                ffi::MPI_Reduce_scatter_block(
                    flags.as_ptr() as *const c_void,
                    &mut incoming as *mut c_int as *mut c_void,
                    1,
                    ffi::RSMPI_INT32_T,
                    ffi::RSMPI_SUM,
                    self.exchange,
                )
            })?;
            Some(incoming)
        };
        let mut requests = Vec::new();
        let mut posted = Ok(());
        for (&d, data) in peers() {
            posted = self.isend_chunks(OP, self.exchange, d, tag, data, nbx, &mut requests);
            if posted.is_err() {
                break;
            }
        }
        let mut received = BTreeMap::new();
        if let Some(mine) = sends.get(&self.rank) {
            received.insert(self.rank, mine.clone());
        }
        let got = match incoming {
            // Messages to this rank arrive whether its own sends all
            // started or not, so it takes part in the barrier either way.
            None => self.nbx_receive(OP, tag, &mut requests, &mut received),
            Some(_) if posted.is_err() => Ok(()),
            Some(n) => (0..n).try_for_each(|_| {
                let mut buf = Vec::new();
                let src = self.recv_chunks(OP, self.exchange, None, tag, &mut buf)?;
                received.insert(src, buf);
                Ok(())
            }),
        };
        // Every send completes before its buffer may go (after an NBX
        // error some may still be pending).
        let waited = if nbx && got.is_ok() {
            Ok(())
        } else {
            self.wait_all(OP, &mut requests)
        };
        posted?;
        got?;
        waited?;
        if let Some(rank) = bad {
            return Err(CommError::BadRank {
                op: OP,
                rank,
                size: self.size,
            });
        }
        Ok(received)
    }
}
