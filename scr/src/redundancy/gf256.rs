//! Arithmetic in GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d),
//! and the region operations the XOR and Reed–Solomon schemes spend their
//! time in.
//!
//! LLNL's SCR computes XOR sets with a plain byte loop in
//! `scr_reddesc_apply_xor()` and Reed–Solomon sets (SCR 3, in the redset
//! library, `redset_apply_rs()`) with table-driven GF(2^8) products. Here the
//! region kernels are chosen at run time: AVX2 or SSSE3 `pshufb` over split
//! 4-bit tables when the CPU has them, a full 256-entry product row
//! otherwise. Every kernel computes the same bytes; tests check that.

/// The reduction polynomial, 0x11d, the one Reed–Solomon codes over bytes
/// conventionally use (and `reed-solomon-erasure`, so results can be compared).
pub const POLYNOMIAL: u16 = 0x11d;

/// exp[i] = 2^i for i in 0..510: doubled so `exp[log a + log b]` needs no modulo.
const EXP: [u8; 512] = build_exp();
/// log[a] for a != 0; log[0] is unused (0 has no logarithm).
const LOG: [u8; 256] = build_log();
/// MUL[c][x] = c·x: one 256-byte product row per coefficient (64 KiB), the
/// portable region kernel and the source of the 4-bit tables.
static MUL: [[u8; 256]; 256] = build_mul();

const fn build_exp() -> [u8; 512] {
    let mut exp = [0u8; 512];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLYNOMIAL;
        }
        i += 1;
    }
    // exp[510], exp[511] are never indexed (log a + log b <= 508).
    exp
}

const fn build_log() -> [u8; 256] {
    let exp = build_exp();
    let mut log = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        log[exp[i] as usize] = i as u8;
        i += 1;
    }
    log
}

const fn build_mul() -> [[u8; 256]; 256] {
    let mut mul = [[0u8; 256]; 256];
    let mut c = 1;
    while c < 256 {
        let lc = LOG[c] as usize;
        let mut x = 1;
        while x < 256 {
            mul[c][x] = EXP[lc + LOG[x] as usize];
            x += 1;
        }
        c += 1;
    }
    mul
}

/// Sum (and difference) in GF(2^8): bitwise XOR.
#[inline]
pub fn add(a: u8, b: u8) -> u8 {
    a ^ b
}

/// Product in GF(2^8) modulo [`POLYNOMIAL`].
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[a as usize][b as usize]
}

/// Multiplicative inverse; `None` for 0, which has none.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    if a == 0 {
        None
    } else {
        Some(EXP[255 - LOG[a as usize] as usize])
    }
}

/// Quotient a / b; `None` when b is 0.
#[inline]
pub fn div(a: u8, b: u8) -> Option<u8> {
    inv(b).map(|ib| mul(a, ib))
}

/// a^n (repeated product; a^0 = 1, including 0^0).
pub fn pow(a: u8, n: u32) -> u8 {
    if n == 0 {
        return 1;
    }
    if a == 0 {
        return 0;
    }
    let e = (LOG[a as usize] as u64 * n as u64) % 255;
    EXP[e as usize]
}

/// `dst ^= src` over the common length of both slices (the XOR scheme's
/// inner loop in `scr_reddesc_apply_xor()` / `scr_reddesc_recover_xor()`).
///
/// Written over 32-byte blocks of `u64` words so LLVM emits wide vector XORs
/// on any target; measured at memcpy speed (results/redundancy.md).
#[inline]
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut d_blocks = dst.chunks_exact_mut(32);
    let mut s_blocks = src.chunks_exact(32);
    for (d, s) in (&mut d_blocks).zip(&mut s_blocks) {
        for (dw, sw) in d.chunks_exact_mut(8).zip(s.chunks_exact(8)) {
            let x = u64::from_ne_bytes(dw.try_into().unwrap_or([0; 8]))
                ^ u64::from_ne_bytes(sw.try_into().unwrap_or([0; 8]));
            dw.copy_from_slice(&x.to_ne_bytes());
        }
    }
    for (d, s) in d_blocks
        .into_remainder()
        .iter_mut()
        .zip(s_blocks.remainder())
    {
        *d ^= *s;
    }
}

/// Which implementation of [`mul_add_into`] runs. Public so the benchmark and
/// the tests can run each one; callers normally use [`Kernel::best`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kernel {
    /// One lookup in the 256-entry product row per byte: portable.
    ScalarRow,
    /// Two lookups in 16-entry tables (low and high nibble) per byte:
    /// portable; kept as the reference the `pshufb` kernels are derived from.
    ScalarNibble,
    /// 16 bytes per `pshufb` pair (x86_64 SSSE3).
    Ssse3,
    /// 32 bytes per `vpshufb` pair (x86_64 AVX2).
    Avx2,
}

impl Kernel {
    /// Every kernel this CPU can run, portable ones first.
    pub fn available() -> Vec<Kernel> {
        let mut kernels = vec![Kernel::ScalarRow, Kernel::ScalarNibble];
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("ssse3") {
                kernels.push(Kernel::Ssse3);
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                kernels.push(Kernel::Avx2);
            }
        }
        kernels
    }

    /// The fastest kernel this CPU can run (measured order: AVX2, SSSE3,
    /// full product row; see results/redundancy.md).
    #[inline]
    pub fn best() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            // std caches the CPUID result: this is an atomic load.
            if std::arch::is_x86_feature_detected!("avx2") {
                return Kernel::Avx2;
            }
            if std::arch::is_x86_feature_detected!("ssse3") {
                return Kernel::Ssse3;
            }
        }
        Kernel::ScalarRow
    }

    /// `dst ^= c·src` over the common length, with this kernel. A kernel the
    /// CPU lacks falls back to the portable row kernel instead of faulting.
    pub fn mul_add_into(self, dst: &mut [u8], src: &[u8], c: u8) {
        let n = dst.len().min(src.len());
        let (dst, src) = (&mut dst[..n], &src[..n]);
        // Multiplying by 0 adds nothing; by 1 is a plain XOR (memory speed).
        match c {
            0 => return,
            1 => return xor_into(dst, src),
            _ => {}
        }
        match self {
            Kernel::ScalarRow => mul_add_row(dst, src, c),
            Kernel::ScalarNibble => mul_add_nibble(dst, src, c),
            #[cfg(target_arch = "x86_64")]
            Kernel::Ssse3 if std::arch::is_x86_feature_detected!("ssse3") => {
                let (lo, hi) = nibble_tables(c);
                // SAFETY: the CPU supports SSSE3 (checked just above).
                unsafe { x86::mul_add_ssse3(dst, src, &lo, &hi) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                let (lo, hi) = nibble_tables(c);
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { x86::mul_add_avx2(dst, src, &lo, &hi) }
            }
            _ => mul_add_row(dst, src, c),
        }
    }

    /// `dst = ca·a ⊕ cb·b` over the common length of the three slices,
    /// with this kernel: the first combination of a Reed–Solomon bundle
    /// from two members' data in one pass (no zeroing, no copy, `dst` not
    /// read). AVX2 has a fused kernel; the others (and a kernel the CPU
    /// lacks) look both products up in the full product rows.
    pub fn mul2_into(self, dst: &mut [u8], (a, ca): (&[u8], u8), (b, cb): (&[u8], u8)) {
        let n = dst.len().min(a.len()).min(b.len());
        let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
        match (ca, cb) {
            (0, _) => return self.mul_into(dst, b, cb),
            (_, 0) => return self.mul_into(dst, a, ca),
            (1, 1) => return xor2_into(dst, a, b),
            _ => {}
        }
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                let (ta, tb) = (nibble_tables(ca), nibble_tables(cb));
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { x86::mul2_avx2(dst, a, &ta, b, &tb) }
            }
            _ => {
                let (ra, rb) = (&MUL[ca as usize], &MUL[cb as usize]);
                for ((d, x), y) in dst.iter_mut().zip(a).zip(b) {
                    *d = ra[*x as usize] ^ rb[*y as usize];
                }
            }
        }
    }

    /// `dst = c·src` over the common length: the first share of a bundle.
    /// AVX2 does it in one pass (`dst` not read) with the fused two-source
    /// kernel and the second coefficient 0 (the same bytes, still in L1);
    /// SSSE3 zeroes `dst` and multiplies-and-adds (two passes, both faster
    /// than one lookup per byte); the portable kernels look the product up
    /// in the full row.
    pub fn mul_into(self, dst: &mut [u8], src: &[u8], c: u8) {
        let n = dst.len().min(src.len());
        let (dst, src) = (&mut dst[..n], &src[..n]);
        match c {
            0 => return dst.fill(0),
            1 => return dst.copy_from_slice(src),
            _ => {}
        }
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if std::arch::is_x86_feature_detected!("avx2") => {
                let (t, zero) = (nibble_tables(c), nibble_tables(0));
                // SAFETY: the CPU supports AVX2 (checked just above).
                unsafe { x86::mul2_avx2(dst, src, &t, src, &zero) }
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Ssse3 if std::arch::is_x86_feature_detected!("ssse3") => {
                dst.fill(0);
                self.mul_add_into(dst, src, c);
            }
            _ => {
                let row = &MUL[c as usize];
                for (d, x) in dst.iter_mut().zip(src) {
                    *d = row[*x as usize];
                }
            }
        }
    }
}

/// `dst = a ⊕ b` over the common length of the three slices, in 32-byte
/// blocks of `u64` words as [`xor_into`].
fn xor2_into(dst: &mut [u8], a: &[u8], b: &[u8]) {
    let n = dst.len().min(a.len()).min(b.len());
    let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
    let mut d_blocks = dst.chunks_exact_mut(32);
    let mut a_blocks = a.chunks_exact(32);
    let mut b_blocks = b.chunks_exact(32);
    for ((d, x), y) in (&mut d_blocks).zip(&mut a_blocks).zip(&mut b_blocks) {
        for ((dw, xw), yw) in d
            .chunks_exact_mut(8)
            .zip(x.chunks_exact(8))
            .zip(y.chunks_exact(8))
        {
            let v = u64::from_ne_bytes(xw.try_into().unwrap_or([0; 8]))
                ^ u64::from_ne_bytes(yw.try_into().unwrap_or([0; 8]));
            dw.copy_from_slice(&v.to_ne_bytes());
        }
    }
    for ((d, x), y) in d_blocks
        .into_remainder()
        .iter_mut()
        .zip(a_blocks.remainder())
        .zip(b_blocks.remainder())
    {
        *d = x ^ y;
    }
}

/// `dst ^= c·src` over the common length of both slices, with the fastest
/// kernel this CPU has: the Reed–Solomon inner loop (redset's
/// `redset_rs_reduce_buffer_multadd()` in SCR 3).
#[inline]
pub fn mul_add_into(dst: &mut [u8], src: &[u8], c: u8) {
    Kernel::best().mul_add_into(dst, src, c)
}

/// Products of c with every low nibble (lo[x] = c·x) and every high nibble
/// (hi[x] = c·(x << 4)); c·s = lo[s & 15] ^ hi[s >> 4] by distributivity.
fn nibble_tables(c: u8) -> ([u8; 16], [u8; 16]) {
    let row = &MUL[c as usize];
    let mut lo = [0u8; 16];
    let mut hi = [0u8; 16];
    for x in 0..16 {
        lo[x] = row[x];
        hi[x] = row[x << 4];
    }
    (lo, hi)
}

fn mul_add_row(dst: &mut [u8], src: &[u8], c: u8) {
    let row = &MUL[c as usize];
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= row[*s as usize];
    }
}

fn mul_add_nibble(dst: &mut [u8], src: &[u8], c: u8) {
    let (lo, hi) = nibble_tables(c);
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= lo[(*s & 15) as usize] ^ hi[(*s >> 4) as usize];
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `dst ^= c·src` 16 bytes at a time; `lo`/`hi` from `nibble_tables(c)`.
    ///
    /// # Safety
    /// The CPU must support SSSE3; `dst` and `src` have the same length.
    #[target_feature(enable = "ssse3")]
    pub(super) unsafe fn mul_add_ssse3(dst: &mut [u8], src: &[u8], lo: &[u8; 16], hi: &[u8; 16]) {
        assert_eq!(dst.len(), src.len());
        let n = dst.len() / 16 * 16;
        // SAFETY: lo/hi are 16 bytes; unaligned loads allowed.
        let (lo_t, hi_t) = unsafe {
            (
                _mm_loadu_si128(lo.as_ptr().cast()),
                _mm_loadu_si128(hi.as_ptr().cast()),
            )
        };
        let mask = _mm_set1_epi8(0x0f);
        let mut i = 0;
        while i < n {
            // SAFETY: i + 16 <= n <= len of both slices.
            unsafe {
                let s = _mm_loadu_si128(src.as_ptr().add(i).cast());
                let l = _mm_and_si128(s, mask);
                let h = _mm_and_si128(_mm_srli_epi64(s, 4), mask);
                let p = _mm_xor_si128(_mm_shuffle_epi8(lo_t, l), _mm_shuffle_epi8(hi_t, h));
                let d = _mm_loadu_si128(dst.as_ptr().add(i).cast());
                _mm_storeu_si128(dst.as_mut_ptr().add(i).cast(), _mm_xor_si128(d, p));
            }
            i += 16;
        }
        for (d, s) in dst[n..].iter_mut().zip(&src[n..]) {
            *d ^= lo[(*s & 15) as usize] ^ hi[(*s >> 4) as usize];
        }
    }

    /// `dst ^= c·src` 32 bytes at a time; `lo`/`hi` from `nibble_tables(c)`.
    ///
    /// # Safety
    /// The CPU must support AVX2; `dst` and `src` have the same length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mul_add_avx2(dst: &mut [u8], src: &[u8], lo: &[u8; 16], hi: &[u8; 16]) {
        assert_eq!(dst.len(), src.len());
        let n = dst.len() / 32 * 32;
        // SAFETY: lo/hi are 16 bytes; unaligned loads allowed.
        let (lo_t, hi_t) = unsafe {
            (
                _mm256_broadcastsi128_si256(_mm_loadu_si128(lo.as_ptr().cast())),
                _mm256_broadcastsi128_si256(_mm_loadu_si128(hi.as_ptr().cast())),
            )
        };
        let mask = _mm256_set1_epi8(0x0f);
        let mut i = 0;
        while i < n {
            // SAFETY: i + 32 <= n <= len of both slices.
            unsafe {
                let s = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                let l = _mm256_and_si256(s, mask);
                let h = _mm256_and_si256(_mm256_srli_epi64(s, 4), mask);
                let p =
                    _mm256_xor_si256(_mm256_shuffle_epi8(lo_t, l), _mm256_shuffle_epi8(hi_t, h));
                let d = _mm256_loadu_si256(dst.as_ptr().add(i).cast());
                _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), _mm256_xor_si256(d, p));
            }
            i += 32;
        }
        for (d, s) in dst[n..].iter_mut().zip(&src[n..]) {
            *d ^= lo[(*s & 15) as usize] ^ hi[(*s >> 4) as usize];
        }
    }

    /// Nibble product tables (lo, hi) of one coefficient.
    type Tables = ([u8; 16], [u8; 16]);

    /// `dst = ca·a ⊕ cb·b` 32 bytes at a time; `ta`/`tb` from
    /// `nibble_tables(ca)` / `nibble_tables(cb)`.
    ///
    /// # Safety
    /// The CPU must support AVX2; the three slices have the same length.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn mul2_avx2(dst: &mut [u8], a: &[u8], ta: &Tables, b: &[u8], tb: &Tables) {
        assert!(dst.len() == a.len() && dst.len() == b.len());
        let n = dst.len() / 32 * 32;
        // SAFETY: the tables are 16 bytes each; unaligned loads allowed.
        let [al, ah, bl, bh] = [&ta.0, &ta.1, &tb.0, &tb.1]
            .map(|t| unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast())) });
        let mask = _mm256_set1_epi8(0x0f);
        let mut i = 0;
        while i < n {
            // SAFETY: i + 32 <= n <= len of all three slices.
            unsafe {
                let x = _mm256_loadu_si256(a.as_ptr().add(i).cast());
                let y = _mm256_loadu_si256(b.as_ptr().add(i).cast());
                let px = _mm256_xor_si256(
                    _mm256_shuffle_epi8(al, _mm256_and_si256(x, mask)),
                    _mm256_shuffle_epi8(ah, _mm256_and_si256(_mm256_srli_epi64(x, 4), mask)),
                );
                let py = _mm256_xor_si256(
                    _mm256_shuffle_epi8(bl, _mm256_and_si256(y, mask)),
                    _mm256_shuffle_epi8(bh, _mm256_and_si256(_mm256_srli_epi64(y, 4), mask)),
                );
                _mm256_storeu_si256(dst.as_mut_ptr().add(i).cast(), _mm256_xor_si256(px, py));
            }
            i += 32;
        }
        for ((d, x), y) in dst[n..].iter_mut().zip(&a[n..]).zip(&b[n..]) {
            *d = ta.0[(*x & 15) as usize]
                ^ ta.1[(*x >> 4) as usize]
                ^ tb.0[(*y & 15) as usize]
                ^ tb.1[(*y >> 4) as usize];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Carry-less multiply and reduce bit by bit: an independent definition
    /// of the field product to check the tables against.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= (POLYNOMIAL & 0xff) as u8;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn tables_match_bitwise_product_for_all_pairs() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a}·{b}");
            }
        }
    }

    #[test]
    fn every_nonzero_element_has_an_inverse_and_two_generates_the_group() {
        for a in 1..=255u8 {
            let ia = inv(a).expect("nonzero has an inverse");
            assert_eq!(mul(a, ia), 1, "{a}");
        }
        assert_eq!(inv(0), None);
        assert_eq!(div(7, 0), None);
        let mut seen = [false; 256];
        for i in 0..255 {
            seen[pow(2, i) as usize] = true;
        }
        assert_eq!(seen.iter().filter(|s| **s).count(), 255);
        assert!(!seen[0]);
    }

    proptest! {
        #[test]
        fn field_axioms(a: u8, b: u8, c: u8) {
            prop_assert_eq!(mul(a, b), mul(b, a));
            prop_assert_eq!(mul(mul(a, b), c), mul(a, mul(b, c)));
            prop_assert_eq!(mul(a, add(b, c)), add(mul(a, b), mul(a, c)));
            prop_assert_eq!(add(add(a, b), c), add(a, add(b, c)));
            prop_assert_eq!(mul(a, 1), a);
            prop_assert_eq!(add(a, 0), a);
            prop_assert_eq!(add(a, a), 0);
            if b != 0 {
                prop_assert_eq!(div(mul(a, b), b), Some(a));
            }
        }

        #[test]
        fn pow_is_repeated_product(a: u8, n in 0u32..600) {
            let mut p = 1u8;
            for _ in 0..n {
                p = mul(p, a);
            }
            prop_assert_eq!(pow(a, n), p);
        }

        #[test]
        fn xor_into_matches_bytewise(
            dst in proptest::collection::vec(any::<u8>(), 0..300),
            src in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut got = dst.clone();
            xor_into(&mut got, &src);
            let n = dst.len().min(src.len());
            for i in 0..dst.len() {
                let want = if i < n { dst[i] ^ src[i] } else { dst[i] };
                prop_assert_eq!(got[i], want, "byte {}", i);
            }
        }

        #[test]
        fn every_kernel_computes_the_same_bytes(
            dst in proptest::collection::vec(any::<u8>(), 0..300),
            src in proptest::collection::vec(any::<u8>(), 0..300),
            c: u8,
            skip in 0usize..8,
        ) {
            // A start offset makes the SIMD kernels run on unaligned slices.
            let skip = skip.min(dst.len()).min(src.len());
            let n = dst.len().min(src.len());
            let mut want = dst.clone();
            for i in skip..n {
                want[i] ^= slow_mul(c, src[i]);
            }
            let kernels = Kernel::available();
            prop_assert!(kernels.contains(&Kernel::best()));
            for kernel in kernels {
                let mut got = dst.clone();
                kernel.mul_add_into(&mut got[skip..], &src[skip..], c);
                prop_assert_eq!(&got, &want, "kernel {:?}", kernel);
            }
            let mut got = dst.clone();
            mul_add_into(&mut got[skip..], &src[skip..], c);
            prop_assert_eq!(&got, &want);
        }

        #[test]
        fn every_kernel_multiplies_into_as_the_product_defines(
            dst in proptest::collection::vec(any::<u8>(), 0..300),
            src in proptest::collection::vec(any::<u8>(), 0..300),
            c in prop_oneof![Just(0u8), Just(1u8), any::<u8>()],
            skip in 0usize..8,
        ) {
            let n = dst.len().min(src.len());
            let skip = skip.min(n);
            let mut want = dst.clone();
            for i in skip..n {
                want[i] = slow_mul(c, src[i]);
            }
            for kernel in Kernel::available() {
                let mut got = dst.clone();
                kernel.mul_into(&mut got[skip..], &src[skip..], c);
                prop_assert_eq!(&got, &want, "kernel {:?}, {}·src", kernel, c);
            }
        }

        #[test]
        fn every_kernel_combines_two_sources_as_the_product_defines(
            dst in proptest::collection::vec(any::<u8>(), 0..300),
            a in proptest::collection::vec(any::<u8>(), 0..300),
            b in proptest::collection::vec(any::<u8>(), 0..300),
            // 0 and 1 a third of the time each: the special cases.
            ca in prop_oneof![Just(0u8), Just(1u8), any::<u8>()],
            cb in prop_oneof![Just(0u8), Just(1u8), any::<u8>()],
            skip in 0usize..8,
        ) {
            let n = dst.len().min(a.len()).min(b.len());
            let skip = skip.min(n);
            let mut want = dst.clone();
            for i in skip..n {
                want[i] = slow_mul(ca, a[i]) ^ slow_mul(cb, b[i]);
            }
            for kernel in Kernel::available() {
                let mut got = dst.clone();
                kernel.mul2_into(&mut got[skip..], (&a[skip..], ca), (&b[skip..], cb));
                prop_assert_eq!(&got, &want, "kernel {:?}, {}·a ⊕ {}·b", kernel, ca, cb);
            }
        }
    }
}
