//! `OutputPhase::route_writer` with the thread communicator: the CRC32 is
//! computed while the application writes, and Complete_output records it
//! instead of reading the file again — when the file is still what the
//! writer wrote. Shown by its effect: a byte changed after the close with
//! the modification time put back is not seen at complete (the writer's
//! CRC is recorded), so the restart's check finds the mismatch and refuses
//! the checkpoint: never wrong bytes. Changed normally (a new modification
//! time), the file is read at complete and the restart gets its new bytes.
//! Restarts verify every byte, with SINGLE and with XOR after a node loss.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use common::{data, run, Cluster};
use scr::comm::Comm;
use scr::{Flags, Scr};

const SEED: u64 = 41;

/// Write checkpoint `ckpt.<c>` through the writer (one file per rank).
fn write_with_writer(scr: &mut Scr, c: &dyn Comm, prefix: &Path, n: usize) {
    let rank = c.rank();
    let mut out = scr
        .start_output(Some(&format!("ckpt.{n}")), Flags::CHECKPOINT)
        .unwrap();
    let mut w = out
        .route_writer(prefix.join(format!("ckpt.{n}/rank{rank}")))
        .unwrap();
    let bytes = data(SEED, rank, n, 0);
    for chunk in bytes.chunks(333) {
        w.write_all(chunk).unwrap();
    }
    w.sync_all().unwrap();
    out.close_writer(w).unwrap();
    assert!(out.complete(true).unwrap());
}

/// Restart and return the name and whether rank 0's bytes are `want`.
fn restart_reading(scr: &mut Scr, c: &dyn Comm, prefix: &Path, want0: &[u8]) -> Option<String> {
    let rank = c.rank();
    let name = scr.have_restart().unwrap()?;
    let n: usize = name.trim_start_matches("ckpt.").parse().unwrap();
    let mut r = scr.start_restart().unwrap();
    let p = r
        .route_file(prefix.join(format!("{name}/rank{rank}")))
        .unwrap();
    let got = std::fs::read(p).unwrap();
    let ok = if rank == 0 {
        got == want0
    } else {
        got == data(SEED, rank, n, 0)
    };
    assert!(ok, "rank {rank}: bytes of {name}");
    assert!(r.complete(ok).unwrap());
    Some(name)
}

/// Flip byte 10 of `path` in place; with `keep_mtime` put its
/// modification time back, as if nothing had happened.
fn flip_in_place(path: &Path, keep_mtime: bool) {
    let before = std::fs::metadata(path).unwrap().modified().unwrap();
    let mut b = std::fs::read(path).unwrap();
    b[10] ^= 0x40;
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.write_all(&b).unwrap();
    if keep_mtime {
        f.set_modified(before).unwrap();
    } else {
        // Past any timestamp granularity.
        f.set_modified(before + std::time::Duration::from_secs(1))
            .unwrap();
    }
}

#[test]
fn the_writer_crc_is_recorded_and_the_restart_verifies_every_byte() {
    for scheme in ["SINGLE", "XOR"] {
        let cl = Cluster::new();
        let env = [("SCR_COPY_TYPE", scheme), ("SCR_SET_SIZE", "4")];
        run(
            &cl,
            4,
            |r| r,
            &env,
            |scr, c| {
                write_with_writer(scr, c, &cl.prefix, 1);
                None
            },
        );
        let lost = scheme == "XOR";
        if lost {
            cl.kill_node(2);
        }
        let want0 = data(SEED, 0, 1, 0);
        let got = run(
            &cl,
            4,
            |r| r,
            &env,
            |scr, c| {
                if lost {
                    let rebuilt = scr
                        .init_report()
                        .rebuilt
                        .iter()
                        .map(|d| d.get())
                        .collect::<Vec<_>>();
                    assert_eq!(rebuilt, vec![1], "XOR rebuilt the lost node's file");
                }
                restart_reading(scr, c, &cl.prefix, &want0)
            },
        );
        assert_eq!(got[0].as_deref(), Some("ckpt.1"), "{scheme}");
    }
}

#[test]
fn a_file_changed_after_the_writer_closed_is_never_restarted_from_wrong_bytes() {
    for keep_mtime in [true, false] {
        let cl = Cluster::new();
        let env = [("SCR_COPY_TYPE", "SINGLE")];
        run(
            &cl,
            2,
            |r| r,
            &env,
            |scr, c| {
                let rank = c.rank();
                let mut out = scr.start_output(Some("ckpt.1"), Flags::CHECKPOINT).unwrap();
                let mut w = out
                    .route_writer(cl.prefix.join(format!("ckpt.1/rank{rank}")))
                    .unwrap();
                w.write_all(&data(SEED, rank, 1, 0)).unwrap();
                let path = w.path().to_path_buf();
                out.close_writer(w).unwrap();
                if rank == 0 {
                    flip_in_place(&path, keep_mtime);
                }
                assert!(out.complete(true).unwrap());
                None
            },
        );
        let mut changed = data(SEED, 0, 1, 0);
        changed[10] ^= 0x40;
        let got = run(
            &cl,
            2,
            |r| r,
            &env,
            |scr, c| restart_reading(scr, c, &cl.prefix, &changed),
        );
        if keep_mtime {
            // The writer's CRC (of the bytes it wrote) was recorded; the
            // restart's check sees the file differs and drops ckpt.1.
            assert_eq!(got[0], None, "the stale CRC is caught at restart");
        } else {
            // A visible change: complete read the file and recorded its
            // CRC; the restart gets the bytes as they are now.
            assert_eq!(got[0].as_deref(), Some("ckpt.1"));
        }
    }
}
