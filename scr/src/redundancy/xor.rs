//! The XOR scheme's arithmetic (xor-scheme.txt): chunk layout, encode and
//! single-member rebuild over in-memory logical files, the ring schedule of
//! the reduce-scatter and the plan of pipelined pieces.
//!
//! Layout (`scr_reddesc_apply_xor()`): with N members, every logical file is
//! cut into N − 1 chunks of `chunk = ceil(max_bytes / (N − 1))` bytes and a
//! zero chunk is inserted at the member's own rank, giving N slots: member r's
//! chunk i sits in slot i when i < r and in slot i + 1 otherwise. Member j's
//! XOR chunk is the XOR of slot j over all members (its own slot j is the
//! zero chunk). Each chunk of data lands in exactly one XOR chunk, held by
//! another member, so any one member's data and XOR chunk are recomputable
//! from the others.
//!
//! Seen per slot ([`slot_content`]): member r has its data chunk in every
//! slot but its own and its XOR chunk in its own, and for every slot the XOR
//! over all N members of their slot content is zero. Encoding computes the
//! owner's XOR chunk from the others' contents of its slot; rebuilding a lost
//! member computes each of its slots' contents from the survivors' contents
//! of that slot — the reduction to the lost member (the root) in
//! `scr_reddesc_recover_xor()`.

use super::gf256::xor_into;
use super::{check_index, RedundancyError};

/// SCR_MPI_BUF_SIZE's default: bytes per pipelined piece (1 MiB).
pub const DEFAULT_PIECE_BYTES: usize = 1 << 20;

fn check_members(members: usize) -> Result<(), RedundancyError> {
    if members < 2 {
        return Err(RedundancyError::BadGeometry { members, parity: 1 });
    }
    Ok(())
}

/// Chunk size of an XOR set of `members` members whose largest logical file
/// has `max_logical_bytes` bytes: ceil(max / (N − 1)) (the CHUNK field of
/// the XOR file header).
pub fn chunk_bytes(max_logical_bytes: u64, members: usize) -> Result<u64, RedundancyError> {
    check_members(members)?;
    super::chunk_bytes(max_logical_bytes, members - 1)
}

/// The slot (= the member whose XOR chunk it goes into) of chunk `chunk`
/// (< N − 1) of `member`'s logical file.
pub fn slot_of_chunk(
    member: usize,
    chunk: usize,
    members: usize,
) -> Result<usize, RedundancyError> {
    check_members(members)?;
    check_index("member", member, members)?;
    check_index("chunk", chunk, members - 1)?;
    Ok(slot_of(member, chunk))
}

/// The chunk of `member`'s logical file in slot `slot`; `None` for the
/// member's own slot, where the zero chunk is inserted.
pub fn chunk_of_slot(
    member: usize,
    slot: usize,
    members: usize,
) -> Result<Option<usize>, RedundancyError> {
    check_members(members)?;
    check_index("member", member, members)?;
    check_index("slot", slot, members)?;
    Ok(chunk_in(member, slot))
}

/// The slot `member` reads and adds at step `step` (0..N) of the ring
/// reduce-scatter in `scr_reddesc_apply_xor()`: (member + N − 1 − step) mod N.
///
/// At each step a member XORs its chunk for that slot into the partial sum
/// received from its left neighbour (nothing at step 0) and sends the result
/// to its right neighbour; at the last step (N − 1) the slot is its own, its
/// contribution is the zero chunk, and the received sum is its XOR chunk.
/// Each step is run piece by piece, see [`pieces`].
pub fn ring_slot(member: usize, step: usize, members: usize) -> Result<usize, RedundancyError> {
    check_members(members)?;
    check_index("member", member, members)?;
    check_index("step", step, members)?;
    Ok((member + members - 1 - step) % members)
}

/// What a member holds in one slot of the XOR layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotContent {
    /// Chunk `chunk` of its logical file (zero padded past its end).
    Data {
        /// Index of the chunk in the member's logical file (0..N−1).
        chunk: usize,
    },
    /// Its XOR chunk (the slot is the member's own).
    Xor,
}

/// What `member` holds in `slot`: the operand it contributes when slot
/// `slot` of a lost member is rebuilt (`scr_reddesc_recover_xor()`: the
/// member whose slot it is sends its XOR chunk, the others their data chunk).
pub fn slot_content(
    member: usize,
    slot: usize,
    members: usize,
) -> Result<SlotContent, RedundancyError> {
    Ok(match chunk_of_slot(member, slot, members)? {
        Some(chunk) => SlotContent::Data { chunk },
        None => SlotContent::Xor,
    })
}

/// [`slot_of_chunk`] for indices already known to be in range.
fn slot_of(member: usize, chunk: usize) -> usize {
    if chunk < member {
        chunk
    } else {
        chunk + 1
    }
}

/// [`chunk_of_slot`] for indices already known to be in range.
fn chunk_in(member: usize, slot: usize) -> Option<usize> {
    match slot.cmp(&member) {
        std::cmp::Ordering::Less => Some(slot),
        std::cmp::Ordering::Equal => None,
        std::cmp::Ordering::Greater => Some(slot - 1),
    }
}

/// Bytes `[chunk·c, (chunk+1)·c)` of a logical file, clipped to what exists.
fn data_chunk(bytes: &[u8], chunk: usize, c: usize) -> &[u8] {
    let start = (chunk * c).min(bytes.len());
    let end = ((chunk + 1) * c).min(bytes.len());
    &bytes[start..end]
}

/// Bytes of the output processed against every source before moving on, so
/// the output tile stays in L1/L2 instead of streaming through memory once
/// per source (the role SCR_MPI_BUF_SIZE pieces play in the ring).
const TILE_BYTES: usize = 16 * 1024;

/// `out = XOR of sources`, each source shorter than `out` counting as zero
/// padded, computed tile by tile. The first source is copied rather than
/// XORed into zeros, saving a read of the output.
fn xor_tiled<'a>(out: &mut [u8], sources: impl Iterator<Item = &'a [u8]> + Clone) {
    let mut start = 0;
    while start < out.len() {
        let end = (start + TILE_BYTES).min(out.len());
        let mut first = true;
        for source in sources.clone() {
            let piece = &source[start.min(source.len())..end.min(source.len())];
            let (head, tail) = out[start..end].split_at_mut(piece.len());
            if first {
                head.copy_from_slice(piece);
                tail.fill(0);
                first = false;
            } else {
                xor_into(head, piece);
            }
        }
        if first {
            out[start..end].fill(0);
        }
        start = end;
    }
}

/// Computes every member's XOR chunk from the members' logical files (any
/// lengths, including zero): what the ring reduce-scatter of
/// `scr_reddesc_apply_xor()` produces, computed in one place.
pub fn encode_set(members: &[&[u8]]) -> Result<Vec<Vec<u8>>, RedundancyError> {
    let mut chunks = vec![Vec::new(); members.len()];
    encode_set_into(members, &mut chunks)?;
    Ok(chunks)
}

/// [`encode_set`] into caller-owned buffers (`chunks[j]` becomes member j's
/// XOR chunk), so a caller encoding dataset after dataset reuses the memory
/// instead of page-faulting fresh allocations each time.
pub fn encode_set_into(members: &[&[u8]], chunks: &mut [Vec<u8>]) -> Result<(), RedundancyError> {
    let n = members.len();
    let max = members.iter().map(|m| m.len()).max().unwrap_or(0);
    let c = chunk_bytes(max as u64, n)? as usize;
    if chunks.len() != n {
        return Err(RedundancyError::CountMismatch {
            what: "xor chunk buffers",
            expected: n,
            actual: chunks.len(),
        });
    }
    for (slot, xor) in chunks.iter_mut().enumerate() {
        // Every byte is overwritten by xor_tiled: resizing only sets the length.
        xor.resize(c, 0);
        let sources = members
            .iter()
            .enumerate()
            .filter_map(|(member, bytes)| Some(data_chunk(bytes, chunk_in(member, slot)?, c)));
        xor_tiled(xor, sources);
    }
    assert!(chunks.iter().all(|x| x.len() == c));
    Ok(())
}

/// Rebuilds member `lost`'s logical file and XOR chunk from the other
/// members' logical files and XOR chunks (`scr_reddesc_recover_xor()`, over
/// memory). Entries at index `lost` are ignored; `lost_size` is its logical
/// size, which SCR reads from the copy of its file metadata in its right
/// neighbour's XOR header (the PARTNER key). Returns (logical file, XOR chunk).
pub fn rebuild_member(
    lost: usize,
    members: &[&[u8]],
    xor_chunks: &[&[u8]],
    lost_size: u64,
) -> Result<(Vec<u8>, Vec<u8>), RedundancyError> {
    let n = members.len();
    check_members(n)?;
    if xor_chunks.len() != n {
        return Err(RedundancyError::CountMismatch {
            what: "xor chunks",
            expected: n,
            actual: xor_chunks.len(),
        });
    }
    check_index("member", lost, n)?;
    let max = (0..n)
        .filter(|&r| r != lost)
        .map(|r| members[r].len() as u64)
        .chain([lost_size])
        .max()
        .unwrap_or(0);
    let c64 = chunk_bytes(max, n)?;
    for r in (0..n).filter(|&r| r != lost) {
        if xor_chunks[r].len() as u64 != c64 {
            return Err(RedundancyError::SizeMismatch {
                member: r,
                what: "xor chunk",
                expected: c64,
                actual: xor_chunks[r].len() as u64,
            });
        }
    }
    let c = c64 as usize;
    // The lost member's content of slot s is the XOR of every survivor's
    // content of slot s: data chunks, and the XOR chunk of the slot's owner.
    let content = |r: usize, slot: usize| match chunk_in(r, slot) {
        Some(chunk) => data_chunk(members[r], chunk, c),
        None => xor_chunks[r],
    };
    let mut data = vec![0u8; (n - 1) * c];
    if c > 0 {
        for (chunk, out) in data.chunks_mut(c).enumerate() {
            let slot = slot_of(lost, chunk);
            xor_tiled(out, (0..n).filter(|&r| r != lost).map(|r| content(r, slot)));
        }
    }
    let size = usize::try_from(lost_size)
        .unwrap_or(usize::MAX)
        .min(data.len());
    if lost_size as usize != size || data[size..].iter().any(|&b| b != 0) {
        return Err(RedundancyError::InconsistentSet { member: lost });
    }
    data.truncate(size);
    let mut xor = vec![0u8; c];
    xor_tiled(
        &mut xor,
        (0..n).filter(|&r| r != lost).map(|r| content(r, lost)),
    );
    Ok((data, xor))
}

/// The pieces a chunk is transferred in: (offset in the chunk, length), in
/// order, each at most the piece size (SCR_MPI_BUF_SIZE), the last shorter.
/// The ring runs all N steps on one piece before the next piece, so its
/// working set stays in cache (xor-scheme.txt, goal 4).
#[derive(Clone, Debug)]
pub struct Pieces {
    chunk_bytes: u64,
    piece_bytes: u64,
    next: u64,
}

impl Iterator for Pieces {
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        if self.next >= self.chunk_bytes {
            return None;
        }
        let offset = self.next;
        let len = self.piece_bytes.min(self.chunk_bytes - offset);
        self.next += len;
        Some((offset, len as usize))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.chunk_bytes - self.next.min(self.chunk_bytes)).div_ceil(self.piece_bytes);
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

/// The piece plan for a chunk of `chunk_bytes` bytes transferred
/// `piece_bytes` at a time (the loop over `SCR_MPI_BUF_SIZE` pieces in
/// `scr_reddesc_apply_xor()`). An empty chunk has no pieces.
pub fn pieces(chunk_bytes: u64, piece_bytes: usize) -> Result<Pieces, RedundancyError> {
    if piece_bytes == 0 {
        return Err(RedundancyError::ZeroPieceSize);
    }
    Ok(Pieces {
        chunk_bytes,
        piece_bytes: piece_bytes as u64,
        next: 0,
    })
}

#[cfg(test)]
// The ring simulation indexes several per-member buffers by rank, as the
// MPI code does by rank; iterator chains would hide that correspondence.
#[allow(clippy::needless_range_loop)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set() -> impl Strategy<Value = Vec<Vec<u8>>> {
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..500), 2..12)
    }

    proptest! {
        #[test]
        fn losing_any_one_member_rebuilds_bit_exact(members in set()) {
            let n = members.len();
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let xors = encode_set(&refs).expect("encode");
            let max = members.iter().map(Vec::len).max().unwrap_or(0);
            let c = chunk_bytes(max as u64, n).expect("chunk") as usize;
            prop_assert!((n - 1) * c >= max && xors.iter().all(|x| x.len() == c));
            let mut reused = vec![vec![0xA5u8; 7]; n];
            encode_set_into(&refs, &mut reused).expect("encode into dirty buffers");
            prop_assert_eq!(&reused, &xors);
            let xor_refs: Vec<&[u8]> = xors.iter().map(Vec::as_slice).collect();
            for lost in 0..n {
                let mut damaged = refs.clone();
                damaged[lost] = &[0xFF; 3];
                let mut damaged_xor = xor_refs.clone();
                damaged_xor[lost] = &[];
                let (data, xor) = rebuild_member(lost, &damaged, &damaged_xor, members[lost].len() as u64)
                    .expect("rebuild");
                prop_assert_eq!(&data, &members[lost], "data of {}", lost);
                prop_assert_eq!(&xor, &xors[lost], "xor chunk of {}", lost);
            }
        }

        #[test]
        fn every_slot_xors_to_zero_over_all_members(members in set()) {
            let n = members.len();
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let xors = encode_set(&refs).expect("encode");
            let c = xors[0].len();
            for slot in 0..n {
                let mut sum = vec![0u8; c];
                for member in 0..n {
                    match slot_content(member, slot, n).expect("in range") {
                        SlotContent::Xor => {
                            prop_assert_eq!(member, slot);
                            xor_into(&mut sum, &xors[member]);
                        }
                        SlotContent::Data { chunk } => xor_into(&mut sum, data_chunk(refs[member], chunk, c)),
                    }
                }
                prop_assert!(sum.iter().all(|&b| b == 0), "slot {}", slot);
            }
        }

        #[test]
        fn the_pipelined_ring_computes_encode_set(members in set(), piece in 1usize..64) {
            // Simulate scr_reddesc_apply_xor(): for each piece, N steps; at each
            // step every member adds its slot's piece to what its left
            // neighbour sent and passes it right.
            let n = members.len();
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let want = encode_set(&refs).expect("encode");
            let c = want[0].len();
            let mut got = vec![vec![0u8; c]; n];
            let mut send = vec![vec![0u8; piece]; n];
            let mut recv = vec![vec![0u8; piece]; n];
            for (offset, len) in pieces(c as u64, piece).expect("plan") {
                let offset = offset as usize;
                for step in 0..n {
                    for member in 0..n {
                        let buf = &mut send[member][..len];
                        if step == 0 { buf.fill(0) } else { buf.copy_from_slice(&recv[member][..len]) }
                        let slot = ring_slot(member, step, n).expect("in range");
                        if let Some(chunk) = chunk_of_slot(member, slot, n).expect("in range") {
                            let bytes = refs[member];
                            let start = (chunk * c + offset).min(bytes.len());
                            let end = (chunk * c + offset + len).min(bytes.len());
                            xor_into(buf, &bytes[start..end]);
                        } else {
                            prop_assert_eq!(step, n - 1, "own slot comes last");
                        }
                    }
                    if step + 1 < n {
                        for member in 0..n {
                            let right = (member + 1) % n;
                            recv[right][..len].copy_from_slice(&send[member][..len]);
                        }
                    } else {
                        for member in 0..n {
                            got[member][offset..offset + len].copy_from_slice(&send[member][..len]);
                        }
                    }
                }
            }
            prop_assert_eq!(got, want);
        }

        #[test]
        fn pieces_tile_the_chunk(c in 0u64..5000, piece in 1usize..700) {
            let plan: Vec<(u64, usize)> = pieces(c, piece).expect("plan").collect();
            prop_assert_eq!(plan.len() as u64, c.div_ceil(piece as u64));
            prop_assert_eq!(pieces(c, piece).expect("plan").size_hint().0, plan.len());
            let mut next = 0;
            for &(offset, len) in &plan {
                prop_assert_eq!(offset, next);
                prop_assert!(len >= 1 && len <= piece);
                next += len as u64;
            }
            prop_assert_eq!(next, c);
        }

        #[test]
        fn slots_and_chunks_are_inverse(n in 2usize..64, member_seed: prop::sample::Index) {
            let member = member_seed.index(n);
            for chunk in 0..n - 1 {
                let slot = slot_of_chunk(member, chunk, n).expect("in range");
                prop_assert_ne!(slot, member);
                prop_assert_eq!(chunk_of_slot(member, slot, n).expect("in range"), Some(chunk));
            }
            prop_assert_eq!(chunk_of_slot(member, member, n).expect("in range"), None);
            let steps: std::collections::BTreeSet<usize> =
                (0..n).map(|s| ring_slot(member, s, n).expect("in range")).collect();
            prop_assert_eq!(steps.len(), n);
            let out_of_range = matches!(slot_of_chunk(member, n - 1, n), Err(RedundancyError::OutOfRange { what: "chunk", .. }));
            prop_assert!(out_of_range);
            prop_assert!(chunk_of_slot(n, 0, n).is_err() && ring_slot(0, n, n).is_err());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// The whole path on real files: each member's files read as one
        /// logical file piece by piece (scr_read_pad_n), XOR chunks computed,
        /// one member's files deleted, rebuilt from the others and written
        /// back piece by piece (scr_write_pad_n): the files come back exactly.
        #[test]
        fn member_files_deleted_then_rebuilt_through_logical_files(
            sizes in proptest::collection::vec(proptest::collection::vec(0u64..3000, 1..4), 2..6),
            lost_seed: prop::sample::Index,
            piece in 1usize..1000,
            seed: u8,
        ) {
            use super::super::logical::LogicalFile;
            let dir = tempfile::tempdir().expect("tempdir");
            let n = sizes.len();
            let files: Vec<Vec<(std::path::PathBuf, u64)>> = sizes
                .iter()
                .enumerate()
                .map(|(r, member)| {
                    member
                        .iter()
                        .enumerate()
                        .map(|(f, &size)| {
                            let path = dir.path().join(format!("rank_{r}.{f}.ckpt"));
                            let bytes: Vec<u8> = (0..size).map(|i| (i as u8).wrapping_mul(31) ^ seed ^ r as u8).collect();
                            std::fs::write(&path, &bytes).expect("write");
                            (path, size)
                        })
                        .collect()
                })
                .collect();
            let originals: Vec<Vec<Vec<u8>>> = files
                .iter()
                .map(|m| m.iter().map(|(p, _)| std::fs::read(p).expect("read")).collect())
                .collect();
            let logical_len: Vec<u64> = sizes.iter().map(|m| m.iter().sum()).collect();
            let c = chunk_bytes(*logical_len.iter().max().expect("members"), n).expect("chunk") as usize;
            let padded = (n - 1) * c;
            let read_logical = |r: usize| -> Vec<u8> {
                let logical = LogicalFile::open(&files[r]).expect("open");
                let mut bytes = vec![0xEEu8; padded];
                for (offset, len) in pieces(padded as u64, piece).expect("plan") {
                    logical.read_at(offset, &mut bytes[offset as usize..offset as usize + len]).expect("read");
                }
                bytes.truncate(logical.len() as usize);
                bytes
            };
            let members: Vec<Vec<u8>> = (0..n).map(read_logical).collect();
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let xors = encode_set(&refs).expect("encode");

            let lost = lost_seed.index(n);
            for (path, _) in &files[lost] {
                std::fs::remove_file(path).expect("remove");
            }
            let mut survivors = refs.clone();
            survivors[lost] = &[];
            let xor_refs: Vec<&[u8]> = xors.iter().map(Vec::as_slice).collect();
            let (data, xor) = rebuild_member(lost, &survivors, &xor_refs, logical_len[lost]).expect("rebuild");
            prop_assert_eq!(&xor, &xors[lost]);
            let out = LogicalFile::create(&files[lost]).expect("create");
            let mut with_padding = data.clone();
            with_padding.resize(padded, 0);
            for (offset, len) in pieces(padded as u64, piece).expect("plan") {
                out.write_at(offset, &with_padding[offset as usize..offset as usize + len]).expect("write");
            }
            out.sync_all().expect("sync");
            for ((path, _), original) in files[lost].iter().zip(&originals[lost]) {
                prop_assert_eq!(&std::fs::read(path).expect("read back"), original);
            }
        }
    }

    #[test]
    fn a_set_of_one_and_a_zero_piece_are_refused() {
        assert!(matches!(
            encode_set(&[b"x"]),
            Err(RedundancyError::BadGeometry { .. })
        ));
        assert!(matches!(pieces(10, 0), Err(RedundancyError::ZeroPieceSize)));
        let err = rebuild_member(5, &[b"a", b"b"], &[b"a", b"b"], 1).expect_err("range");
        assert!(
            matches!(err, RedundancyError::OutOfRange { what: "member", .. }),
            "{err}"
        );
        let err =
            rebuild_member(0, &[b"", b"ab", b"a"], &[b"", b"a", b"abc"], 1).expect_err("chunk");
        assert!(
            matches!(err, RedundancyError::SizeMismatch { member: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn all_empty_members_have_empty_chunks() {
        let xors = encode_set(&[b"", b"", b""]).expect("encode");
        assert_eq!(xors, vec![Vec::<u8>::new(); 3]);
        let (data, xor) =
            rebuild_member(1, &[b"", b"", b""], &[b"", b"", b""], 0).expect("rebuild");
        assert!(data.is_empty() && xor.is_empty());
    }
}
