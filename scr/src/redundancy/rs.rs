//! Reed–Solomon erasure coding over GF(2^8): the codec, and the RS set layout
//! that spreads parity over every member of a set the way the XOR scheme
//! spreads its XOR chunks.
//!
//! SCR 3 provides the RS scheme (`SCR_COPY_TYPE=RS`, `SET_FAILURES=k`) through
//! the redset library (`redset_apply_rs()` / `redset_recover_rs()`): a set of
//! N members survives the loss of any k of them.
//!
//! # Codec
//! Systematic: codeword positions `0..n` are the data shards unchanged,
//! positions `n..n+k` the parity shards, parity = C · data with C a k×n
//! Cauchy matrix normalised so that its first row and first column are all
//! ones. Every square submatrix of a Cauchy matrix is invertible, and scaling
//! rows and columns keeps that, so any n of the n+k shards determine the rest
//! (the code is MDS). The all-ones first row makes RS with k = 1 compute
//! exactly the XOR scheme's bytes.
//!
//! # Set layout
//! Each member's logical file (its files concatenated, zero padded) is cut
//! into N − k chunks of `chunk = ceil(max_bytes / (N − k))` bytes. The set
//! has N stripes; stripe s is one codeword of the (N − k, k) code:
//! - parity row j of stripe s is stored by member (s + j) mod N, as its
//!   parity chunk j — so every member stores k parity chunks (k·chunk bytes);
//! - the other N − k members give one data chunk each: member r holds data
//!   position (r − s − k) mod N of stripe s, and its data chunks go, in
//!   order, to the stripes it holds no parity for, in increasing stripe order.
//!
//! Every member holds exactly one position of every stripe, so losing any k
//! members loses at most k positions of each codeword. With k = 1 this is
//! the XOR layout of `scr_reddesc_apply_xor()` (the zero chunk inserted at the
//! member's own rank), see [`super::xor`].

use super::gf256::{self, Kernel};
use super::{check_index, RedundancyError};

/// Bytes of every shard processed together before moving on, so the tile of
/// each input and output stays in L1/L2 while all products are added.
const TILE_BYTES: usize = 16 * 1024;

/// A systematic Reed–Solomon codec with `data` data shards and `parity`
/// parity shards over GF(2^8) (the codec redset's `redset_rs` uses in SCR 3).
#[derive(Clone, Debug)]
pub struct ReedSolomon {
    data: usize,
    parity: usize,
    /// parity × data coefficients, row-major.
    matrix: Vec<u8>,
    kernel: Kernel,
}

/// Which missing positions are computed from which survivors, and how
/// (the decoding matrix of redset's `redset_recover_rs()`); the distributed
/// rebuild in [`super::apply`] sends each survivor's share of it around the
/// set instead of gathering the shards.
#[derive(Clone, Debug)]
pub struct DecodePlan {
    /// The n codeword positions read (increasing).
    pub survivors: Vec<usize>,
    /// The positions written (increasing).
    pub missing: Vec<usize>,
    /// missing × n coefficients, row-major, over `survivors`.
    pub coefs: Vec<u8>,
}

impl ReedSolomon {
    /// A codec for `data` data shards and `parity` parity shards; needs
    /// `data >= 1`, `parity >= 1` and `data + parity <= 256` (the field has
    /// 256 elements to build the Cauchy matrix from).
    pub fn new(data: usize, parity: usize) -> Result<Self, RedundancyError> {
        if data == 0 || parity == 0 || data + parity > 256 {
            return Err(RedundancyError::BadGeometry {
                members: data + parity,
                parity,
            });
        }
        // Cauchy: C[i][j] = 1 / (x_i + y_j), x_i = i, y_j = parity + j; all
        // x and y distinct so no denominator is zero.
        let mut matrix = vec![0u8; parity * data];
        for i in 0..parity {
            for j in 0..data {
                let denominator = gf256::add(i as u8, (parity + j) as u8);
                matrix[i * data + j] = gf256::inv(denominator).unwrap_or(0);
            }
        }
        // Scale columns so row 0 is all ones, then rows so column 0 is.
        for j in 0..data {
            let s = gf256::inv(matrix[j]).unwrap_or(0);
            for i in 0..parity {
                matrix[i * data + j] = gf256::mul(matrix[i * data + j], s);
            }
        }
        for i in 1..parity {
            let s = gf256::inv(matrix[i * data]).unwrap_or(0);
            for j in 0..data {
                matrix[i * data + j] = gf256::mul(matrix[i * data + j], s);
            }
        }
        assert!(matrix.iter().all(|&m| m != 0), "Cauchy entries are nonzero");
        assert!(matrix[..data].iter().all(|&m| m == 1));
        Ok(ReedSolomon {
            data,
            parity,
            matrix,
            kernel: Kernel::best(),
        })
    }

    /// The same codec computing with a given region kernel (benchmarks and
    /// tests compare kernels; results are identical).
    pub fn with_kernel(mut self, kernel: Kernel) -> Self {
        self.kernel = kernel;
        self
    }

    /// Number of data shards (n).
    pub fn data_shards(&self) -> usize {
        self.data
    }

    /// Number of parity shards (k): the most losses it survives.
    pub fn parity_shards(&self) -> usize {
        self.parity
    }

    /// Coefficient of data shard `col` in parity shard `row`.
    pub fn coefficient(&self, row: usize, col: usize) -> Option<u8> {
        (row < self.parity && col < self.data).then(|| self.matrix[row * self.data + col])
    }

    /// Computes the parity shards from the data shards; all shards must have
    /// the same length.
    pub fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) -> Result<(), RedundancyError> {
        check_count("data shards", self.data, data.len())?;
        check_count("parity shards", self.parity, parity.len())?;
        let len = data.first().map_or(0, |d| d.len());
        check_lengths(data.iter().map(|d| d.len()), 0, len)?;
        check_lengths(parity.iter().map(|p| p.len()), self.data, len)?;
        combine(self.kernel, &self.matrix, data, parity);
        Ok(())
    }

    /// Recomputes the shards whose `present` flag is false from the others
    /// (any n of the n + k suffice); all shards must have the same length.
    /// Fails with [`RedundancyError::TooManyMissing`] when more than k are
    /// missing, leaving every shard untouched.
    pub fn reconstruct(
        &self,
        shards: &mut [&mut [u8]],
        present: &[bool],
    ) -> Result<(), RedundancyError> {
        let total = self.data + self.parity;
        check_count("shards", total, shards.len())?;
        check_count("presence flags", total, present.len())?;
        let len = shards.first().map_or(0, |s| s.len());
        check_lengths(shards.iter().map(|s| s.len()), 0, len)?;
        let plan = self.decode_plan(present)?;
        if plan.missing.is_empty() {
            return Ok(());
        }
        let mut read: Vec<&[u8]> = Vec::with_capacity(self.data);
        let mut written: Vec<&mut [u8]> = Vec::with_capacity(plan.missing.len());
        let mut survivors = plan.survivors.iter().peekable();
        for (position, shard) in shards.iter_mut().enumerate() {
            if !present[position] {
                written.push(&mut **shard);
            } else if survivors.peek() == Some(&&position) {
                survivors.next();
                read.push(&**shard);
            }
        }
        assert_eq!(read.len(), self.data);
        assert_eq!(written.len(), plan.missing.len());
        combine(self.kernel, &plan.coefs, &read, &mut written);
        Ok(())
    }

    /// Solves for the missing positions: invert the generator rows of the
    /// first n present positions, then express every missing position (data:
    /// a row of the inverse; parity: its coding row times the inverse) over
    /// those survivors.
    ///
    /// Fails with [`RedundancyError::CountMismatch`] when `present` does not
    /// have n + k flags and [`RedundancyError::TooManyMissing`] when fewer
    /// than n are present.
    pub fn decode_plan(&self, present: &[bool]) -> Result<DecodePlan, RedundancyError> {
        let (n, total) = (self.data, self.data + self.parity);
        check_count("presence flags", total, present.len())?;
        let present_count = present.iter().filter(|p| **p).count();
        if present_count < n {
            return Err(RedundancyError::TooManyMissing {
                missing: total - present_count,
                tolerated: self.parity,
            });
        }
        let survivors: Vec<usize> = (0..total).filter(|&p| present[p]).take(n).collect();
        let missing: Vec<usize> = (0..total).filter(|&p| !present[p]).collect();
        let mut a = vec![0u8; n * n];
        for (row, &p) in survivors.iter().enumerate() {
            if p < n {
                a[row * n + p] = 1;
            } else {
                a[row * n..(row + 1) * n]
                    .copy_from_slice(&self.matrix[(p - n) * n..(p - n + 1) * n]);
            }
        }
        let inverse = invert(&a, n);
        let mut coefs = vec![0u8; missing.len() * n];
        for (m, &p) in missing.iter().enumerate() {
            let out = &mut coefs[m * n..(m + 1) * n];
            if p < n {
                out.copy_from_slice(&inverse[p * n..(p + 1) * n]);
            } else {
                let coding = &self.matrix[(p - n) * n..(p - n + 1) * n];
                for (j, &c) in coding.iter().enumerate() {
                    for (o, &v) in out.iter_mut().zip(&inverse[j * n..(j + 1) * n]) {
                        *o ^= gf256::mul(c, v);
                    }
                }
            }
        }
        Ok(DecodePlan {
            survivors,
            missing,
            coefs,
        })
    }
}

fn check_count(what: &'static str, expected: usize, actual: usize) -> Result<(), RedundancyError> {
    if expected != actual {
        return Err(RedundancyError::CountMismatch {
            what,
            expected,
            actual,
        });
    }
    Ok(())
}

fn check_lengths(
    lengths: impl Iterator<Item = usize>,
    first_index: usize,
    expected: usize,
) -> Result<(), RedundancyError> {
    for (i, len) in lengths.enumerate() {
        if len != expected {
            return Err(RedundancyError::SizeMismatch {
                member: first_index + i,
                what: "shard",
                expected: expected as u64,
                actual: len as u64,
            });
        }
    }
    Ok(())
}

/// Inverse of the n×n matrix `a` (row-major) by Gauss–Jordan elimination.
/// Only called on generator rows of an MDS code, which are invertible: a
/// singular matrix here is a bug in the matrix construction, not bad input.
fn invert(a: &[u8], n: usize) -> Vec<u8> {
    assert_eq!(a.len(), n * n);
    let mut m = a.to_vec();
    let mut inv = vec![0u8; n * n];
    for i in 0..n {
        inv[i * n + i] = 1;
    }
    for col in 0..n {
        let pivot = (col..n).find(|&r| m[r * n + col] != 0);
        let pivot = pivot.expect("generator rows of an MDS code are invertible");
        if pivot != col {
            for j in 0..n {
                m.swap(pivot * n + j, col * n + j);
                inv.swap(pivot * n + j, col * n + j);
            }
        }
        let scale = gf256::inv(m[col * n + col]).unwrap_or(0);
        for j in 0..n {
            m[col * n + j] = gf256::mul(m[col * n + j], scale);
            inv[col * n + j] = gf256::mul(inv[col * n + j], scale);
        }
        for r in 0..n {
            let f = m[r * n + col];
            if r == col || f == 0 {
                continue;
            }
            for j in 0..n {
                m[r * n + j] ^= gf256::mul(f, m[col * n + j]);
                inv[r * n + j] ^= gf256::mul(f, inv[col * n + j]);
            }
        }
    }
    assert_eq!(m[0], 1, "eliminated to the identity");
    inv
}

/// outputs[o] = Σ_i coefs[o·|inputs| + i] · inputs[i], tile by tile. Inputs
/// may be shorter than the outputs: the missing tail counts as zeros (the
/// zero padding of a short logical file contributes nothing).
fn combine(kernel: Kernel, coefs: &[u8], inputs: &[&[u8]], outputs: &mut [&mut [u8]]) {
    let ni = inputs.len();
    assert_eq!(coefs.len(), ni * outputs.len());
    let len = outputs.first().map_or(0, |o| o.len());
    assert!(outputs.iter().all(|o| o.len() == len));
    let mut start = 0;
    while start < len {
        let end = (start + TILE_BYTES).min(len);
        for (o, out) in outputs.iter_mut().enumerate() {
            let out = &mut out[start..end];
            out.fill(0);
            for (i, input) in inputs.iter().enumerate() {
                if input.len() <= start {
                    continue;
                }
                let input = &input[start..end.min(input.len())];
                kernel.mul_add_into(&mut out[..input.len()], input, coefs[o * ni + i]);
            }
        }
        start = end;
    }
}

/// Where one member sits in one stripe of an RS set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The member stores parity row `row` of the stripe, as its parity chunk `row`.
    Parity {
        /// Parity row (0..k), also the index of the chunk in the member's parity.
        row: usize,
    },
    /// The member contributes its data chunk `chunk` at codeword position `position`.
    Data {
        /// Index of the chunk in the member's logical file (0..N−k).
        chunk: usize,
        /// Data position in the stripe's codeword (0..N−k).
        position: usize,
    },
}

/// The layout of one RS set of `members` members with `parity` parity chunks
/// per member (SET_FAILURES); see the module documentation.
#[derive(Clone, Debug)]
pub struct RsSet {
    members: usize,
    parity: usize,
    codec: ReedSolomon,
}

impl RsSet {
    /// A set of `members` members tolerating `parity` losses; needs
    /// `1 <= parity < members <= 256`.
    pub fn new(members: usize, parity: usize) -> Result<Self, RedundancyError> {
        if parity == 0 || members <= parity || members > 256 {
            return Err(RedundancyError::BadGeometry { members, parity });
        }
        Ok(RsSet {
            members,
            parity,
            codec: ReedSolomon::new(members - parity, parity)?,
        })
    }

    /// Members in the set (N).
    pub fn members(&self) -> usize {
        self.members
    }

    /// Losses tolerated (k).
    pub fn parity(&self) -> usize {
        self.parity
    }

    /// The codec of every stripe: (N − k) data, k parity shards.
    pub fn codec(&self) -> &ReedSolomon {
        &self.codec
    }

    /// Chunk size for the largest logical file: ceil(max / (N − k)).
    pub fn chunk_bytes(&self, max_logical_bytes: u64) -> u64 {
        max_logical_bytes.div_ceil((self.members - self.parity) as u64)
    }

    /// The member storing parity row `row` of stripe `stripe`.
    pub fn parity_holder(&self, stripe: usize, row: usize) -> Result<usize, RedundancyError> {
        check_index("stripe", stripe, self.members)?;
        check_index("parity row", row, self.parity)?;
        Ok((stripe + row) % self.members)
    }

    /// What `member` holds in `stripe`.
    pub fn slot(&self, member: usize, stripe: usize) -> Result<Slot, RedundancyError> {
        check_index("member", member, self.members)?;
        check_index("stripe", stripe, self.members)?;
        Ok(self.slot_at(member, stripe))
    }

    /// The stripe holding data chunk `chunk` (< N − k) of `member`.
    pub fn data_stripe(&self, member: usize, chunk: usize) -> Result<usize, RedundancyError> {
        check_index("member", member, self.members)?;
        check_index("chunk", chunk, self.members - self.parity)?;
        Ok(self.data_stripe_at(member, chunk))
    }

    /// [`RsSet::slot`] for indices already known to be in range.
    fn slot_at(&self, member: usize, stripe: usize) -> Slot {
        let n = self.members;
        debug_assert!(member < n && stripe < n);
        let t = (member + n - stripe) % n;
        if t < self.parity {
            return Slot::Parity { row: t };
        }
        // The member's parity stripes are member, member−1, …, member−k+1
        // (mod N); its data chunks fill the other stripes in increasing order.
        let parity_below = (0..self.parity)
            .filter(|&j| (member + n - j) % n < stripe)
            .count();
        Slot::Data {
            chunk: stripe - parity_below,
            position: t - self.parity,
        }
    }

    /// [`RsSet::data_stripe`] for indices already known to be in range.
    fn data_stripe_at(&self, member: usize, chunk: usize) -> usize {
        let n = self.members;
        let stripe = (0..n)
            .filter(|&stripe| (member + n - stripe) % n >= self.parity)
            .nth(chunk);
        stripe.expect("a member has N − k data stripes")
    }

    /// Codeword position of `member` in `stripe`: data positions first.
    fn position(&self, member: usize, stripe: usize) -> usize {
        match self.slot_at(member, stripe) {
            Slot::Data { position, .. } => position,
            Slot::Parity { row } => self.members - self.parity + row,
        }
    }
}

/// Bytes `[chunk·c, (chunk+1)·c)` of a logical file, clipped to what exists
/// (the rest is zero padding and is not materialised).
fn data_chunk(bytes: &[u8], chunk: usize, c: usize) -> &[u8] {
    let start = (chunk * c).min(bytes.len());
    let end = ((chunk + 1) * c).min(bytes.len());
    &bytes[start..end]
}

/// Computes every member's parity for an RS set with `k` parity chunks per
/// member (the encode half of redset's `redset_apply_rs()`, over memory).
/// `members[r]` is member r's logical file (any lengths, including zero);
/// returns member r's parity, `k · chunk` bytes, chunk = ceil(max / (N − k)).
pub fn encode_set(members: &[&[u8]], k: usize) -> Result<Vec<Vec<u8>>, RedundancyError> {
    let mut parity = vec![Vec::new(); members.len()];
    encode_set_into(members, k, &mut parity)?;
    Ok(parity)
}

/// [`encode_set`] into caller-owned buffers (`parity[r]` becomes member r's
/// parity; every byte is overwritten), so repeated encodes reuse memory.
pub fn encode_set_into(
    members: &[&[u8]],
    k: usize,
    parity: &mut [Vec<u8>],
) -> Result<(), RedundancyError> {
    let set = RsSet::new(members.len(), k)?;
    let n = members.len();
    check_count("parity buffers", n, parity.len())?;
    let max = members.iter().map(|m| m.len()).max().unwrap_or(0);
    let c = set.chunk_bytes(max as u64) as usize;
    for p in parity.iter_mut() {
        p.resize(k * c, 0);
    }
    if c == 0 {
        return Ok(());
    }
    // Hand each parity chunk to the stripe that computes it (each is
    // written by exactly one stripe), so outputs can be borrowed at once.
    let mut outputs: Vec<Vec<Option<&mut [u8]>>> =
        (0..n).map(|_| (0..k).map(|_| None).collect()).collect();
    for (member, buffer) in parity.iter_mut().enumerate() {
        for (row, chunk) in buffer.chunks_mut(c).enumerate() {
            outputs[(member + n - row) % n][row] = Some(chunk);
        }
    }
    let mut inputs: Vec<&[u8]> = vec![&[]; n - k];
    for (stripe, outs) in outputs.into_iter().enumerate() {
        for (member, bytes) in members.iter().enumerate() {
            if let Slot::Data { chunk, position } = set.slot_at(member, stripe) {
                inputs[position] = data_chunk(bytes, chunk, c);
            }
        }
        let mut outs: Vec<&mut [u8]> = outs.into_iter().flatten().collect();
        assert_eq!(outs.len(), k, "every parity chunk has one stripe");
        combine(set.codec.kernel, &set.codec.matrix, &inputs, &mut outs);
    }
    Ok(())
}

/// Rebuilds the lost members of an RS set (redset's `redset_recover_rs()`,
/// over memory). A member is lost when its logical file or its parity is
/// `None` (SCR treats a member missing any file as missing all); both are
/// recomputed. `sizes[r]` is member r's logical size (from the metadata its
/// neighbours keep). Returns the indices rebuilt.
///
/// Fails without changing anything when more than `k` members are lost or a
/// surviving buffer has the wrong length, and with
/// [`RedundancyError::InconsistentSet`] when the rebuilt bytes' padding is
/// not zero (the survivors do not belong together).
pub fn rebuild_set(
    members: &mut [Option<Vec<u8>>],
    parity: &mut [Option<Vec<u8>>],
    sizes: &[u64],
    k: usize,
) -> Result<Vec<usize>, RedundancyError> {
    let n = members.len();
    let set = RsSet::new(n, k)?;
    check_count("parity buffers", n, parity.len())?;
    check_count("sizes", n, sizes.len())?;
    let lost: Vec<usize> = (0..n)
        .filter(|&r| members[r].is_none() || parity[r].is_none())
        .collect();
    if lost.len() > k {
        return Err(RedundancyError::TooManyMissing {
            missing: lost.len(),
            tolerated: k,
        });
    }
    let max = sizes.iter().copied().max().unwrap_or(0);
    let c64 = set.chunk_bytes(max);
    let c = usize::try_from(c64).map_err(|_| RedundancyError::SizeMismatch {
        member: 0,
        what: "logical file",
        expected: usize::MAX as u64,
        actual: max,
    })?;
    for r in (0..n).filter(|r| !lost.contains(r)) {
        let (data, par) = (
            members[r].as_deref().unwrap_or(&[]),
            parity[r].as_deref().unwrap_or(&[]),
        );
        if data.len() as u64 != sizes[r] {
            return Err(RedundancyError::SizeMismatch {
                member: r,
                what: "logical file",
                expected: sizes[r],
                actual: data.len() as u64,
            });
        }
        if par.len() as u64 != (k as u64).saturating_mul(c64) {
            return Err(RedundancyError::SizeMismatch {
                member: r,
                what: "parity",
                expected: (k as u64).saturating_mul(c64),
                actual: par.len() as u64,
            });
        }
    }
    if lost.is_empty() {
        return Ok(lost);
    }
    let data_chunks = n - k;
    // Rebuilt logical files are produced padded, checked, then truncated.
    let mut rebuilt_data: Vec<Vec<u8>> = lost.iter().map(|_| vec![0u8; data_chunks * c]).collect();
    let mut rebuilt_parity: Vec<Vec<u8>> = lost.iter().map(|_| vec![0u8; k * c]).collect();
    if c > 0 {
        // Per stripe, the (position, buffer) pairs to write.
        let mut outputs: Vec<Vec<(usize, &mut [u8])>> = (0..n).map(|_| Vec::new()).collect();
        for ((&member, data), par) in lost.iter().zip(&mut rebuilt_data).zip(&mut rebuilt_parity) {
            for (chunk, buf) in data.chunks_mut(c).enumerate() {
                let stripe = set.data_stripe_at(member, chunk);
                outputs[stripe].push((set.position(member, stripe), buf));
            }
            for (row, buf) in par.chunks_mut(c).enumerate() {
                let stripe = (member + n - row) % n;
                outputs[stripe].push((set.position(member, stripe), buf));
            }
        }
        let mut present = vec![true; n];
        let mut by_position: Vec<&[u8]> = vec![&[]; n];
        for (stripe, mut outs) in outputs.into_iter().enumerate() {
            present.fill(true);
            for &member in &lost {
                present[set.position(member, stripe)] = false;
            }
            for member in (0..n).filter(|r| !lost.contains(r)) {
                by_position[set.position(member, stripe)] = match set.slot_at(member, stripe) {
                    Slot::Data { chunk, .. } => {
                        data_chunk(members[member].as_deref().unwrap_or(&[]), chunk, c)
                    }
                    Slot::Parity { row } => {
                        &parity[member].as_deref().unwrap_or(&[])[row * c..(row + 1) * c]
                    }
                };
            }
            let plan = set.codec.decode_plan(&present)?;
            outs.sort_by_key(|(position, _)| *position);
            assert!(outs
                .iter()
                .map(|(p, _)| *p)
                .eq(plan.missing.iter().copied()));
            let inputs: Vec<&[u8]> = plan.survivors.iter().map(|&p| by_position[p]).collect();
            let mut outs: Vec<&mut [u8]> = outs.into_iter().map(|(_, b)| b).collect();
            combine(set.codec.kernel, &plan.coefs, &inputs, &mut outs);
        }
    }
    for (i, &member) in lost.iter().enumerate() {
        let size = sizes[member] as usize;
        if rebuilt_data[i][size..].iter().any(|&b| b != 0) {
            return Err(RedundancyError::InconsistentSet { member });
        }
    }
    for ((member, mut data), par) in lost.iter().copied().zip(rebuilt_data).zip(rebuilt_parity) {
        data.truncate(sizes[member] as usize);
        members[member] = Some(data);
        parity[member] = Some(par);
    }
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::subsequence;

    /// A set of 2..12 members with 1..4 parity, logical files of uneven
    /// lengths (zero-length ones included).
    fn set_and_k() -> impl Strategy<Value = (Vec<Vec<u8>>, usize)> {
        (2usize..12).prop_flat_map(|n| {
            (
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..400), n),
                1..n.min(5),
            )
        })
    }

    /// A set, its k, and an arbitrary set of lost members (0..=k+1 of them)
    /// with, per lost member, which of its files went missing.
    fn set_k_and_losses() -> impl Strategy<Value = (Vec<Vec<u8>>, usize, Vec<(usize, u8)>)> {
        set_and_k().prop_flat_map(|(members, k)| {
            let n = members.len();
            let lost = subsequence((0..n).collect::<Vec<_>>(), 0..=(k + 1).min(n));
            (
                Just(members),
                Just(k),
                lost,
                proptest::collection::vec(0u8..3, n),
            )
                .prop_map(|(members, k, lost, what)| {
                    let losses = lost.into_iter().map(|r| (r, what[r])).collect();
                    (members, k, losses)
                })
        })
    }

    proptest! {
        #[test]
        fn codec_recovers_any_k_lost_shards(
            (data_n, k, len) in (1usize..10, 1usize..5, 0usize..300),
            seed: u64,
            lose in proptest::collection::vec(any::<proptest::sample::Index>(), 0..6),
        ) {
            let rs = ReedSolomon::new(data_n, k).expect("codec");
            let mut x = seed | 1;
            let data: Vec<Vec<u8>> = (0..data_n)
                .map(|_| (0..len).map(|_| { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x as u8 }).collect())
                .collect();
            let mut parity = vec![vec![0u8; len]; k];
            {
                let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
                let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
                rs.encode(&refs, &mut outs).expect("encode");
            }
            let original: Vec<Vec<u8>> = data.iter().chain(&parity).cloned().collect();
            let total = data_n + k;
            let mut present = vec![true; total];
            for i in &lose {
                present[i.index(total)] = false;
            }
            let missing = present.iter().filter(|p| !**p).count();
            let mut shards = original.clone();
            for (s, p) in shards.iter_mut().zip(&present) {
                if !p { s.fill(0xEE); }
            }
            let result = {
                let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
                rs.reconstruct(&mut refs, &present)
            };
            if missing <= k {
                result.expect("within tolerance");
                prop_assert_eq!(&shards, &original);
            } else {
                let is_too_many = matches!(result, Err(RedundancyError::TooManyMissing { .. }));
                prop_assert!(is_too_many, "{:?}", result);
            }
        }

        #[test]
        fn set_rebuilds_any_k_lost_members_bit_exact(
            (members, k, losses) in set_k_and_losses(),
        ) {
            let n = members.len();
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            let parity = encode_set(&refs, k).expect("encode");
            let mut reused = vec![vec![0x3Cu8; 5]; n];
            encode_set_into(&refs, k, &mut reused).expect("encode into dirty buffers");
            prop_assert_eq!(&reused, &parity);
            let max = members.iter().map(Vec::len).max().unwrap_or(0) as u64;
            let c = max.div_ceil((n - k) as u64) as usize;
            prop_assert!(parity.iter().all(|p| p.len() == k * c));
            prop_assert!((n - k) * c >= max as usize, "chunks hold the largest member");
            let sizes: Vec<u64> = members.iter().map(|m| m.len() as u64).collect();

            let mut have: Vec<Option<Vec<u8>>> = members.iter().cloned().map(Some).collect();
            let mut have_parity: Vec<Option<Vec<u8>>> = parity.iter().cloned().map(Some).collect();
            for &(r, what) in &losses {
                // Losing either file loses the member (what: 0 data, 1 parity, 2 both).
                if what != 1 { have[r] = None }
                if what != 0 { have_parity[r] = None }
            }
            let result = rebuild_set(&mut have, &mut have_parity, &sizes, k);
            if losses.len() <= k {
                let rebuilt = result.expect("within tolerance");
                let lost: Vec<usize> = losses.iter().map(|&(r, _)| r).collect();
                prop_assert_eq!(rebuilt, lost);
                for r in 0..n {
                    prop_assert_eq!(have[r].as_ref(), Some(&members[r]), "member {}", r);
                    prop_assert_eq!(have_parity[r].as_ref(), Some(&parity[r]), "parity {}", r);
                }
            } else {
                let is_too_many = matches!(
                    result,
                    Err(RedundancyError::TooManyMissing { missing, tolerated }) if missing == k + 1 && tolerated == k
                );
                prop_assert!(is_too_many, "{:?}", result);
            }
        }

        #[test]
        fn with_one_parity_the_set_computes_the_xor_scheme(
            members in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 2..10),
        ) {
            let refs: Vec<&[u8]> = members.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(encode_set(&refs, 1).expect("rs"), super::super::xor::encode_set(&refs).expect("xor"));
        }

        #[test]
        fn slots_cover_each_stripe_once_per_member((n, k) in (2usize..40).prop_flat_map(|n| (Just(n), 1..n))) {
            let set = RsSet::new(n, k).expect("set");
            for member in 0..n {
                let mut chunks = Vec::new();
                for stripe in 0..n {
                    match set.slot(member, stripe).expect("in range") {
                        Slot::Parity { row } => prop_assert_eq!(set.parity_holder(stripe, row).expect("in range"), member),
                        Slot::Data { chunk, .. } => {
                            prop_assert_eq!(set.data_stripe(member, chunk).expect("in range"), stripe);
                            chunks.push(chunk);
                        }
                    }
                }
                prop_assert_eq!(chunks, (0..n - k).collect::<Vec<_>>());
            }
            prop_assert!(set.slot(n, 0).is_err() && set.parity_holder(0, k).is_err());
            prop_assert!(set.data_stripe(0, n - k).is_err());
            for stripe in 0..n {
                let mut positions: Vec<usize> = (0..n).map(|m| set.position(m, stripe)).collect();
                positions.sort_unstable();
                prop_assert_eq!(positions, (0..n).collect::<Vec<_>>());
            }
        }

        #[test]
        fn survivors_in_any_order_of_choice_give_the_same_result(
            k in 1usize..4,
            drop in subsequence((0..9).collect::<Vec<usize>>(), 0..4),
        ) {
            // Different erasure patterns decode through different inverses;
            // all must agree with the encoder.
            let rs = ReedSolomon::new(9 - k, k).expect("codec");
            let data: Vec<Vec<u8>> = (0..9 - k).map(|i| (0..64).map(|j| (i * 31 + j * 7) as u8).collect()).collect();
            let mut parity = vec![vec![0u8; 64]; k];
            let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
            let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
            rs.encode(&refs, &mut outs).expect("encode");
            let original: Vec<Vec<u8>> = data.iter().chain(&parity).cloned().collect();
            let mut shards = original.clone();
            let mut present = vec![true; 9];
            for &d in drop.iter().take(k) {
                present[d] = false;
                shards[d].fill(0);
            }
            let mut refs: Vec<&mut [u8]> = shards.iter_mut().map(Vec::as_mut_slice).collect();
            rs.reconstruct(&mut refs, &present).expect("decode");
            prop_assert_eq!(shards, original);
        }
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        assert!(matches!(
            RsSet::new(3, 3),
            Err(RedundancyError::BadGeometry { .. })
        ));
        assert!(matches!(
            RsSet::new(257, 2),
            Err(RedundancyError::BadGeometry { .. })
        ));
        assert!(matches!(
            ReedSolomon::new(0, 2),
            Err(RedundancyError::BadGeometry { .. })
        ));
        assert!(matches!(
            encode_set(&[b"a".as_slice()], 1),
            Err(RedundancyError::BadGeometry { .. })
        ));

        let rs = ReedSolomon::new(2, 1).expect("codec");
        let mut p = [0u8; 3];
        let err = rs
            .encode(&[b"abc", b"ab"], &mut [&mut p])
            .expect_err("ragged");
        assert!(
            matches!(err, RedundancyError::SizeMismatch { member: 1, .. }),
            "{err}"
        );

        let members: Vec<&[u8]> = vec![b"hello", b"", b"world!!"];
        let parity = encode_set(&members, 1).expect("encode");
        let mut have: Vec<Option<Vec<u8>>> = members.iter().map(|m| Some(m.to_vec())).collect();
        let mut have_parity: Vec<Option<Vec<u8>>> = parity.iter().cloned().map(Some).collect();
        have_parity[0].as_mut().expect("parity").push(0);
        have[1] = None;
        let err = rebuild_set(&mut have, &mut have_parity, &[5, 0, 7], 1).expect_err("long parity");
        assert!(
            matches!(
                err,
                RedundancyError::SizeMismatch {
                    member: 0,
                    what: "parity",
                    ..
                }
            ),
            "{err}"
        );
        let err = rebuild_set(&mut have, &mut have_parity, &[5, 0], 1).expect_err("sizes");
        assert!(
            matches!(err, RedundancyError::CountMismatch { .. }),
            "{err}"
        );
        assert!(have[1].is_none(), "nothing changed on error");
    }

    #[test]
    fn flipped_parity_byte_is_caught_as_inconsistent_when_it_lands_in_padding() {
        // Member 1 is short; its rebuilt padding comes from the others'
        // parity, so corrupting that parity shows up as non-zero padding.
        let members: Vec<&[u8]> = vec![&[7; 40], &[1; 3], &[9; 40], &[5; 40]];
        let parity = encode_set(&members, 2).expect("encode");
        let mut have: Vec<Option<Vec<u8>>> = members.iter().map(|m| Some(m.to_vec())).collect();
        let mut have_parity: Vec<Option<Vec<u8>>> = parity.iter().cloned().map(Some).collect();
        have[1] = None;
        for p in have_parity.iter_mut().flatten() {
            p.iter_mut().for_each(|b| *b ^= 0x5a);
        }
        let err =
            rebuild_set(&mut have, &mut have_parity, &[40, 3, 40, 40], 2).expect_err("corrupt");
        assert!(
            matches!(err, RedundancyError::InconsistentSet { member: 1 }),
            "{err}"
        );
    }
}
