//! The int8 products of the browser's CPU decoder with relaxed-SIMD dot products
//! (`i32x4.relaxed_dot_i8x16_i7x16_add_s`: sixteen multiply-adds an instruction, against
//! eight for SIMD128's `i32x4.dot_i16x8_s` over weights widened to int16).
//!
//! A wasm module that uses a relaxed-SIMD instruction anywhere fails to validate in a
//! browser without it, so this kernel is its own module: no allocator, no data, no stack,
//! one exported function over the page module's memory (imported). The page module calls it
//! through JavaScript only where the browser validated it and a self-check passed
//! (`transduce::host::int8::use_relaxed_dot`); elsewhere its SIMD128 kernel runs.
//!
//! The instruction is deterministic only when its second operand is 7-bit (0..=127, read
//! alike as signed and unsigned, which x86's `pmaddubsw` and Arm's `sdot` need): the
//! activations arrive as `qx + 64` (the host decoder quantizes them to −63..=63), and the
//! caller takes `64·Σₖ qw` off each column. Pairs of products stay inside int16
//! (2·127·127), so the sums are exact and equal every other kernel's.
#![no_std]

#[cfg(target_arch = "wasm32")]
use core::arch::wasm32::*;

#[cfg(target_arch = "wasm32")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// Rows of activations one pass over a column block covers.
#[cfg(target_arch = "wasm32")]
const ROWS: usize = 4;

/// Columns per panel of the weights: `transduce::host::int8`'s `PANEL` (its self-check of
/// this kernel spans several panels, so the two cannot disagree unnoticed).
#[cfg(target_arch = "wasm32")]
const PANEL: usize = 64;

/// `sums[i][j] = Σ_g Σ_t w[j's panel][g][j][t] · x[i][4g + t]` for `m` rows and all `n_padded` columns.
///
/// `w`: panels of [`PANEL`] columns (the last one narrower where `n_padded` is not a
/// multiple), one after another, each `[groups][width][4]` int8 (`n_padded` a multiple of
/// 8); `x`: `[m][4·groups]`
/// unsigned 7-bit values, 4-byte aligned rows; `sums`: `[m][n_padded]` int32.
///
/// # Safety
/// The pointers must cover those extents in the memory this module imports.
#[cfg(target_arch = "wasm32")]
#[unsafe(no_mangle)]
#[target_feature(enable = "simd128,relaxed-simd")]
pub unsafe extern "C" fn dot(
    w: *const i8,
    x: *const u32,
    sums: *mut i32,
    m: usize,
    groups: usize,
    n_padded: usize,
) {
    // Column blocks outer: a block's weights (8 columns × k) stay in the cache while every
    // row passes over them.
    let mut n0 = 0;
    while n0 < n_padded {
        let mut i = 0;
        while i < m {
            let rows = m - i;
            // SAFETY: the caller's extents; each call stays inside rows i.. and columns n0..n0 + 8.
            unsafe {
                if rows >= ROWS {
                    block::<4>(w, x, sums, i, n0, groups, n_padded);
                    i += 4;
                } else if rows == 3 {
                    block::<3>(w, x, sums, i, n0, groups, n_padded);
                    i += 3;
                } else if rows == 2 {
                    block::<2>(w, x, sums, i, n0, groups, n_padded);
                    i += 2;
                } else {
                    block::<1>(w, x, sums, i, n0, groups, n_padded);
                    i += 1;
                }
            }
        }
        n0 += 8;
    }
}

/// Rows `i..i + R`, columns `n0..n0 + 8`. `R` is a constant so the sums stay in registers.
#[cfg(target_arch = "wasm32")]
#[inline(always)]
unsafe fn block<const R: usize>(
    w: *const i8,
    x: *const u32,
    sums: *mut i32,
    i: usize,
    n0: usize,
    groups: usize,
    n_padded: usize,
) {
    let mut lo = [i32x4_splat(0); R];
    let mut hi = [i32x4_splat(0); R];
    // Columns n0..n0 + 8 lie in one panel (8 divides PANEL), where a group's columns are
    // the panel's width apart.
    let first = n0 / PANEL * PANEL;
    let stride = PANEL.min(n_padded - first) * 4;
    let start = first * groups * 4 + (n0 - first) * 4;
    for g in 0..groups {
        // SAFETY: group g's columns n0..n0 + 8 and rows i..i + R are inside the extents.
        unsafe {
            let p = w.add(start + g * stride);
            let b0 = v128_load(p as *const v128);
            let b1 = v128_load(p.add(16) as *const v128);
            for r in 0..R {
                let a = v128_load32_splat(x.add((i + r) * groups + g));
                lo[r] = i32x4_relaxed_dot_i8x16_i7x16_add(b0, a, lo[r]);
                hi[r] = i32x4_relaxed_dot_i8x16_i7x16_add(b1, a, hi[r]);
            }
        }
    }
    for r in 0..R {
        // SAFETY: row i + r's columns n0..n0 + 8 are inside `sums`.
        unsafe {
            let at = sums.add((i + r) * n_padded + n0);
            v128_store(at as *mut v128, lo[r]);
            v128_store(at.add(4) as *mut v128, hi[r]);
        }
    }
}
