//! The x86-64 kernels: AVX-512 VNNI and AVX2.

use super::matrix::{GROUP, Int8Matrix, PANEL};
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
/// The CPU must have AVX2; shapes as for [`vnni`].
#[target_feature(enable = "avx2")]
pub unsafe fn avx2(w: &Int8Matrix, x: &[i8], scales: &[f32], out: &mut [f32]) {
    // SAFETY: forwarded from the caller.
    unsafe {
        let mut sums = vec![0i32; w.n_padded];
        let groups = w.k_padded / GROUP;
        let ones = _mm256_set1_epi16(1);
        for (i, &sx) in scales.iter().enumerate() {
            let row = x.as_ptr().add(i * w.k_padded);
            // Blocks of 32 columns, inside one panel (PANEL is a multiple of 32).
            const _: () = assert!(PANEL.is_multiple_of(32));
            for n0 in (0..w.n_padded).step_by(32) {
                let (start, width) = w.panel(n0);
                let stride = width * GROUP;
                let first = start + (n0 % PANEL) * GROUP;
                let blocks = ((width - n0 % PANEL) / 8).min(4);
                let mut acc = [_mm256_setzero_si256(); 4];
                for g in 0..groups {
                    let quad = (row.add(g * GROUP) as *const i32).read_unaligned();
                    let a = _mm256_set1_epi32(quad);
                    let magnitude = _mm256_abs_epi8(a);
                    for (c, acc) in acc.iter_mut().enumerate().take(blocks) {
                        let b = _mm256_loadu_si256(
                            w.packed.as_ptr().add(first + g * stride + c * 8 * GROUP) as *const _,
                        );
                        let pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(b, a));
                        *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(pairs, ones));
                    }
                }
                for (c, acc) in acc.iter().enumerate().take(blocks) {
                    _mm256_storeu_si256(sums.as_mut_ptr().add(n0 + c * 8) as *mut _, *acc);
                }
            }
            w.finish_row(&sums[..w.n], sx, &mut out[i * w.n..(i + 1) * w.n]);
        }
    }
}
