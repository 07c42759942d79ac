//! The x86-64 kernels: AVX-512 VNNI and AVX2, both over the packed panels. VNNI's tiles
//! cover up to four rows of a panel; AVX2's a row at a time (the panel read in order).

use super::matrix::{COLUMN_PAD, GROUP, Int8Matrix, PANEL};
use std::arch::x86_64::*;

/// Rows of activations one tile covers; its columns are up to four registers (sixteen
/// registers of sums: six rows measured a third slower, spilling).
const ROWS: usize = 4;

/// # Safety
/// The CPU must have AVX-512 F, BW and VNNI; `x` holds `scales.len()` rows of
/// `w.k_padded` values qx + 128 (unsigned), `out` as many rows of `w.n`.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub unsafe fn vnni(w: &Int8Matrix, x: &[i8], scales: &[f32], out: &mut [f32]) {
    let m = scales.len();
    // One panel per column block (PANEL is 64 columns: four registers).
    const _: () = assert!(PANEL == 64);
    for n0 in (0..w.n_padded).step_by(PANEL) {
        let blocks = w.panel(n0).1 / 16;
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(ROWS);
            // SAFETY: forwarded from the caller.
            unsafe {
                match (rows, blocks) {
                    (4, 4) => vnni_tile::<4, 4>(w, x, scales, out, i, n0),
                    (4, 3) => vnni_tile::<4, 3>(w, x, scales, out, i, n0),
                    (4, 2) => vnni_tile::<4, 2>(w, x, scales, out, i, n0),
                    (4, _) => vnni_tile::<4, 1>(w, x, scales, out, i, n0),
                    (3, 4) => vnni_tile::<3, 4>(w, x, scales, out, i, n0),
                    (3, 3) => vnni_tile::<3, 3>(w, x, scales, out, i, n0),
                    (3, 2) => vnni_tile::<3, 2>(w, x, scales, out, i, n0),
                    (3, _) => vnni_tile::<3, 1>(w, x, scales, out, i, n0),
                    (2, 4) => vnni_tile::<2, 4>(w, x, scales, out, i, n0),
                    (2, 3) => vnni_tile::<2, 3>(w, x, scales, out, i, n0),
                    (2, 2) => vnni_tile::<2, 2>(w, x, scales, out, i, n0),
                    (2, _) => vnni_tile::<2, 1>(w, x, scales, out, i, n0),
                    (_, 4) => vnni_tile::<1, 4>(w, x, scales, out, i, n0),
                    (_, 3) => vnni_tile::<1, 3>(w, x, scales, out, i, n0),
                    (_, 2) => vnni_tile::<1, 2>(w, x, scales, out, i, n0),
                    (_, _) => vnni_tile::<1, 1>(w, x, scales, out, i, n0),
                }
            }
            i += rows;
        }
    }
}

/// Rows `i..i + R` × columns `n0..n0 + 16·B`: the sums in `R·B` registers of 16
/// columns, one 4-value group of the inner dimension per instruction.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
#[inline]
unsafe fn vnni_tile<const R: usize, const B: usize>(
    w: &Int8Matrix,
    x: &[i8],
    scales: &[f32],
    out: &mut [f32],
    i: usize,
    n0: usize,
) {
    // SAFETY: forwarded from the caller (`vnni`).
    unsafe {
        let mut acc = [[_mm512_setzero_si512(); B]; R];
        let groups = w.k_padded / GROUP;
        let (start, width) = w.panel(n0);
        let stride = width * GROUP;
        let weights = w.packed.as_ptr().add(start);
        let rows = x.as_ptr().add(i * w.k_padded);
        for g in 0..groups {
            let mut b = [_mm512_setzero_si512(); B];
            for (c, b) in b.iter_mut().enumerate() {
                *b = _mm512_loadu_si512(weights.add(g * stride + c * 64) as *const _);
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let quad = (rows.add(r * w.k_padded + g * GROUP) as *const i32).read_unaligned();
                let a = _mm512_set1_epi32(quad);
                for (acc, &b) in acc.iter_mut().zip(&b) {
                    *acc = _mm512_dpbusd_epi32(*acc, a, b);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let sx = _mm512_set1_ps(scales[i + r]);
            for (c, &acc) in acc.iter().enumerate() {
                let j = n0 + c * 16;
                if j >= w.n {
                    break;
                }
                let lanes = (w.n - j).min(16);
                let mask: __mmask16 = if lanes == 16 { !0 } else { (1 << lanes) - 1 };
                let sums = _mm512_maskz_loadu_epi32(mask, w.sums.as_ptr().add(j));
                let exact = _mm512_sub_epi32(acc, _mm512_slli_epi32::<7>(sums));
                let scale =
                    _mm512_mul_ps(sx, _mm512_maskz_loadu_ps(mask, w.scales.as_ptr().add(j)));
                let mut y = _mm512_mul_ps(_mm512_cvtepi32_ps(exact), scale);
                if let Some(bias) = &w.bias {
                    y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, bias.as_ptr().add(j)));
                }
                _mm512_mask_storeu_ps(out.as_mut_ptr().add((i + r) * w.n + j), mask, y);
            }
        }
    }
}

/// # Safety
/// The CPU must have AVX2; `x` holds `scales.len()` rows of `w.k_padded` values in
/// −64..=63 (quantize_activations), `out` as many rows of `w.n`. `x` is changed: each value
/// becomes qx + 64.
#[target_feature(enable = "avx2")]
pub unsafe fn avx2(w: &Int8Matrix, x: &mut [i8], scales: &[f32], out: &mut [f32]) {
    // qx + 64 in 0..=127 as unsigned bytes: `vpmaddubsw` multiplies them by the signed
    // weights without saturating (2·127·127 < 2¹⁵), and the `64·Σₖ qw[k, j]` this adds
    // is taken off per column, as the VNNI kernel takes off 128·Σ. Once here rather than
    // in the inner loop.
    for q in x.iter_mut() {
        debug_assert!((-64..=63).contains(q), "activation {q} outside −64..=63");
        *q += 64;
    }
    let m = scales.len();
    // Blocks of 16 columns lie inside one panel: panels and the padding are multiples.
    const _: () = assert!(PANEL == 64 && COLUMN_PAD.is_multiple_of(16));
    // A row at a time across whole panels, each read in order: the next rows find it in
    // cache. Tiles of four rows × 16 columns (each weight loaded once for four rows) were
    // slower at every shape measured (`examples/int8_gemm.rs`, TRANSDUCE_CPU_ISA=avx2):
    // a 16-column block is a quarter of each 256-byte group of a panel, so the tiles read
    // it in strides, which came in from memory at a quarter of the speed (4 × 512 × 58,101:
    // 25 against 65 G MAC/s), and the multiply ports, not the loads, bound both.
    for n0 in (0..w.n_padded).step_by(PANEL) {
        let blocks = w.panel(n0).1 / 16;
        for i in 0..m {
            // SAFETY: forwarded from the caller.
            unsafe {
                match blocks {
                    4 => avx2_row::<4>(w, x, scales, out, i, n0),
                    3 => avx2_row::<3>(w, x, scales, out, i, n0),
                    2 => avx2_row::<2>(w, x, scales, out, i, n0),
                    _ => avx2_row::<1>(w, x, scales, out, i, n0),
                }
            }
        }
    }
}

/// The sums of one 4-value group of row `a` (broadcast) against 16 columns `b0`, `b1`
/// (`vpmaddubsw` into pairs, `vpmaddwd` into the group's sum), added to `acc`.
#[target_feature(enable = "avx2")]
#[inline]
fn avx2_step(acc: &mut [__m256i; 2], a: __m256i, b0: __m256i, b1: __m256i) {
    let ones = _mm256_set1_epi16(1);
    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(a, b0), ones);
    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(a, b1), ones);
    acc[0] = _mm256_add_epi32(acc[0], p0);
    acc[1] = _mm256_add_epi32(acc[1], p1);
}

/// Row `i` × the `16·B` columns of the panel at `n0`: the sums in `2·B` registers, the
/// panel read in order (one group's `16·B`·4 bytes after another).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn avx2_row<const B: usize>(
    w: &Int8Matrix,
    x: &[i8],
    scales: &[f32],
    out: &mut [f32],
    i: usize,
    n0: usize,
) {
    // SAFETY: forwarded from the caller (`avx2`).
    unsafe {
        let mut acc = [[_mm256_setzero_si256(); 2]; B];
        let groups = w.k_padded / GROUP;
        let (start, width) = w.panel(n0);
        let stride = width * GROUP;
        let weights = w.packed.as_ptr().add(start);
        let row = x.as_ptr().add(i * w.k_padded);
        for g in 0..groups {
            let a = _mm256_set1_epi32((row.add(g * GROUP) as *const i32).read_unaligned());
            let group = weights.add(g * stride);
            for (c, acc) in acc.iter_mut().enumerate() {
                let b0 = _mm256_loadu_si256(group.add(c * 64) as *const _);
                let b1 = _mm256_loadu_si256(group.add(c * 64 + 32) as *const _);
                avx2_step(acc, a, b0, b1);
            }
        }
        for (c, acc) in acc.iter().enumerate() {
            avx2_store(w, acc, scales[i], out, i, n0 + c * 16);
        }
    }
}

/// Row `r`'s sums over columns `j0..j0 + 16` (two registers of 8) to f32 in `out`: the
/// `64·Σₖ qw[k, j]` taken off, scaled, the bias added; columns past `w.n` dropped.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn avx2_store(
    w: &Int8Matrix,
    acc: &[__m256i; 2],
    sx: f32,
    out: &mut [f32],
    r: usize,
    j0: usize,
) {
    // SAFETY: columns below `w.n` index `sums`, `scales`, `bias` and `out`'s row `r`.
    unsafe {
        let row = r * w.n;
        for (c, &acc) in acc.iter().enumerate() {
            let j = j0 + c * 8;
            if j >= w.n {
                break;
            }
            if j + 8 > w.n {
                // The last columns: the same arithmetic, one at a time.
                let mut sums = [0i32; 8];
                _mm256_storeu_si256(sums.as_mut_ptr() as *mut _, acc);
                let lanes = w.n - j;
                for (s, &total) in sums.iter_mut().zip(&w.sums[j..w.n]) {
                    *s -= total << 6;
                }
                w.finish(&sums[..lanes], sx, j, &mut out[row + j..row + w.n]);
                break;
            }
            let totals = _mm256_loadu_si256(w.sums.as_ptr().add(j) as *const _);
            let exact = _mm256_sub_epi32(acc, _mm256_slli_epi32::<6>(totals));
            let scale = _mm256_mul_ps(
                _mm256_set1_ps(sx),
                _mm256_loadu_ps(w.scales.as_ptr().add(j)),
            );
            let mut y = _mm256_mul_ps(_mm256_cvtepi32_ps(exact), scale);
            if let Some(bias) = &w.bias {
                y = _mm256_add_ps(y, _mm256_loadu_ps(bias.as_ptr().add(j)));
            }
            _mm256_storeu_ps(out.as_mut_ptr().add(row + j), y);
        }
    }
}
