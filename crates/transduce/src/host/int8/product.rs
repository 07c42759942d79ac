//! The products `x·W` of an [`Int8Matrix`]: activations quantized per row and the kernel
//! the target has ([`Int8Matrix::apply`]), or the int8 weights widened to f32 tile by tile
//! ([`Int8Matrix::apply_widened`]).

use super::matrix::{GROUP, Int8Matrix};
use super::quantize::quantize_activations;
#[cfg(target_arch = "wasm32")]
use super::wasm;
#[cfg(target_arch = "x86_64")]
use super::x86;

thread_local! {
    /// Quantized activations and their scales, reused across products.
    static SCRATCH: std::cell::RefCell<(Vec<i8>, Vec<f32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

/// Columns [`Int8Matrix::apply_widened`] widens at a time: a tile of `k × 64` f32 (at most
/// 512 KB for the FFN's 2,048 inputs) stays in cache while every row of the input reads it.
pub const WIDE_TILE: usize = 64;
const _: () = assert!(WIDE_TILE == super::matrix::PANEL);

thread_local! {
    /// The widened tile of [`Int8Matrix::apply_widened`].
    static WIDE_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Int8Matrix {
    /// `out[m, n] = x[m, k] · (q·scale) (+ bias)` in f32: the products of the f32 weights
    /// this matrix stands for (an int8 bundle's weights are `q·scale` exactly: what a GPU
    /// multiplies with), without holding them in f32. Each tile of [`WIDE_TILE`] columns is
    /// widened into a scratch buffer once per call and every row of `x` accumulates over
    /// the inputs in order, the same order on every target: native and wasm agree bit for
    /// bit.
    pub fn apply_widened(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        assert_eq!(x.len(), m * self.k);
        out.clear();
        out.resize(m * self.n, 0.0);
        WIDE_SCRATCH.with_borrow_mut(|tile| {
            // The tile is always WIDE_TILE wide (zeros past the last column), so that the
            // accumulators below are fixed-size arrays the compiler keeps in registers.
            tile.clear();
            tile.resize(self.k * WIDE_TILE, 0.0);
            for j0 in (0..self.n).step_by(WIDE_TILE) {
                let width = WIDE_TILE.min(self.n - j0);
                self.widen_tile(j0, width, tile);
                // Two rows at a time: each weight loaded once for both; every output still
                // sums its inputs in order, from 0.
                for r in (0..m).step_by(2) {
                    let pair = r + 1 < m;
                    let (mut a0, mut a1) = ([0.0f32; WIDE_TILE], [0.0f32; WIDE_TILE]);
                    let x0 = &x[r * self.k..(r + 1) * self.k];
                    let x1 = if pair {
                        &x[(r + 1) * self.k..(r + 2) * self.k]
                    } else {
                        x0
                    };
                    for (i, w) in tile.chunks_exact(WIDE_TILE).enumerate() {
                        let w: &[f32; WIDE_TILE] = w.try_into().expect("a whole tile row");
                        let (v0, v1) = (x0[i], x1[i]);
                        for t in 0..WIDE_TILE {
                            a0[t] += v0 * w[t];
                            a1[t] += v1 * w[t];
                        }
                    }
                    out[r * self.n + j0..r * self.n + j0 + width].copy_from_slice(&a0[..width]);
                    if pair {
                        out[(r + 1) * self.n + j0..(r + 1) * self.n + j0 + width]
                            .copy_from_slice(&a1[..width]);
                    }
                }
            }
        });
        if let Some(bias) = &self.bias {
            for row in out.chunks_exact_mut(self.n.max(1)) {
                for (y, b) in row.iter_mut().zip(bias) {
                    *y += b;
                }
            }
        }
    }

    /// Columns `j0..j0 + width` widened to `q·scale` into `tile` (`[k, WIDE_TILE]`, row
    /// major; the columns past `width` are left as they are: zero).
    #[allow(clippy::unnecessary_cast)]
    fn widen_tile(&self, j0: usize, width: usize, tile: &mut [f32]) {
        let scales = &self.scales[j0..j0 + width];
        if width < WIDE_TILE {
            tile.fill(0.0);
        }
        for i in 0..self.k {
            let row = &mut tile[i * WIDE_TILE..i * WIDE_TILE + width];
            if self.quads.is_empty() {
                // j0..j0 + width lies in one panel (WIDE_TILE is PANEL wide), where
                // consecutive columns are GROUP values apart.
                let column = &self.packed[self.offset(i, j0)..];
                for (t, (w, &s)) in row.iter_mut().zip(scales).enumerate() {
                    *w = column[t * GROUP] as i8 as f32 * s;
                }
            } else {
                let column = &self.quads[self.quad_offset(i, j0)..];
                for (t, (w, &s)) in row.iter_mut().zip(scales).enumerate() {
                    *w = column[t * 4] as f32 * s;
                }
            }
        }
    }

    /// `out[m, n] = x[m, k] · W (+ bias)`, activations quantized per row.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        assert_eq!(x.len(), m * self.k);
        SCRATCH.with_borrow_mut(|(quantized, row_scales)| {
            // Only the padding past k must be zero: quantize_row writes the rest.
            quantized.resize(m * self.k_padded, 0);
            if self.k_padded > self.k {
                for row in quantized.chunks_exact_mut(self.k_padded) {
                    row[self.k..].fill(0);
                }
            }
            row_scales.clear();
            for (row, q) in x
                .chunks_exact(self.k.max(1))
                .zip(quantized.chunks_exact_mut(self.k_padded.max(1)))
            {
                row_scales.push(quantize_activations(row, q));
            }
            // Every element is written by the kernels: resizing a reused buffer zeroes
            // only what it grows by.
            out.truncate(m * self.n);
            out.resize(m * self.n, 0.0);
            self.apply_quantized(&mut quantized[..m * self.k_padded], row_scales, out);
        })
    }

    /// `out[m, n]` from activations already quantized: `m` rows of `k_padded` (zero past
    /// `k`) and their scales. `x` may be changed (the VNNI kernel flips its sign bits).
    fn apply_quantized(&self, x: &mut [i8], row_scales: &[f32], out: &mut [f32]) {
        let m = row_scales.len();
        if m == 0 || self.n == 0 {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            if crate::host::isa::avx512_vnni() {
                // qx + 128 as unsigned bytes, once here rather than in the inner loop.
                for q in x.iter_mut() {
                    *q ^= i8::MIN;
                }
                // SAFETY: the CPU has the features (just checked); shapes as documented.
                return unsafe { x86::vnni(self, x, row_scales, out) };
            }
            if crate::host::isa::avx2() {
                // SAFETY: as above; `x` is in −63..=63 (quantize_activations).
                return unsafe { x86::avx2(self, x, row_scales, out) };
            }
        }
        #[cfg(target_arch = "wasm32")]
        {
            if self.quads.is_empty() {
                wasm::simd128(self, x, row_scales, out)
            } else {
                wasm::quads(self, x, row_scales, out)
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        super::portable::product(self, x, row_scales, out)
    }
}
