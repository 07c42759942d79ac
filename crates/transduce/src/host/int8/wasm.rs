//! The wasm32 kernels: SIMD128's `i32x4.dot_i16x8_s`, and the relaxed-SIMD kernel's layout.

use std::arch::wasm32::*;
use std::cell::RefCell;

use super::matrix::{GROUP, Int8Matrix, PANEL};
use super::relaxed::relaxed;

thread_local! {
    static SUMS: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
}

/// The product over the relaxed kernel's layout: by the kernel where it is registered,
/// else (withdrawn after the matrix was made) by plain loops.
pub fn quads(w: &Int8Matrix, x: &mut [i8], scales: &[f32], out: &mut [f32]) {
    let m = scales.len();
    let groups = w.k_padded / 4;
    // qx + 64: 1..=127 in the activations, 64 in their padding (whose weights are 0).
    for q in x[..m * w.k_padded].iter_mut() {
        *q += 64;
    }
    SUMS.with_borrow_mut(|sums| {
        sums.clear();
        sums.resize(m * w.n_padded, 0);
        match relaxed() {
            // SAFETY: the extents the kernel reads and writes are the ones just sized.
            Some(kernel) => unsafe {
                kernel(
                    w.quads.as_ptr(),
                    x.as_ptr(),
                    sums.as_mut_ptr(),
                    m,
                    groups,
                    w.n_padded,
                )
            },
            None => {
                for (row, sums) in x
                    .chunks_exact(w.k_padded)
                    .zip(sums.chunks_exact_mut(w.n_padded))
                {
                    for (sums, (start, width)) in sums.chunks_mut(PANEL).zip(w.panels()) {
                        let panel = &w.quads[start..start + w.k_padded * width];
                        for (quad, block) in row.chunks_exact(4).zip(panel.chunks_exact(width * 4))
                        {
                            for (sum, wq) in sums.iter_mut().zip(block.chunks_exact(4)) {
                                *sum += quad
                                    .iter()
                                    .zip(wq)
                                    .map(|(&a, &b)| a as i32 * b as i32)
                                    .sum::<i32>();
                            }
                        }
                    }
                }
            }
        }
        for (i, row) in sums.chunks_exact_mut(w.n_padded).enumerate() {
            let row = &mut row[..w.n];
            for (s, &c) in row.iter_mut().zip(&w.sums) {
                *s -= 64 * c;
            }
            w.finish_row(row, scales[i], &mut out[i * w.n..(i + 1) * w.n]);
        }
    })
}

/// Rows of activations one pass over a column block covers.
const ROWS: usize = 4;
/// Columns per block: two vectors of four int32 sums per row.
const COLUMNS: usize = 8;
const _: () = assert!(PANEL.is_multiple_of(COLUMNS));

/// `i32x4.dot_i16x8_s` over the int16 pairs: four columns × two inner values per
/// instruction; each weight load serves up to [`ROWS`] rows, each activation pair
/// (splatted once) [`COLUMNS`] columns. Column blocks are the outer loop, as in the
/// VNNI kernel: a block's weights (8 columns × k) stay in the L1 cache while every row
/// block passes over them, instead of the whole matrix streaming in once per four rows
/// (64 rows, a beam-4 batch of 16 sentences, read the output projection 16 times).
pub fn simd128(w: &Int8Matrix, x: &[i8], scales: &[f32], out: &mut [f32]) {
    let m = scales.len();
    let groups = w.k_padded / GROUP;
    // Each row's activations as int16 pairs, one u32 per pair: the splatted operand,
    // made once instead of at every product.
    let pairs: Vec<u32> = x[..m * w.k_padded]
        .chunks_exact(GROUP)
        .map(|p| (p[0] as i16 as u16 as u32) | ((p[1] as i16 as u16 as u32) << 16))
        .collect();
    // Columns past n (padding) are not computed.
    for n0 in (0..w.n).step_by(COLUMNS) {
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(ROWS);
            let xs = &pairs[i * groups..(i + rows) * groups];
            let mut sums = [[0i32; COLUMNS]; ROWS];
            match rows {
                4 => block::<4>(w, xs, n0, &mut sums),
                3 => block::<3>(w, xs, n0, &mut sums),
                2 => block::<2>(w, xs, n0, &mut sums),
                _ => block::<1>(w, xs, n0, &mut sums),
            }
            let cols = (w.n - n0).min(COLUMNS);
            for (r, sums) in sums.iter().enumerate().take(rows) {
                let row = &mut out[(i + r) * w.n..(i + r + 1) * w.n];
                w.finish(&sums[..cols], scales[i + r], n0, &mut row[n0..n0 + cols]);
            }
            i += rows;
        }
    }
}

/// The int32 sums of `R` rows (`xs`: `[R][groups]` pairs) over columns `n0..n0 + 8`,
/// into `sums[r]`. `R` is a constant so the accumulators stay in registers.
#[inline(always)]
fn block<const R: usize>(w: &Int8Matrix, xs: &[u32], n0: usize, sums: &mut [[i32; COLUMNS]; ROWS]) {
    let groups = w.k_padded / GROUP;
    // n0..n0 + 8 lies in one panel (PANEL is a multiple of 8), where group g's columns
    // are `width` apart.
    let (start, width) = w.panel(n0);
    let stride = width * GROUP;
    let first = start + (n0 % PANEL) * GROUP;
    assert_eq!(xs.len(), R * groups);
    assert!(n0 % PANEL + COLUMNS <= width && start + groups * stride <= w.packed.len());
    let mut lo = [i32x4_splat(0); R];
    let mut hi = [i32x4_splat(0); R];
    for g in 0..groups {
        // SAFETY: group g's columns n0..n0 + 8 lie inside `packed` (checked above).
        let (b0, b1) = unsafe {
            let p = w.packed.as_ptr().add(first + g * stride);
            (
                v128_load(p as *const v128),
                v128_load(p.add(4 * GROUP) as *const v128),
            )
        };
        for r in 0..R {
            // SAFETY: r < R and g < groups, and xs holds R × groups pairs (checked
            // above): no bounds check in the innermost loop.
            let a = unsafe { v128_load32_splat(xs.as_ptr().add(r * groups + g)) };
            lo[r] = i32x4_add(lo[r], i32x4_dot_i16x8(b0, a));
            hi[r] = i32x4_add(hi[r], i32x4_dot_i16x8(b1, a));
        }
    }
    for r in 0..R {
        // SAFETY: sums[r] holds 8 i32.
        unsafe {
            let at = sums[r].as_mut_ptr();
            v128_store(at as *mut v128, lo[r]);
            v128_store(at.add(4) as *mut v128, hi[r]);
        }
    }
}
