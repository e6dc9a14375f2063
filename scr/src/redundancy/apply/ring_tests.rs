//! Regression tests of the ring's I/O thread (issue 17 item 2: reads,
//! sends and parity writes overlap): a slow read and a slow exchange take
//! less than their sum, and a failing read ahead, or a communicator that
//! fails mid-ring, ends the set as on one thread.

use super::ring::test_hook;
use super::tests::{one_file, set_of_four};
use super::*;
use crate::comm::thread::{ThreadComm, ThreadConfig};
use crate::comm::{CommError, CommResult, ReduceOp};
use crate::records::FileType;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

/// A communicator that sleeps before each `sendrecv_bytes` and, with
/// `fail_after`, fails every one after that many; it counts the calls and
/// the bytes they send and receive.
struct Wrapped<'c> {
    inner: &'c dyn Comm,
    delay: Duration,
    fail_after: Option<usize>,
    sends: Cell<usize>,
    sent_bytes: Cell<usize>,
    received_bytes: Cell<usize>,
}

impl<'c> Wrapped<'c> {
    fn new(inner: &'c dyn Comm, delay: Duration, fail_after: Option<usize>) -> Self {
        Wrapped {
            inner,
            delay,
            fail_after,
            sends: Cell::new(0),
            sent_bytes: Cell::new(0),
            received_bytes: Cell::new(0),
        }
    }
}

impl Comm for Wrapped<'_> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn barrier(&self) -> CommResult<()> {
        self.inner.barrier()
    }
    fn bcast_bytes(&self, root: usize, buf: &mut Vec<u8>) -> CommResult<()> {
        self.inner.bcast_bytes(root, buf)
    }
    fn allreduce_i64(&self, vals: &mut [i64], op: ReduceOp) -> CommResult<()> {
        self.inner.allreduce_i64(vals, op)
    }
    fn allreduce_f64(&self, vals: &mut [f64], op: ReduceOp) -> CommResult<()> {
        self.inner.allreduce_f64(vals, op)
    }
    fn gather_bytes(&self, root: usize, data: &[u8]) -> CommResult<Option<Vec<Vec<u8>>>> {
        self.inner.gather_bytes(root, data)
    }
    fn allgather_bytes(&self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        self.inner.allgather_bytes(data)
    }
    fn sendrecv_bytes(
        &self,
        send: Option<(usize, &[u8])>,
        recv_from: Option<usize>,
        recv: &mut Vec<u8>,
    ) -> CommResult<usize> {
        let count = self.sends.get() + 1;
        self.sends.set(count);
        if self.fail_after.is_some_and(|f| count > f) {
            return Err(CommError::PeerGone {
                op: "sendrecv_bytes",
                peer: self.inner.rank(),
            });
        }
        std::thread::sleep(self.delay);
        let bytes = send.map_or(0, |(_, b)| b.len());
        self.sent_bytes.set(self.sent_bytes.get() + bytes);
        let got = self.inner.sendrecv_bytes(send, recv_from, recv)?;
        self.received_bytes.set(self.received_bytes.get() + got);
        Ok(got)
    }
    fn split(&self, color: Option<u32>, key: i64) -> CommResult<Option<Box<dyn Comm>>> {
        self.inner.split(color, key)
    }
    fn exchange_sparse(
        &self,
        sends: &BTreeMap<usize, Vec<u8>>,
    ) -> CommResult<BTreeMap<usize, Vec<u8>>> {
        self.inner.exchange_sparse(sends)
    }
}

/// Bytes of member `m`'s one file.
fn bytes_of(m: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + m * 7 + i / 251) as u8).collect()
}

/// How one member of a 4-member set encodes one file of `len` bytes in
/// pieces of `piece` bytes.
struct Member<'c> {
    comm: &'c dyn Comm,
    scheme: CopyType,
    set_failures: usize,
    piece: usize,
    len: usize,
}

impl Member<'_> {
    /// Encodes into `root/m<rank>`; `register` runs when the redundancy
    /// file is registered (after the member's files were opened, before
    /// the ring). Returns the result and the file's path.
    fn encode(
        &self,
        root: &Path,
        register: impl Fn(&Path),
    ) -> (Result<Encoded, ApplyError>, PathBuf) {
        let dir = self.dir(root);
        std::fs::create_dir_all(&dir).expect("dir");
        let mine = self.files(root);
        let path = mine.files[0].path.clone();
        std::fs::write(&path, bytes_of(self.comm.rank(), self.len)).expect("write");
        let r = encode(&self.set(self.comm), &mine, &dir, &mut |_, _, _| {
            register(&path);
            Ok(())
        });
        (r, path)
    }

    /// The member's directory below `root`.
    fn dir(&self, root: &Path) -> PathBuf {
        root.join(format!("{:?}-m{}", self.scheme, self.comm.rank()))
    }

    /// The member's one file as encode records it.
    fn files(&self, root: &Path) -> MemberFiles {
        let m = self.comm.rank();
        let meta = Meta {
            file: Some(format!("/prefix/ckpt.2/r{m}")),
            file_type: Some(FileType::Full),
            complete: Some(true),
            size_bytes: Some(self.len as u64),
            crc32: Some(crc32fast::hash(&bytes_of(m, self.len))),
            ckpt: Some(2),
            ..Meta::default()
        };
        one_file(self.dir(root).join("ckpt"), meta)
    }

    /// The set, over `comm`.
    fn set<'s>(&self, comm: &'s dyn Comm) -> SetInfo<'s> {
        SetInfo {
            dataset: Dataset::new(2),
            ..set_of_four(comm, (self.scheme, self.set_failures), self.piece)
        }
    }
}

/// A directory in memory when there is one, so file system latency does
/// not blur the timings.
fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

#[test]
fn reads_run_ahead_during_the_exchanges_so_slow_reads_and_slow_sends_overlap() {
    // XOR over 4 members: per piece each member reads its 3 data shares
    // and makes 3 exchanges (steps 1-2, then the delivery of its finished
    // parity to the member that stores it). On one thread a piece costs at
    // least 3 reads + 3 exchanges; with the reads ahead on the I/O thread
    // about the larger of the two.
    const PIECES: usize = 8;
    let (piece, read_delay, send_delay) =
        (4096, Duration::from_millis(25), Duration::from_millis(25));
    let (reads, sends) = (3 * PIECES as u32, 3 * PIECES as u32);
    let serial = read_delay * reads + send_delay * sends;
    let root = scratch_dir();
    let out = ThreadComm::run(4, |comm| {
        let slow = Wrapped::new(comm, send_delay, None);
        test_hook::set_read_delay(read_delay);
        let member = Member {
            comm: &slow,
            scheme: CopyType::Xor,
            set_failures: 1,
            piece,
            len: 3 * PIECES * piece,
        };
        let start = Instant::now();
        let (r, path) = member.encode(root.path(), |_| {});
        let took = start.elapsed();
        (r.map(|e| e.app_crcs), path, took, slow.sends.get())
    })
    .expect("no panic");
    for (m, (r, path, took, sent)) in out.into_iter().enumerate() {
        let crcs = r.unwrap_or_else(|e| panic!("member {m}: {e}"));
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(crcs, vec![crc32fast::hash(&bytes)], "member {m}");
        assert_eq!(sent, sends as usize, "member {m}: exchanges of the ring");
        // The delays were paid: the reads of one member follow each other,
        // and so do its exchanges.
        assert!(
            took >= (read_delay * reads).max(send_delay * sends),
            "member {m} took {took:?}"
        );
        // ... but not one after the other: one thread needs `serial`
        // (1.2 s), the overlap about 0.6 s.
        assert!(
            took < serial.mul_f64(0.85),
            "member {m} took {took:?}, reads and exchanges one after the other take {serial:?}"
        );
    }
}

#[test]
fn a_read_ahead_that_fails_mid_ring_fails_the_set_with_io_there_and_peer_elsewhere() {
    // Member 2's file loses its tail after it was opened: its last data
    // chunk reads fine for 5 pieces, then the read (ahead, while the ring
    // exchanges the piece before) hits the end of the file.
    const PIECES: usize = 12;
    let piece = 4096;
    let root = scratch_dir();
    for (scheme, k) in [(CopyType::Xor, 1), (CopyType::Rs, 2)] {
        let chunk = PIECES * piece;
        let len = (4 - k) * chunk;
        let cut = len - chunk + 5 * piece;
        let out = ThreadComm::run(4, |comm| {
            test_hook::set_read_delay(Duration::from_millis(1));
            let member = Member {
                comm,
                scheme,
                set_failures: k,
                piece,
                len,
            };
            member.encode(root.path(), |path| {
                if comm.rank() == 2 {
                    let f = OpenOptions::new().write(true).open(path).expect("open");
                    f.set_len(cut as u64).expect("truncate");
                }
            })
        })
        .expect("no panic");
        let bad = out[2].1.clone();
        for (m, (r, _)) in out.into_iter().enumerate() {
            match r {
                Err(ApplyError::Io {
                    world_rank: 2,
                    path,
                    offset: Some(at),
                    source,
                }) if m == 2 => {
                    assert_eq!(path, bad, "{scheme:?}");
                    assert_eq!(source.kind(), ErrorKind::UnexpectedEof, "{scheme:?}");
                    assert_eq!(at, cut as u64, "{scheme:?}: the first piece past the cut");
                }
                Err(ApplyError::Peer {
                    member: 2,
                    world_rank: 2,
                    kind: FailureKind::Io,
                    path: Some(path),
                }) if m != 2 => assert_eq!(path, bad, "{scheme:?}"),
                other => panic!("{scheme:?} member {m}: {other:?}"),
            }
        }
    }
}

#[test]
fn a_communicator_that_fails_mid_ring_ends_every_member_with_comm_not_a_hang() {
    // Member 0's exchanges fail from the 5th on, while its I/O thread
    // reads ahead and writes parity: it must end (and be joined) at once,
    // and the others then see their peer gone.
    let config = ThreadConfig {
        timeout: Duration::from_secs(20),
        ..ThreadConfig::default()
    };
    let root = scratch_dir();
    for (scheme, k) in [(CopyType::Xor, 1), (CopyType::Rs, 2)] {
        let start = Instant::now();
        let out = ThreadComm::run_with(&config, 4, |comm| {
            test_hook::set_read_delay(Duration::from_millis(1));
            let failing = Wrapped::new(comm, Duration::ZERO, (comm.rank() == 0).then_some(4));
            let member = Member {
                comm: &failing,
                scheme,
                set_failures: k,
                piece: 4096,
                len: (4 - k) * 16 * 4096,
            };
            member.encode(root.path(), |_| {}).0.map_err(|e| e.kind())
        })
        .expect("no panic");
        assert_eq!(out, vec![Err(FailureKind::Comm); 4], "{scheme:?}");
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "{scheme:?}: the set waited for a timeout ({:?})",
            start.elapsed()
        );
    }
}

/// A rebuild after member 1 of a 4-member set lost everything.
struct LoseMember1 {
    scheme: CopyType,
    k: usize,
    piece: usize,
    /// Bytes of each member's one file.
    len: usize,
}

impl LoseMember1 {
    /// Encodes, removes member 1's files, and rebuilds through a
    /// [`Wrapped`] communicator whose exchanges fail after `fail_after(rank)`;
    /// per member: the rebuild's outcome (member 1: its file's bytes are
    /// checked), and the bytes the rebuild sent and received.
    fn run(
        &self,
        root: &Path,
        fail_after: impl Fn(usize) -> Option<usize> + Sync,
    ) -> Vec<(Result<(), FailureKind>, usize, usize)> {
        let config = ThreadConfig {
            timeout: Duration::from_secs(20),
            ..ThreadConfig::default()
        };
        let lost = [
            MemberLoss::NONE,
            MemberLoss::ALL,
            MemberLoss::NONE,
            MemberLoss::NONE,
        ];
        ThreadComm::run_with(&config, 4, |comm| {
            let member = Member {
                comm,
                scheme: self.scheme,
                set_failures: self.k,
                piece: self.piece,
                len: self.len,
            };
            let (encoded, path) = member.encode(root, |_| {});
            let red = encoded.expect("encode").redundancy;
            let mine = member.files(root);
            let gone = comm.rank() == 1;
            if gone {
                std::fs::remove_file(&path).expect("lose the file");
                for f in &red {
                    std::fs::remove_file(&f.path).expect("lose the redundancy file");
                }
            }
            let counting = Wrapped::new(comm, Duration::ZERO, fail_after(comm.rank()));
            let rebuilt = rebuild(
                &member.set(&counting),
                &lost,
                (!gone).then_some(&mine),
                (!gone).then_some(&red[..]),
                &member.dir(root),
                &mut |_, _, _| Ok(()),
            );
            let outcome = rebuilt.map_err(|e| e.kind()).map(|r| {
                if gone {
                    let again = std::fs::read(&r.app_files[0].path).expect("rebuilt");
                    assert!(
                        again == bytes_of(1, self.len),
                        "{:?}: rebuilt bytes differ",
                        self.scheme
                    );
                }
            });
            (
                outcome,
                counting.sent_bytes.get(),
                counting.received_bytes.get(),
            )
        })
        .expect("no panic")
    }
}

#[test]
fn a_rebuild_sends_each_bundle_only_to_members_that_add_to_it_or_store_it() {
    // Member 1 of 4 loses everything; per piece of every chunk, the pieces
    // (of `piece` bytes) every member sends and member 1 receives, counted
    // by hand from the plan (ring.rs, coded.rs `decode_tables`):
    // - XOR, a reduction to member 1: each of the 4 stripes' bundles starts
    //   at member 2 and passes 3 and 0 to 1: 12 sent, 4 received (the ring
    //   sent 15 — 12 passes and 3 deliveries — and member 1 received 6);
    // - RS k = 2, the ring: a bundle passes 3 members (2 passes each, 8), 2
    //   of them empty (started by member 1, or by a survivor the decode does
    //   not need), 3 delivered: 9 sent (15 when every bundle went round all
    //   4); member 1 receives its 4 outputs and one bundle it passes on.
    const PIECES: usize = 5;
    let piece = 4096;
    let root = scratch_dir();
    for (scheme, k, per_piece, to_lost) in [(CopyType::Xor, 1, 12, 4), (CopyType::Rs, 2, 9, 5)] {
        let len = (4 - k) * PIECES * piece;
        let out = LoseMember1 {
            scheme,
            k,
            piece,
            len,
        }
        .run(root.path(), |_| None);
        assert!(out.iter().all(|(r, _, _)| r.is_ok()), "{scheme:?}: {out:?}");
        assert_eq!(
            out.iter().map(|(_, sent, _)| sent).sum::<usize>(),
            per_piece * PIECES * piece,
            "{scheme:?}: (outcome, bytes sent, received) per member {out:?}"
        );
        assert_eq!(
            out[1].2,
            to_lost * PIECES * piece,
            "{scheme:?}: (outcome, bytes sent, received) per member {out:?}"
        );
    }
}

#[test]
fn a_communicator_that_fails_mid_rebuild_ends_every_member_with_comm_not_a_hang() {
    // Each member in turn fails its exchanges from the 6th on, in the
    // middle of the XOR reduction to member 1 (first survivor, middle, last
    // survivor, the root itself) and of the RS ring: every member ends with
    // a communicator failure, none waits for the timeout.
    let root = scratch_dir();
    for (scheme, k) in [(CopyType::Xor, 1), (CopyType::Rs, 2)] {
        for failing in 0..4 {
            let start = Instant::now();
            let lose = LoseMember1 {
                scheme,
                k,
                piece: 4096,
                len: (4 - k) * 8 * 4096,
            };
            let out = lose.run(root.path(), |rank| (rank == failing).then_some(5));
            let kinds: Vec<_> = out.into_iter().map(|(r, _, _)| r).collect();
            assert_eq!(
                kinds,
                vec![Err(FailureKind::Comm); 4],
                "{scheme:?} member {failing} failing"
            );
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "{scheme:?} member {failing} failing: the set waited for a timeout ({:?})",
                start.elapsed()
            );
        }
    }
}
