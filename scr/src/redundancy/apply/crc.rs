//! CRC32 checks at both ends of every transfer: an encoding member's files
//! are checksummed by the same read that sends or encodes them
//! ([`SegmentCrc`], checked at the end of the pass by
//! [`super::member::checked_metas`]), a survivor's by the same read that
//! lends them to a rebuild (and [`complete_crc`] for bytes the decode did
//! not need), and every received or rebuilt byte is checksummed as
//! it lands ([`SegmentCrc`]) and compared with the recorded CRC
//! ([`check_crcs`]) before the file is handed back.

use std::path::PathBuf;

use crate::records::Meta;

use super::error::{ApplyError, Inconsistency};
use super::member::Ctx;
use super::FileEntry;

/// CRC32 of each file of a logical file, computed from pieces that arrive
/// in order within each chunk but chunk by chunk in any order: one hasher
/// per (file ∩ chunk) segment, joined per file with `crc32fast`'s combine.
pub(super) struct SegmentCrc {
    /// (start, end, file) of each segment, ascending and contiguous.
    segs: Vec<(u64, u64, usize)>,
    filled: Vec<u64>,
    hashers: Vec<crc32fast::Hasher>,
    files: usize,
    len: u64,
}

impl SegmentCrc {
    /// Segments of files of `sizes` cut at multiples of `chunk` (a `chunk`
    /// of 0 cuts nowhere).
    pub(super) fn new(sizes: &[u64], chunk: u64) -> Self {
        let mut segs = Vec::new();
        let mut start = 0u64;
        for (file, &size) in sizes.iter().enumerate() {
            let end = start + size;
            let mut pos = start;
            while pos < end {
                let cut = pos
                    .checked_div(chunk)
                    .map_or(end, |c| ((c + 1) * chunk).min(end));
                assert!(cut > pos, "a segment is at least one byte long");
                segs.push((pos, cut, file));
                pos = cut;
            }
            start = end;
        }
        let count = segs.len();
        SegmentCrc {
            segs,
            filled: vec![0; count],
            hashers: vec![crc32fast::Hasher::new(); count],
            files: sizes.len(),
            len: start,
        }
    }

    /// Adds logical bytes `[offset, offset + bytes.len())` (padding ignored).
    pub(super) fn update(&mut self, offset: u64, bytes: &[u8]) {
        let end = (offset + bytes.len() as u64).min(self.len);
        let mut pos = offset;
        let mut i = self.segs.partition_point(|s| s.1 <= offset);
        while pos < end {
            let (s, e, _) = self.segs[i];
            // Pieces of one chunk arrive in order, so each segment fills
            // front to back; anything else is a scheduling bug.
            assert_eq!(s + self.filled[i], pos, "segment CRC fed out of order");
            let take = e.min(end) - pos;
            let from = (pos - offset) as usize;
            self.hashers[i].update(&bytes[from..from + take as usize]);
            self.filled[i] += take;
            pos += take;
            i += 1;
        }
    }

    /// The byte ranges `[start, end)` not fed yet (each segment fills front
    /// to back, so what is missing is the tail of a segment).
    pub(super) fn missing(&self) -> Vec<(u64, u64)> {
        self.segs
            .iter()
            .zip(&self.filled)
            .filter(|((s, e, _), f)| s + *f != *e)
            .map(|((s, e, _), f)| (s + f, *e))
            .collect()
    }

    /// The CRC32 of each file. Every byte must have been fed: the schedules
    /// deliver each byte of a file being received or rebuilt exactly once.
    pub(super) fn finish(self) -> Vec<u32> {
        self.finish_hashers()
            .into_iter()
            .map(|h| h.finalize())
            .collect()
    }

    /// [`Self::finish`] as hashers, to be combined with others.
    pub(super) fn finish_hashers(self) -> Vec<crc32fast::Hasher> {
        let unfilled = self
            .segs
            .iter()
            .zip(&self.filled)
            .position(|((s, e, _), f)| s + f != *e);
        assert!(
            unfilled.is_none(),
            "segment {unfilled:?} of a received file was never fed to its CRC"
        );
        let mut out = vec![crc32fast::Hasher::new(); self.files];
        for ((_, _, file), h) in self.segs.iter().zip(&self.hashers) {
            out[*file].combine(h);
        }
        out
    }
}

/// Compares computed CRCs with the recorded ones (files without a recorded
/// CRC are taken as they are).
pub(super) fn check_crcs(
    ctx: &Ctx,
    paths: &[PathBuf],
    recorded: &[Meta],
    crcs: Vec<u32>,
) -> Result<Vec<u32>, ApplyError> {
    assert!(
        crcs.len() == recorded.len() && paths.len() == recorded.len(),
        "one computed CRC ({}) and one path ({}) per recorded file ({})",
        crcs.len(),
        paths.len(),
        recorded.len()
    );
    for ((path, meta), &actual) in paths.iter().zip(recorded).zip(&crcs) {
        if let Some(expected) = meta.crc32 {
            if expected != actual {
                return Err(ApplyError::Crc {
                    world_rank: ctx.world_rank,
                    path: path.clone(),
                    expected,
                    actual,
                });
            }
        }
    }
    Ok(crcs)
}

/// Checks every file's size against its meta (a survivor's check before
/// it lends its data to a rebuild; its CRC32s are checked by the rebuild's
/// own read of the same bytes, [`SegmentCrc`] and [`SegmentCrc::missing`]).
pub(super) fn check_sizes(ctx: &Ctx, files: &[FileEntry]) -> Result<(), ApplyError> {
    for f in files {
        let len = std::fs::metadata(&f.path)
            .map_err(ctx.io_err(&f.path, None))?
            .len();
        if let Some(recorded) = f.meta.size_bytes.filter(|&s| s != len) {
            return Err(ctx.inconsistent(Inconsistency::FileSize {
                path: f.path.clone(),
                actual: len,
                recorded,
            }));
        }
    }
    Ok(())
}

/// Feeds `crc` the bytes it has not seen yet, read with `read(offset,
/// buf)` in pieces of `buf`'s length (a survivor of an RS rebuild lends
/// only the stripes the decode needs; the others are read here, once).
pub(super) fn complete_crc(
    crc: &mut SegmentCrc,
    buf: &mut Vec<u8>,
    piece: usize,
    mut read: impl FnMut(u64, &mut [u8]) -> Result<(), ApplyError>,
) -> Result<(), ApplyError> {
    buf.resize(piece.max(1), 0);
    for (start, end) in crc.missing() {
        let mut pos = start;
        // Bounded: each turn feeds at least one byte (the buffer is never
        // empty) until `end`.
        while pos < end {
            let take = (end - pos).min(buf.len() as u64) as usize;
            read(pos, &mut buf[..take])?;
            crc.update(pos, &buf[..take]);
            pos += take as u64;
        }
    }
    Ok(())
}
