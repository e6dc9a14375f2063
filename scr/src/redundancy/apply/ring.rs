//! The pipelined ring shared by XOR and RS encode and rebuild (see the
//! documentation of [`super`]): the per-stripe plan ([`Tables`]), the
//! member I/O behind it ([`MemberIo`]) and the ring itself ([`ring`]),
//! whose reads and writes run on an I/O thread beside its exchanges
//! ([`pipe`]).

use std::fs::File;
use std::mem;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::thread;

use super::super::gf256;
use super::super::logical::LogicalFile;
use super::super::rs::Slot;
use super::super::xor;
use super::coded::RedWriter;
use super::crc::SegmentCrc;
use super::error::{ApplyError, Inconsistency};
use super::member::Ctx;

mod pipe;
#[cfg(test)]
pub(super) use pipe::test_hook;

/// What a member reads for, or writes from, one stripe.
#[derive(Clone, Copy, Debug)]
pub(super) enum Src {
    /// A chunk of its logical file.
    Data { chunk: usize },
    /// A parity row of its redundancy file.
    Parity { row: usize },
}

impl From<Slot> for Src {
    fn from(s: Slot) -> Self {
        match s {
            Slot::Data { chunk, .. } => Src::Data { chunk },
            Slot::Parity { row } => Src::Parity { row },
        }
    }
}

/// The member holding codeword position `p` of `stripe` in an RS set of
/// `n` members with `k` parity rows.
pub(super) fn holder(n: usize, k: usize, stripe: usize, p: usize) -> usize {
    if p < n - k {
        (stripe + k + p) % n
    } else {
        (stripe + p - (n - k)) % n
    }
}

/// The codeword position of a slot.
pub(super) fn position(slot: Slot, n: usize, k: usize) -> usize {
    match slot {
        Slot::Data { position, .. } => position,
        Slot::Parity { row } => n - k + row,
    }
}

/// This member's share of one stripe: what it reads and its coefficient
/// per output.
pub(super) type Share = Option<(Src, Vec<u8>)>;

/// The ring's plan, identical on every member except `mine` and `sinks`.
pub(super) struct Tables {
    /// Outputs per stripe (k at encode, lost members at rebuild).
    width: usize,
    /// dests[stripe][q]: the member that stores output q of the stripe.
    dests: Vec<Vec<usize>>,
    /// mine[stripe]: what this member reads and its coefficient per output.
    mine: Vec<Share>,
    /// sinks[stripe]: where this member stores an output of the stripe.
    sinks: Vec<Src>,
    /// At step t member m adds its share of stripe (m − start − t) mod N.
    start: usize,
    /// Ring steps (1..=N): N − k at encode, where only data members need to
    /// see a stripe's bundle; at rebuild as many as hold N − k survivors of
    /// every stripe (`coded::decode_steps`).
    steps: usize,
    /// Delivery distances d: the member finishing a stripe's bundle sends
    /// some output of it to the member d places to its right.
    rounds: Vec<usize>,
    /// first[stripe]: the coefficients of the stripe's first contributor,
    /// when that member forwards its raw share (one piece) at step 0
    /// instead of a bundle of `width` pieces, and the second contributor
    /// makes the bundle from both shares ([`Tables::forwarding_first`]).
    first: Option<Vec<Vec<u8>>>,
    /// The one lost member of a rebuild run as a reduction to it
    /// ([`Tables::reducing_to`]) instead of the ring.
    pub(super) root: Option<usize>,
}

/// The per-stripe columns of a [`Tables`], one entry per stripe.
pub(super) struct Columns {
    /// dests[stripe][q]: the member that stores output q of the stripe.
    pub(super) dests: Vec<Vec<usize>>,
    /// mine[stripe]: what this member reads and its coefficient per output.
    pub(super) mine: Vec<Share>,
    /// sinks[stripe]: where this member stores an output of the stripe.
    pub(super) sinks: Vec<Src>,
}

impl Tables {
    /// The plan of a set of `n`: `width` outputs per stripe, `steps` ring
    /// steps starting at stripe offset `start`.
    pub(super) fn new(n: usize, start: usize, steps: usize, width: usize, cols: Columns) -> Self {
        assert!(
            start <= n && (1..=n).contains(&steps),
            "ring start {start} and steps {steps} outside a set of {n}"
        );
        assert!(
            cols.dests.len() == n && cols.mine.len() == n && cols.sinks.len() == n,
            "one plan column entry per stripe of {n}"
        );
        assert!(
            cols.dests.iter().all(|d| d.len() == width),
            "every stripe has {width} outputs"
        );
        assert!(
            cols.mine.iter().flatten().all(|(_, c)| c.len() == width),
            "one coefficient per output"
        );
        let mut t = Tables {
            width,
            dests: cols.dests,
            mine: cols.mine,
            sinks: cols.sinks,
            start,
            steps,
            rounds: Vec::new(),
            first: None,
            root: None,
        };
        let mut used = vec![false; n];
        for (s, ds) in t.dests.iter().enumerate() {
            for &d in ds {
                used[(d + n - t.finisher(s, n)) % n] = true;
            }
        }
        t.rounds = (0..n).filter(|&d| used[d]).collect();
        t
    }

    /// The plan with step 0 forwarding raw shares: `first[stripe]` holds the
    /// coefficients of the stripe's first contributor (the member working
    /// on it at step 0). A bundle after one contribution is that share
    /// times its coefficients, so the share alone (one piece) carries it:
    /// with `width` ≥ 2 outputs that sends width − 1 pieces fewer per
    /// stripe and piece, and the second contributor computes every row
    /// from both shares in one pass (`gf256::Kernel::mul2_into`) where the
    /// first made the rows and the second added to them. Every contributor
    /// must have a share at steps 0 and 1 (the encode plan: only data
    /// members see a bundle).
    pub(super) fn forwarding_first(mut self, first: Vec<Vec<u8>>) -> Self {
        let n = self.mine.len();
        assert!(
            self.width >= 2 && self.steps >= 2,
            "forwarding raw shares pays only with two outputs and two contributors or more"
        );
        assert!(
            first.len() == n && first.iter().all(|c| c.len() == self.width),
            "one coefficient per output of each stripe's first contributor"
        );
        self.first = Some(first);
        self
    }

    /// The plan run as SCR's pipelined reduction to `root`
    /// (`scr_reddesc_recover_xor()`): the rebuild of one lost member whose
    /// every survivor adds to every stripe (XOR). Each stripe's bundle
    /// starts at the survivor right of the root and passes the others in
    /// turn to the root, so the root receives only its outputs and nobody
    /// passes on a bundle it adds nothing to: with N members, N − 1 pieces
    /// sent per stripe and piece, where the ring sends N − 1 passes and
    /// N − 1 deliveries per N stripes more.
    pub(super) fn reducing_to(mut self, root: usize) -> Self {
        let n = self.mine.len();
        assert!(root < n && self.width == 1, "a reduction has one root");
        self.root = Some(root);
        self
    }

    /// The stripe member `m` works on at ring step `step`.
    fn stripe(&self, m: usize, step: usize, n: usize) -> usize {
        (m + 2 * n - self.start - step) % n
    }

    /// The stripe whose bundle member `m` holds after the last step.
    fn finished(&self, m: usize, n: usize) -> usize {
        self.stripe(m, self.steps - 1, n)
    }

    /// The member holding stripe `s`'s bundle after the last step.
    fn finisher(&self, s: usize, n: usize) -> usize {
        (s + self.start + self.steps - 1) % n
    }
}

/// The member I/O behind the ring: reads data chunks from the logical file
/// and parity rows from the redundancy file; writes outputs to them.
pub(super) struct MemberIo<'f> {
    pub(super) chunk: u64,
    pub(super) logical: Option<&'f LogicalFile>,
    pub(super) logical_len: u64,
    /// CRC of the data read (an encoding member's files, a survivor's) or
    /// written (a lost member's rebuilt files).
    pub(super) data_crc: Option<SegmentCrc>,
    /// A survivor's redundancy file: (file, path, header length).
    pub(super) red_read: Option<(File, PathBuf, u64)>,
    /// CRC of the parity rows a survivor reads (row r at `r * chunk`).
    pub(super) red_crc: Option<SegmentCrc>,
    pub(super) red_write: Option<RedWriter>,
}

impl MemberIo<'_> {
    /// The logical file; the ring reads and writes only while nothing is
    /// latched, and without a failure there is one.
    fn logical(&self) -> &LogicalFile {
        self.logical
            .expect("the ring touches the logical file only when it was opened or created")
    }

    fn read(&mut self, ctx: &Ctx, src: Src, off: u64, buf: &mut [u8]) -> Result<(), ApplyError> {
        match src {
            Src::Data { chunk } => {
                let pos = chunk as u64 * self.chunk + off;
                let lf = self.logical();
                lf.read_at(pos, buf).map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, buf);
                }
            }
            Src::Parity { row } => {
                let (f, path, hlen) = self
                    .red_read
                    .as_ref()
                    .expect("only a survivor reads parity, and it opened its redundancy file");
                let pos = hlen + row as u64 * self.chunk + off;
                f.read_exact_at(buf, pos)
                    .map_err(ctx.io_err(path, Some(pos)))?;
                if let Some(c) = &mut self.red_crc {
                    c.update(row as u64 * self.chunk + off, buf);
                }
            }
        }
        Ok(())
    }

    /// This member's bytes of `src` at `off`: lent from a mapping of the
    /// data when the logical file has one (none of apply's do), else read
    /// into `scratch`; either way fed to `data_crc`.
    fn share<'s>(
        &'s mut self,
        ctx: &Ctx,
        src: Src,
        off: u64,
        scratch: &'s mut Vec<u8>,
    ) -> Result<&'s [u8], ApplyError> {
        let len = scratch.len();
        match (src, self.logical) {
            (Src::Data { chunk }, Some(lf)) => {
                let pos = chunk as u64 * self.chunk + off;
                let bytes = lf
                    .bytes(pos, len, scratch)
                    .map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, bytes);
                }
                Ok(bytes)
            }
            _ => {
                self.read(ctx, src, off, scratch)?;
                Ok(scratch)
            }
        }
    }

    fn write(&mut self, ctx: &Ctx, sink: Src, off: u64, bytes: &[u8]) -> Result<(), ApplyError> {
        match sink {
            Src::Data { chunk } => {
                let pos = chunk as u64 * self.chunk + off;
                // Past the member's data the rebuilt bytes must be the zero
                // padding; anything else means the survivors disagree.
                let data = self.logical_len.saturating_sub(pos).min(bytes.len() as u64) as usize;
                if bytes[data..].iter().any(|&b| b != 0) {
                    return Err(ctx.inconsistent(Inconsistency::Padding {
                        offset: pos + data as u64,
                    }));
                }
                let lf = self.logical();
                lf.write_at(pos, bytes).map_err(ctx.red_err(Some(pos)))?;
                if let Some(c) = &mut self.data_crc {
                    c.update(pos, bytes);
                }
            }
            Src::Parity { row } => {
                let w = self
                    .red_write
                    .as_mut()
                    .expect("only a member that created its redundancy file writes parity");
                w.write_row(ctx, row, off, bytes)?;
            }
        }
        Ok(())
    }
}

/// One delivery round of the finished bundles: this member sends outputs
/// `sends` of its stripe to the member `d` to its right and receives
/// outputs `recvs` of stripe `from_fin` from the member `d` to its left.
struct Round {
    d: usize,
    sends: Vec<usize>,
    from_fin: usize,
    recvs: Vec<usize>,
}

/// The delivery rounds: the same for every piece, so worked out once and
/// the piece loop allocates nothing.
fn delivery_rounds(ctx: &Ctx, t: &Tables, mine_fin: usize) -> Vec<Round> {
    let (n, me, w) = (ctx.n, ctx.me, t.width);
    t.rounds
        .iter()
        .map(|&d| {
            let (to, from) = (ctx.right(d), ctx.left(d));
            let from_fin = t.finished(from, n);
            let sends = (0..w).filter(|&q| t.dests[mine_fin][q] == to).collect();
            let recvs = (0..w).filter(|&q| t.dests[from_fin][q] == me).collect();
            Round {
                d,
                sends,
                from_fin,
                recvs,
            }
        })
        .collect()
}

/// The buffers of the ring's thread, reused across steps and pieces (its
/// shares arrive in the I/O thread's buffers, see [`pipe`]).
#[derive(Default)]
struct RingBufs {
    /// The bundle of partial sums (width rows of one piece).
    acc: Vec<u8>,
    /// What arrives.
    inc: Vec<u8>,
    /// Several outputs for one destination, joined.
    out: Vec<u8>,
    /// Nobody has added a share to the bundle yet: it stands for zeros,
    /// whatever `acc` holds, and goes right as an empty message.
    zero: bool,
}

/// Why the ring's thread stopped early.
enum Halt {
    /// A communicator failure or a message that does not fit the plan.
    Failed(ApplyError),
    /// The I/O thread is gone (it panicked; the join hands that on).
    Gone,
}

impl From<ApplyError> for Halt {
    fn from(e: ApplyError) -> Self {
        Halt::Failed(e)
    }
}

impl From<pipe::Gone> for Halt {
    fn from(_: pipe::Gone) -> Self {
        Halt::Gone
    }
}

/// The pipelined ring (see the module documentation). This member's reads
/// and writes run on a scoped I/O thread beside its exchanges ([`pipe`]).
/// Local I/O failures are latched and the member keeps its place; only
/// communicator failures end it early, and the I/O thread is joined before
/// the ring returns either way.
pub(super) fn ring(
    ctx: &Ctx,
    chunk: u64,
    t: &Tables,
    io: &mut MemberIo<'_>,
    latched: &mut Option<ApplyError>,
) -> Result<(), ApplyError> {
    let (n, me) = (ctx.n, ctx.me);
    assert!(t.dests.len() == n, "the plan has one column per stripe");
    let mine_fin = t.finished(me, n);
    assert_eq!(t.finisher(mine_fin, n), me, "the ring ends where it should");
    let rounds = delivery_rounds(ctx, t, mine_fin);
    let pieces = xor::pieces(chunk, ctx.set.piece_bytes).map_err(ctx.red_err(None))?;
    let plan = pipe::Plan {
        parts: pipe::SetParts::of(ctx),
        t,
        rounds: &rounds,
        mine_fin,
        pieces: pieces.clone(),
        hook: pipe::Hook::current(),
    };
    let (mut ends, io_end) = pipe::pipe();
    thread::scope(|s| {
        let io_thread = s.spawn(move || pipe::serve(plan, io, latched, io_end));
        let run = match t.root {
            Some(root) => reduce(ctx, chunk, t, root, &mut ends),
            None => pieces_round(ctx, chunk, t, pieces, &rounds, &mut ends),
        };
        // The I/O thread ends once it sees the ring's end dropped (after
        // the writes still queued): on success and on failure alike.
        drop(ends);
        if let Err(panic) = io_thread.join() {
            std::panic::resume_unwind(panic);
        }
        match run {
            Ok(()) => Ok(()),
            Err(Halt::Failed(e)) => Err(e),
            Err(Halt::Gone) => unreachable!("the I/O thread ends early only by panicking"),
        }
    })
}

/// The ring's thread: every piece goes round, its outputs are delivered
/// and handed to the I/O thread to store.
fn pieces_round(
    ctx: &Ctx,
    chunk: u64,
    t: &Tables,
    pieces: xor::Pieces,
    rounds: &[Round],
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let mut b = RingBufs::default();
    let piece_count = chunk.div_ceil(ctx.set.piece_bytes as u64);
    let mut done = 0u64;
    for (off, len) in pieces {
        done += 1;
        assert!(done <= piece_count, "more pieces than the chunk holds");
        assert!(
            len >= 1 && len <= ctx.set.piece_bytes,
            "piece of {len} bytes"
        );
        // Only the length is set here: step 0 overwrites every byte (step 1
        // when the plan forwards raw shares).
        b.acc.resize(t.width * len, 0);
        b.zero = false;
        for step in 0..t.steps {
            match (&t.first, step) {
                (Some(_), 0) => forward_share(ctx, t, len, &mut b, ends)?,
                (Some(first), 1) => combine_first(ctx, t, first, len, &mut b, ends)?,
                _ => {
                    if step > 0 {
                        pass_right(ctx, step, &mut b)?;
                    }
                    add_share(ctx, t, (step, len), &mut b, ends)?;
                }
            }
        }
        if b.zero {
            // No member added anything (every share failed to be read).
            b.acc.fill(0);
            b.zero = false;
        }
        deliver(ctx, (off, len), rounds, &mut b, ends)?;
    }
    assert_eq!(done, piece_count, "every piece of the chunk went round");
    Ok(())
}

/// Ring step > 0: send the bundle right, take the left neighbour's. A
/// bundle nobody added to yet goes as an empty message (a rebuild's bundle
/// whose first members lost their files or hold no share of the stripe):
/// no bytes to send, and the next contributor starts it from its share.
fn pass_right(ctx: &Ctx, step: usize, b: &mut RingBufs) -> Result<(), ApplyError> {
    let payload: &[u8] = if b.zero { &[] } else { &b.acc };
    ctx.set
        .comm
        .sendrecv_bytes(Some((ctx.right(1), payload)), Some(ctx.left(1)), &mut b.inc)
        .map_err(ctx.comm_err())?;
    b.zero = b.inc.is_empty();
    if b.zero {
        return Ok(());
    }
    step_len(ctx, step, b.acc.len(), &b.inc)?;
    mem::swap(&mut b.acc, &mut b.inc);
    Ok(())
}

/// What arrived at ring step `step` must be `expected` bytes long (every
/// member derives the lengths from the same tables).
fn step_len(ctx: &Ctx, step: usize, expected: usize, arrived: &[u8]) -> Result<(), ApplyError> {
    if arrived.len() == expected {
        return Ok(());
    }
    Err(ctx.inconsistent(Inconsistency::RingStep {
        step,
        expected,
        received: arrived.len(),
    }))
}

/// Step 0 of a plan that forwards raw shares ([`Tables::forwarding_first`]):
/// this member's share (zeros when it was not read: a failure is latched)
/// goes right as it is, and the left neighbour's arrives in `b.inc`.
fn forward_share(
    ctx: &Ctx,
    t: &Tables,
    len: usize,
    b: &mut RingBufs,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let stripe = t.stripe(ctx.me, 0, ctx.n);
    assert!(
        t.mine[stripe].is_some(),
        "a plan that forwards raw shares has a share at step 0"
    );
    let share = ends.next_share()?;
    let bytes: &[u8] = if share.ok {
        assert_eq!(share.buf.len(), len, "a share is one piece long");
        &share.buf
    } else {
        b.out.clear();
        b.out.resize(len, 0);
        &b.out
    };
    ctx.set
        .comm
        .sendrecv_bytes(Some((ctx.right(1), bytes)), Some(ctx.left(1)), &mut b.inc)
        .map_err(ctx.comm_err())?;
    ends.free(share.buf)?;
    Ok(step_len(ctx, 1, len, &b.inc)?)
}

/// Step 1 of a plan that forwards raw shares: the bundle's rows from the
/// left neighbour's share (in `b.inc`, with `first`'s coefficients) and
/// this member's, in one pass per row (a share not read counts as none).
fn combine_first(
    ctx: &Ctx,
    t: &Tables,
    first: &[Vec<u8>],
    len: usize,
    b: &mut RingBufs,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let stripe = t.stripe(ctx.me, 1, ctx.n);
    let Some((_, coefs)) = &t.mine[stripe] else {
        unreachable!("a plan that forwards raw shares has a share at step 1")
    };
    let share = ends.next_share()?;
    let kernel = gf256::Kernel::best();
    for (q, (&cl, &cm)) in first[stripe].iter().zip(coefs).enumerate() {
        let row = &mut b.acc[q * len..(q + 1) * len];
        if share.ok {
            assert_eq!(share.buf.len(), len, "a share is one piece long");
            kernel.mul2_into(row, (&b.inc, cl), (&share.buf, cm));
        } else {
            kernel.mul2_into(row, (&b.inc, cl), (&b.inc, 0));
        }
    }
    b.zero = false;
    Ok(ends.free(share.buf)?)
}

/// Adds this member's share of the stripe it works on at `step` to the
/// bundle (at step 0, or while nobody added to it, the bundle starts from
/// it; with no share it stays zeros). The share was read ahead by the I/O
/// thread; one not read (a failure is latched) counts as none.
fn add_share(
    ctx: &Ctx,
    t: &Tables,
    (step, len): (usize, usize),
    b: &mut RingBufs,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let stripe = t.stripe(ctx.me, step, ctx.n);
    // XOR encode is exactly scr_reddesc_apply_xor()'s schedule.
    debug_assert!(t.start != 1 || xor::ring_slot(ctx.me, step, ctx.n).ok() == Some(stripe));
    if step == 0 {
        b.zero = true;
    }
    add_to_bundle(t, (stripe, len), b, ends)
}

/// Adds this member's share of `stripe` to the bundle (or, while nobody
/// added to it, starts the bundle from it); see [`add_share`].
fn add_to_bundle(
    t: &Tables,
    (stripe, len): (usize, usize),
    b: &mut RingBufs,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let Some((_, coefs)) = &t.mine[stripe] else {
        return Ok(());
    };
    let share = ends.next_share()?;
    if !share.ok {
        return Ok(ends.free(share.buf)?);
    }
    let bytes = share.buf;
    assert_eq!(bytes.len(), len, "a share is one piece long");
    let first = mem::replace(&mut b.zero, false);
    if first && coefs.as_slice() == [1] {
        // The XOR case: the first share is the bundle itself, so it becomes
        // the bundle (no zeroing, no copy, no XOR).
        let old = mem::replace(&mut b.acc, bytes);
        return Ok(ends.free(old)?);
    }
    let kernel = gf256::Kernel::best();
    for (q, &c) in coefs.iter().enumerate() {
        let row = &mut b.acc[q * len..(q + 1) * len];
        if first {
            kernel.mul_into(row, &bytes, c);
        } else {
            kernel.mul_add_into(row, &bytes, c);
        }
    }
    Ok(ends.free(bytes)?)
}

/// The rebuild as a reduction to `root` ([`Tables::reducing_to`]). Units
/// are (piece, stripe) in that order; member m sits at place j of the chain
/// (1 for the survivor right of the root, …, N − 1 for the one left of it,
/// N for the root). At tick τ it sends right the bundle of unit τ − j (made
/// at the tick before), receives from its left that of unit τ − j + 1 and
/// adds its share to it; place 1 starts each bundle from its share, and the
/// root stores what arrives. Every member makes the same N · pieces + N − 1
/// ticks, each one exchange at most, so the chain stays in step.
fn reduce(
    ctx: &Ctx,
    chunk: u64,
    t: &Tables,
    root: usize,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    let n = ctx.n;
    let piece = ctx.set.piece_bytes as u64;
    let units = chunk.div_ceil(piece) as usize * n;
    // (offset, length) of a unit's piece, and its stripe.
    let unit = |u: usize| {
        let off = (u / n) as u64 * piece;
        ((off, piece.min(chunk - off) as usize), u % n)
    };
    let j = match (ctx.me + n - root) % n {
        0 => n,
        j => j,
    };
    let at = |tick: usize, back: usize| tick.checked_sub(back).filter(|&u| u < units);
    let mut b = RingBufs::default();
    for tick in 0..units + n - 1 {
        let sending = if j < n { at(tick, j) } else { None };
        let arriving = if j >= 2 { at(tick + 1, j) } else { None };
        if sending.is_some() || arriving.is_some() {
            let payload: &[u8] = if b.zero { &[] } else { &b.acc };
            ctx.set
                .comm
                .sendrecv_bytes(
                    sending.map(|_| (ctx.right(1), payload)),
                    arriving.map(|_| ctx.left(1)),
                    &mut b.inc,
                )
                .map_err(ctx.comm_err())?;
        }
        // The unit this member works on at this tick.
        let Some(u) = at(tick + 1, j) else {
            continue;
        };
        let ((off, len), stripe) = unit(u);
        // An empty bundle: nobody before added to it (zeros).
        b.zero = j == 1 || b.inc.is_empty();
        if j >= 2 && !b.zero {
            step_len(ctx, tick, len, &b.inc)?;
        }
        if j == n {
            if b.zero {
                b.inc.clear();
                b.inc.resize(len, 0);
            }
            b.inc = ends.write(
                mem::take(&mut b.inc),
                (off, len),
                pipe::Dest::Stripe(stripe),
            )?;
            continue;
        }
        if !b.zero {
            mem::swap(&mut b.acc, &mut b.inc);
        }
        b.acc.resize(len, 0);
        add_to_bundle(t, (stripe, len), &mut b, ends)?;
    }
    Ok(())
}

/// The bundle now holds the finished outputs of this member's stripe: deliver
/// each to the member that stores it, and hand what is stored here (this
/// member's own outputs, what others deliver) to the I/O thread.
fn deliver(
    ctx: &Ctx,
    (off, len): (u64, usize),
    rounds: &[Round],
    b: &mut RingBufs,
    ends: &mut pipe::Pipe,
) -> Result<(), Halt> {
    // The bundle is stored after the rounds that still send from it.
    let mut keep = None;
    for (i, r) in rounds.iter().enumerate() {
        if r.d == 0 {
            keep = (!r.sends.is_empty()).then_some(i);
            continue;
        }
        let payload: &[u8] = match r.sends.as_slice() {
            [] => &[],
            [q] => &b.acc[q * len..(q + 1) * len],
            qs => {
                b.out.clear();
                for q in qs {
                    b.out.extend_from_slice(&b.acc[q * len..(q + 1) * len]);
                }
                &b.out
            }
        };
        let (to, from) = (ctx.right(r.d), ctx.left(r.d));
        let send = (!r.sends.is_empty()).then_some((to, payload));
        let recv = (!r.recvs.is_empty()).then_some(from);
        if send.is_none() && recv.is_none() {
            continue;
        }
        ctx.set
            .comm
            .sendrecv_bytes(send, recv, &mut b.inc)
            .map_err(ctx.comm_err())?;
        if r.recvs.is_empty() {
            continue;
        }
        if b.inc.len() != r.recvs.len() * len {
            return Err(ctx
                .inconsistent(Inconsistency::Delivery {
                    from,
                    expected: r.recvs.len() * len,
                    received: b.inc.len(),
                })
                .into());
        }
        b.inc = ends.write(mem::take(&mut b.inc), (off, len), pipe::Dest::Round(i))?;
    }
    if let Some(i) = keep {
        b.acc = ends.write(mem::take(&mut b.acc), (off, len), pipe::Dest::Round(i))?;
    }
    Ok(())
}
