//! The ring's I/O thread (issue 17 item 2): a member's file reads and
//! writes run beside its exchanges instead of between them.
//!
//! While the ring's thread exchanges and adds one step, a scoped thread of
//! the same member reads the share it will add next (the schedule,
//! `Tables::mine` per step, is known in advance) and writes the outputs of
//! the pieces already delivered. It owns the member's [`MemberIo`] and its
//! latched failure for the whole ring, so every read, write and CRC update
//! happens on one thread in the ring's order: reads in (piece, step) order,
//! writes in piece order, so each chunk's pieces still reach `data_crc` and
//! the parity rows front to back.
//!
//! Memory stays bounded whatever the checkpoint's size: [`READ_AHEAD`] read
//! buffers of one piece circulate between the threads, and besides the
//! ring's two bundles one more bundle ([`SPARE_BUNDLES`]) can be on its way
//! to the disk; when it is still there the ring waits for it.
//!
//! Failures: a failed read or write is latched on the I/O thread and the
//! member keeps its place (every later share comes back marked not read,
//! later writes are skipped), exactly as on one thread. A communicator
//! failure ends the ring's thread early: it drops its ends of the channels,
//! the I/O thread sees that at its next message and ends, and the scope
//! joins it before the ring returns. The I/O thread never communicates: it
//! sees the set through a communicator that refuses every operation.

use std::collections::BTreeMap;
use std::mem;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};

use super::super::super::xor::Pieces;
use crate::comm::{Comm, CommError, CommResult, ReduceOp};
use crate::records::Dataset;
use crate::scheme::CopyType;

use super::super::error::ApplyError;
use super::super::member::{latch, Ctx};
use super::super::SetInfo;
use super::{MemberIo, Round, Src, Tables};

/// Read buffers (one piece each): the share being added and the next one,
/// read while the ring exchanges.
const READ_AHEAD: usize = 2;

/// Bundles beyond the ring's two (the one it adds into and the one that
/// arrives): one being written while the ring goes on.
const SPARE_BUNDLES: usize = 1;

/// The ring's thread to the I/O thread.
enum ToIo {
    /// A read buffer the ring is done with.
    Free(Vec<u8>),
    /// Store the outputs `to` of the piece at `off` (`len` bytes per
    /// output) that `buf` holds, then hand `buf` back.
    Write {
        buf: Vec<u8>,
        off: u64,
        len: usize,
        to: Dest,
    },
}

/// Which outputs a bundle handed to the I/O thread holds.
#[derive(Clone, Copy)]
pub(super) enum Dest {
    /// Those of delivery round `i` of the ring (`Tables::rounds`).
    Round(usize),
    /// The one output of stripe `s` that a reduction to this member (the
    /// root, [`Tables::reducing_to`]) brought.
    Stripe(usize),
}

/// One share of this member, in schedule order.
pub(super) struct Share {
    /// The piece's bytes (`ok`) or a buffer to hand back.
    pub(super) buf: Vec<u8>,
    /// Whether the bytes were read: false once a failure is latched.
    pub(super) ok: bool,
}

/// The I/O thread is gone while the ring still needs it: it panicked (the
/// scope's join hands the panic on).
#[derive(Debug)]
pub(super) struct Gone;

/// The ring's end of the channels.
pub(super) struct Pipe {
    to_io: Sender<ToIo>,
    shares: Receiver<Share>,
    spent: Receiver<Vec<u8>>,
    /// Bundles back from the I/O thread, to reuse.
    pool: Vec<Vec<u8>>,
    /// Bundles made so far beyond the ring's two.
    spares: usize,
}

impl Pipe {
    /// This member's next share, in (piece, step) order.
    pub(super) fn next_share(&self) -> Result<Share, Gone> {
        self.shares.recv().map_err(|_| Gone)
    }

    /// Hands a read buffer back for the next read.
    pub(super) fn free(&self, buf: Vec<u8>) -> Result<(), Gone> {
        self.to_io.send(ToIo::Free(buf)).map_err(|_| Gone)
    }

    /// Has the outputs `to` that `buf` holds stored, and returns a bundle
    /// to go on with (waits only while the spare one is still being
    /// written).
    pub(super) fn write(
        &mut self,
        buf: Vec<u8>,
        (off, len): (u64, usize),
        to: Dest,
    ) -> Result<Vec<u8>, Gone> {
        let job = ToIo::Write { buf, off, len, to };
        self.to_io.send(job).map_err(|_| Gone)?;
        self.pool.extend(self.spent.try_iter());
        if let Some(b) = self.pool.pop() {
            return Ok(b);
        }
        if self.spares < SPARE_BUNDLES {
            self.spares += 1;
            return Ok(Vec::new());
        }
        self.spent.recv().map_err(|_| Gone)
    }
}

/// What the I/O thread needs of [`SetInfo`] to name this member in its
/// errors: everything but the communicator, which stays on the ring's
/// thread.
pub(super) struct SetParts {
    rank: usize,
    size: usize,
    group_id: i64,
    world_ranks: Vec<i64>,
    world_size: u64,
    dataset: Dataset,
    scheme: CopyType,
    set_failures: usize,
    piece_bytes: usize,
}

impl SetParts {
    pub(super) fn of(ctx: &Ctx) -> Self {
        let s = ctx.set;
        SetParts {
            rank: ctx.me,
            size: ctx.n,
            group_id: s.group_id,
            world_ranks: s.world_ranks.clone(),
            world_size: s.world_size,
            dataset: s.dataset.clone(),
            scheme: s.scheme,
            set_failures: s.set_failures,
            piece_bytes: s.piece_bytes,
        }
    }
}

/// The I/O thread's communicator: the member's rank and size, and nothing
/// else (a collective from the I/O thread would break the set's order).
struct Detached {
    rank: usize,
    size: usize,
}

fn refuse<T>(op: &'static str) -> CommResult<T> {
    Err(CommError::Mismatch {
        op,
        detail: "the ring's I/O thread does not communicate".into(),
    })
}

impl Comm for Detached {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn barrier(&self) -> CommResult<()> {
        refuse("barrier")
    }
    fn bcast_bytes(&self, _: usize, _: &mut Vec<u8>) -> CommResult<()> {
        refuse("bcast_bytes")
    }
    fn allreduce_i64(&self, _: &mut [i64], _: ReduceOp) -> CommResult<()> {
        refuse("allreduce_i64")
    }
    fn allreduce_f64(&self, _: &mut [f64], _: ReduceOp) -> CommResult<()> {
        refuse("allreduce_f64")
    }
    fn gather_bytes(&self, _: usize, _: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>> {
        refuse("gather_bytes")
    }
    fn allgather_bytes(&self, _: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        refuse("allgather_bytes")
    }
    fn sendrecv_bytes(
        &self,
        _: Option<(usize, &[u8])>,
        _: Option<usize>,
        _: &mut Vec<u8>,
    ) -> CommResult<usize> {
        refuse("sendrecv_bytes")
    }
    fn split(&self, _: Option<u32>, _: i64) -> CommResult<Option<Box<dyn Comm>>> {
        refuse("split")
    }
    fn exchange_sparse(
        &self,
        _: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>> {
        refuse("exchange_sparse")
    }
}

/// What the I/O thread works from besides the channels.
pub(super) struct Plan<'r> {
    pub(super) parts: SetParts,
    pub(super) t: &'r Tables,
    pub(super) rounds: &'r [Round],
    pub(super) mine_fin: usize,
    pub(super) pieces: Pieces,
    pub(super) hook: Hook,
}

/// The I/O thread's end of the channels.
pub(super) struct IoEnd {
    from_ring: Receiver<ToIo>,
    shares: Sender<Share>,
    spent: Sender<Vec<u8>>,
}

/// Both ends of the channels between the ring and its I/O thread.
pub(super) fn pipe() -> (Pipe, IoEnd) {
    let (to_io, from_ring) = channel();
    let (share_tx, shares) = channel();
    let (spent_tx, spent) = channel();
    (
        Pipe {
            to_io,
            shares,
            spent,
            pool: Vec::new(),
            spares: 0,
        },
        IoEnd {
            from_ring,
            shares: share_tx,
            spent: spent_tx,
        },
    )
}

/// The context to name errors with while nothing is latched.
fn live<'c, 'a>(ctx: &'c Option<Ctx<'a>>, latched: &Option<ApplyError>) -> Option<&'c Ctx<'a>> {
    ctx.as_ref().filter(|_| latched.is_none())
}

/// The I/O thread: reads this member's shares ahead in schedule order and
/// stores delivered outputs, until the ring drops its end.
pub(super) fn serve(
    plan: Plan<'_>,
    io: &mut MemberIo<'_>,
    latched: &mut Option<ApplyError>,
    end: IoEnd,
) {
    let p = &plan.parts;
    let comm = Detached {
        rank: p.rank,
        size: p.size,
    };
    let set = SetInfo {
        comm: &comm,
        group_id: p.group_id,
        world_ranks: p.world_ranks.clone(),
        world_size: p.world_size,
        dataset: p.dataset.clone(),
        scheme: p.scheme,
        set_failures: p.set_failures,
        piece_bytes: p.piece_bytes,
    };
    // The ring's thread built the same context from the same set.
    let ctx = latch(latched, Ctx::new(&set));
    let t = plan.t;
    let (me, n) = (p.rank, p.size);
    // The ring's order: per piece, the stripe of each step; a reduction to
    // a root: per piece, stripe by stripe.
    let reducing = t.root.is_some();
    let mut todo = plan.pieces.clone().flat_map(move |(off, len)| {
        (0..if reducing { n } else { t.steps }).filter_map(move |step| {
            let stripe = if reducing {
                step
            } else {
                t.stripe(me, step, n)
            };
            t.mine[stripe].as_ref().map(|(src, _)| (*src, off, len))
        })
    });
    let mut next = todo.next();
    let mut free: Vec<Vec<u8>> = (0..READ_AHEAD).map(|_| Vec::new()).collect();
    let mut lent = Vec::new();
    loop {
        let msg = match end.from_ring.try_recv() {
            Ok(m) => m,
            Err(TryRecvError::Disconnected) => return,
            Err(TryRecvError::Empty) => {
                if let (Some((src, off, len)), Some(mut buf)) = (next, free.pop()) {
                    next = todo.next();
                    buf.resize(len, 0);
                    plan.hook.before_read();
                    let ok = match live(&ctx, latched) {
                        Some(c) => {
                            let r = read_share(c, io, (src, off), &mut buf, &mut lent);
                            latch(latched, r).is_some()
                        }
                        None => false,
                    };
                    if end.shares.send(Share { buf, ok }).is_err() {
                        return;
                    }
                    continue;
                }
                match end.from_ring.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                }
            }
        };
        match msg {
            ToIo::Free(buf) => free.push(buf),
            ToIo::Write { buf, off, len, to } => {
                store(&plan, &ctx, io, latched, (&buf, off, len), to);
                if end.spent.send(buf).is_err() {
                    return;
                }
            }
        }
    }
}

/// Reads this member's bytes of `src` at `off` into `buf` (its length is
/// the piece's), through [`MemberIo::share`] so `data_crc` sees them; bytes
/// lent from a mapping are copied, through `lent`, which is swapped in.
fn read_share(
    ctx: &Ctx,
    io: &mut MemberIo<'_>,
    (src, off): (Src, u64),
    buf: &mut Vec<u8>,
    lent: &mut Vec<u8>,
) -> Result<(), ApplyError> {
    let at = buf.as_ptr();
    let copied = {
        let bytes = io.share(ctx, src, off, buf)?;
        let borrowed = bytes.as_ptr() != at;
        if borrowed {
            lent.clear();
            lent.extend_from_slice(bytes);
        }
        borrowed
    };
    if copied {
        mem::swap(buf, lent);
    }
    Ok(())
}

/// Stores the outputs `to` (of a delivery round: the ring's own bundle for
/// round 0, else what arrived; or what a reduction brought) unless a
/// failure is latched.
fn store(
    plan: &Plan<'_>,
    ctx: &Option<Ctx<'_>>,
    io: &mut MemberIo<'_>,
    latched: &mut Option<ApplyError>,
    (buf, off, len): (&[u8], u64, usize),
    to: Dest,
) {
    let round = match to {
        Dest::Round(i) => i,
        Dest::Stripe(s) => {
            if let Some(c) = live(ctx, latched) {
                latch(latched, io.write(c, plan.t.sinks[s], off, &buf[..len]));
            }
            return;
        }
    };
    let r = &plan.rounds[round];
    let (sink, rows): (Src, &mut dyn Iterator<Item = usize>) = if r.d == 0 {
        (plan.t.sinks[plan.mine_fin], &mut r.sends.iter().copied())
    } else {
        (plan.t.sinks[r.from_fin], &mut (0..r.recvs.len()))
    };
    for row in rows {
        if let Some(c) = live(ctx, latched) {
            let bytes = &buf[row * len..(row + 1) * len];
            latch(latched, io.write(c, sink, off, bytes));
        }
    }
}

/// Test instrumentation of the I/O thread: nothing outside tests.
#[derive(Clone, Copy, Default)]
pub(super) struct Hook {
    #[cfg(test)]
    read_delay: std::time::Duration,
}

impl Hook {
    /// The hook set on the calling thread (tests), or none.
    pub(super) fn current() -> Hook {
        #[cfg(test)]
        {
            Hook {
                read_delay: test_hook::READ_DELAY.with(|d| d.get()),
            }
        }
        #[cfg(not(test))]
        Hook {}
    }

    #[inline(always)]
    fn before_read(&self) {
        #[cfg(test)]
        if !self.read_delay.is_zero() {
            std::thread::sleep(self.read_delay);
        }
    }
}

/// Tests slow down the reads of the rings started on their thread.
#[cfg(test)]
pub(in super::super) mod test_hook {
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        pub(super) static READ_DELAY: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    /// Every read of a ring started on this thread from now on first
    /// sleeps `d`.
    pub fn set_read_delay(d: Duration) {
        READ_DELAY.with(|c| c.set(d));
    }
}
