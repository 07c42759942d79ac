//! int8 products for the host decoder: weights quantized per output column, activations
//! per row on the fly, int8 × int8 summed exactly in int32, then scaled back to f32.
//!
//! `y[i, j] = sx[i]·sw[j]·Σₖ qx[i, k]·qw[k, j] + b[j]` with `qx = round(x / sx)`,
//! `sx = max|x[i, ·]| / 63` (symmetric, per row on the fly, as CTranslate2 and intgemm
//! quantize activations, in 7 bits), and `qw`, `sw` per output column of the weight (per
//! row of the bundle's `[out, in]` tensor) with `sw = max|w| / 127`. Weights stay in
//! −127..=127 and activations in −63..=63, so every kernel's sum is exact: the kernels
//! differ in speed only, and native and wasm builds give the same bits.
//!
//! Why 7-bit activations: the browser's fastest int8 product, relaxed-SIMD's
//! `i32x4.relaxed_dot_i8x16_i7x16_add_s`, is deterministic only when one operand is 7-bit
//! (`qx + 64` here), and every build must compute alike. Measured (docs/RESULTS.md, "7-bit
//! activations"): at most 0.25 BLEU on any val against f32 arithmetic, and 2.1–3.2× the
//! SIMD128 kernel's speed in Chromium (docs/BENCHMARKS.md, "Relaxed SIMD").
//!
//! Kernels, chosen at run time where the CPU varies:
//! - x86-64 with AVX-512 VNNI: `vpdpbusd` (64 multiply-adds an instruction) on unsigned
//!   activations `qx + 128`, the `128·Σₖ qw[k, j]` this adds taken off per column;
//! - x86-64 with AVX2: `vpmaddubsw` on |qx| and qw carrying qx's sign (at most
//!   2·63·127 per pair, inside i16), widened by `vpmaddwd`;
//! - wasm32 where the browser has relaxed SIMD: the `transduce-relaxed` module's kernel
//!   ([`use_relaxed_dot`]) on `qx + 64`, `64·Σₖ qw[k, j]` taken off per column;
//! - wasm32 (built with SIMD128) otherwise: `i32x4.dot_i16x8_s` over weights kept widened
//!   to i16;
//! - elsewhere, plain loops.

thread_local! {
    /// Quantized activations and their scales, reused across products.
    static SCRATCH: std::cell::RefCell<(Vec<i8>, Vec<f32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

/// The largest quantized magnitude of a weight.
pub const QMAX: f32 = 127.0;

/// The largest quantized magnitude of an activation: 7 bits (the module docs say why).
pub const QMAX_ACTIVATION: f32 = 63.0;

/// Quantizes one row of weights symmetrically into `out` (`row.len()` values; the rest of
/// `out` is left as it is) and returns its scale `s`: `row ≈ s·out`, `|out| ≤ 127`. A row
/// of zeros has scale 0.
pub fn quantize_row(row: &[f32], out: &mut [i8]) -> f32 {
    quantize_row_to(row, out, QMAX)
}

/// [`quantize_row`] for a row of activations: `|out| ≤ 63`.
pub fn quantize_activations(row: &[f32], out: &mut [i8]) -> f32 {
    quantize_row_to(row, out, QMAX_ACTIVATION)
}

fn quantize_row_to(row: &[f32], out: &mut [i8], qmax: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just checked); the same code, the same values.
        return unsafe { quantize_row_avx2(row, out, qmax) };
    }
    quantize_row_lanes(row, out, qmax)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn quantize_row_avx2(row: &[f32], out: &mut [i8], qmax: f32) -> f32 {
    quantize_row_lanes(row, out, qmax)
}

#[inline(always)]
fn quantize_row_lanes(row: &[f32], out: &mut [i8], qmax: f32) -> f32 {
    let big = super::rows::max_abs(row);
    if big == 0.0 || !big.is_finite() {
        out[..row.len()].fill(0);
        return if big.is_finite() { 0.0 } else { f32::NAN };
    }
    let inverse = qmax / big;
    // Round to nearest, ties to even, by adding and taking off 1.5·2²³ (exact for
    // |v| ≤ 2²²): plain SSE2 arithmetic that vectorizes, where `round_ties_even` is a
    // libm call on CPUs without SSE4.1's `roundps` in the baseline.
    const ROUND: f32 = 12_582_912.0;
    for (q, &v) in out.iter_mut().zip(row) {
        let rounded = (v * inverse).clamp(-qmax, qmax) + ROUND - ROUND;
        // SAFETY: `rounded` is a whole number in −qmax..=qmax (every value is finite: their
        // largest magnitude is), so the conversion is exact; the unchecked form spares
        // the saturating one's checks, which keep the loop from vectorizing.
        *q = unsafe { rounded.to_int_unchecked::<i32>() } as i8;
    }
    big / qmax
}

/// [`quantize_row`] on a given `scale` (a row's step): `None` where the row does not fit it
/// (a value beyond `QMAX·scale` by more than half a step, or a scale that is not positive).
/// Re-quantizing a fine-tuned row on the scale it shipped with puts every value that moved
/// less than half a step back exactly where it was.
pub fn quantize_row_on(row: &[f32], out: &mut [i8], scale: f32) -> Option<()> {
    if !(scale > 0.0 && scale.is_finite()) {
        return None;
    }
    let inverse = 1.0 / scale;
    let limit = QMAX + 0.5;
    if super::rows::max_abs(row) * inverse >= limit {
        return None;
    }
    for (q, &v) in out.iter_mut().zip(row) {
        *q = (v * inverse).round_ties_even().clamp(-QMAX, QMAX) as i8;
    }
    Some(())
}

/// Quantizes a row-major matrix of `cols` columns row by row ([`quantize_row`]): the int8
/// values and one scale per row, the bundle's `[out, in]` layout.
pub fn quantize_rows(values: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    let cols = cols.max(1);
    let mut q = vec![0i8; values.len()];
    let scales = values
        .chunks_exact(cols)
        .zip(q.chunks_exact_mut(cols))
        .map(|(row, q)| quantize_row(row, q))
        .collect();
    (q, scales)
}

/// [`quantize_rows`] on the scales `on` where the rows fit them ([`quantize_row_on`]),
/// on their own elsewhere.
pub fn quantize_rows_on(values: &[f32], cols: usize, on: &[f32]) -> (Vec<i8>, Vec<f32>) {
    let cols = cols.max(1);
    let mut q = vec![0i8; values.len()];
    let scales = values
        .chunks_exact(cols)
        .zip(q.chunks_exact_mut(cols))
        .zip(on)
        .map(|((row, q), &scale)| match quantize_row_on(row, q, scale) {
            Some(()) => scale,
            None => quantize_row(row, q),
        })
        .collect();
    (q, scales)
}

/// Values in the packed weight layout: native kernels read int8 quads
/// (`[k/4][n][4]`), the wasm kernel int16 pairs (`[k/2][n][2]`).
#[cfg(not(target_arch = "wasm32"))]
type Packed = i8;
#[cfg(target_arch = "wasm32")]
type Packed = i16;

/// Columns [`Int8Matrix::apply_widened`] widens at a time: a tile of `k × 64` f32 (at most
/// 512 KB for the FFN's 2,048 inputs) stays in cache while every row of the input reads it.
pub const WIDE_TILE: usize = 64;

thread_local! {
    /// The widened tile of [`Int8Matrix::apply_widened`].
    static WIDE_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Inner-dimension values per packed group.
#[cfg(not(target_arch = "wasm32"))]
const GROUP: usize = 4;
#[cfg(target_arch = "wasm32")]
const GROUP: usize = 2;

/// The inner dimension is padded to a multiple of this (whole quads for every layout).
const K_PAD: usize = 4;

/// Columns are padded to a multiple of this (one 512-bit register of int32 sums).
const COLUMN_PAD: usize = 16;

/// A weight matrix `[k, n]` (`x·W`) quantized per output column and packed for the
/// kernels, with its bias.
#[derive(Clone, Debug)]
pub struct Int8Matrix {
    /// Inner dimension (input features) and output columns.
    pub k: usize,
    pub n: usize,
    /// `k` rounded up to a whole group, `n` to [`COLUMN_PAD`].
    k_padded: usize,
    n_padded: usize,
    /// `[k_padded / GROUP][n_padded][GROUP]`; padding is zero. Empty when `quads` holds
    /// the weights.
    packed: Vec<Packed>,
    /// wasm32 with the relaxed-SIMD kernel registered when the matrix was made: int8
    /// `[k_padded / 4][n_padded][4]` (its layout); empty otherwise.
    quads: Vec<i8>,
    /// Per output column: the scale, and Σₖ qw (the correction of the kernels that add an
    /// offset to the activations).
    scales: Vec<f32>,
    sums: Vec<i32>,
    pub bias: Option<Vec<f32>>,
}

impl Int8Matrix {
    /// Quantizes a row-major `[k, n]` f32 matrix per output column.
    pub fn quantize(k: usize, n: usize, data: &[f32], bias: Option<&[f32]>) -> Int8Matrix {
        assert_eq!(data.len(), k * n);
        let mut column = vec![0.0f32; k];
        let mut q = vec![0i8; k];
        let mut quantized = vec![0i8; n * k];
        let mut scales = Vec::with_capacity(n);
        for j in 0..n {
            for (i, c) in column.iter_mut().enumerate() {
                *c = data[i * n + j];
            }
            scales.push(quantize_row(&column, &mut q));
            quantized[j * k..(j + 1) * k].copy_from_slice(&q);
        }
        Int8Matrix::from_rows(k, n, &quantized, scales, bias.map(<[f32]>::to_vec))
    }

    /// From quantized rows `[n, k]` (one per output column, the bundle's `[out, in]`
    /// layout) and their scales.
    pub fn from_rows(
        k: usize,
        n: usize,
        rows: &[i8],
        scales: Vec<f32>,
        bias: Option<Vec<f32>>,
    ) -> Int8Matrix {
        assert_eq!(rows.len(), n * k);
        assert_eq!(scales.len(), n);
        let k_padded = k.div_ceil(K_PAD) * K_PAD;
        let n_padded = n.div_ceil(COLUMN_PAD) * COLUMN_PAD;
        #[cfg(target_arch = "wasm32")]
        let relaxed = wasm::relaxed().is_some();
        #[cfg(not(target_arch = "wasm32"))]
        let relaxed = false;
        let size = k_padded * n_padded;
        let mut packed = vec![0 as Packed; if relaxed { 0 } else { size }];
        let mut quads = vec![0i8; if relaxed { size } else { 0 }];
        let mut sums = vec![0i32; n];
        for j in 0..n {
            for i in 0..k {
                let q = rows[j * k + i];
                if relaxed {
                    quads[(i / 4 * n_padded + j) * 4 + i % 4] = q;
                } else {
                    packed[(i / GROUP * n_padded + j) * GROUP + i % GROUP] = q as Packed;
                }
                sums[j] += q as i32;
            }
        }
        Int8Matrix {
            k,
            n,
            k_padded,
            n_padded,
            packed,
            quads,
            scales,
            sums,
            bias,
        }
    }

    /// The quantized weight of input `i`, output `j`.
    // The packed lanes are i16 in wasm (for `i32x4_dot_i16x8`), i8 natively.
    #[allow(clippy::unnecessary_cast)]
    pub fn at(&self, i: usize, j: usize) -> i8 {
        if self.quads.is_empty() {
            self.packed[(i / GROUP * self.n_padded + j) * GROUP + i % GROUP] as i8
        } else {
            self.quads[(i / 4 * self.n_padded + j) * 4 + i % 4]
        }
    }

    /// Output column `j`'s scale.
    pub fn scale(&self, j: usize) -> f32 {
        self.scales[j]
    }

    /// Output column `j` widened back to f32 (`q·scale`), into `out` (`k` values): for an
    /// output projection, token j's row of the tied embedding (§3.4).
    pub fn column(&self, j: usize, out: &mut [f32]) {
        let s = self.scales[j];
        for (i, v) in out[..self.k].iter_mut().enumerate() {
            *v = self.at(i, j) as f32 * s;
        }
    }

    /// The matrix widened back to f32, row-major `[k, n]` (`q·scale`: what loading the
    /// bundle as f32 gives).
    pub fn dequantized(&self) -> Vec<f32> {
        let mut out = vec![0.0f32; self.k * self.n];
        let mut column = vec![0.0f32; self.k];
        for j in 0..self.n {
            self.column(j, &mut column);
            for (i, &v) in column.iter().enumerate() {
                out[i * self.n + j] = v;
            }
        }
        out
    }

    /// The quantized rows `[n, k]` (one per output column, the bundle's `[out, in]`
    /// layout) and their scales: what the matrix was made from ([`Int8Matrix::from_rows`]).
    pub fn rows_and_scales(&self) -> (Vec<i8>, Vec<f32>) {
        let mut rows = vec![0i8; self.n * self.k];
        for j in 0..self.n {
            for i in 0..self.k {
                rows[j * self.k + i] = self.at(i, j);
            }
        }
        (rows, self.scales.clone())
    }

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
                let base = (i / GROUP * self.n_padded + j0) * GROUP + i % GROUP;
                let column = &self.packed[base..];
                for (t, (w, &s)) in row.iter_mut().zip(scales).enumerate() {
                    *w = column[t * GROUP] as i8 as f32 * s;
                }
            } else {
                let base = (i / 4 * self.n_padded + j0) * 4 + i % 4;
                let column = &self.quads[base..];
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
            if std::arch::is_x86_feature_detected!("avx512vnni")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                // qx + 128 as unsigned bytes, once here rather than in the inner loop.
                for q in x.iter_mut() {
                    *q ^= i8::MIN;
                }
                // SAFETY: the CPU has the features (just checked); shapes as documented.
                return unsafe { x86::vnni(self, x, row_scales, out) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: as above.
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
        self.apply_portable(x, row_scales, out)
    }

    /// The plain loops, over the same packed layout.
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    fn apply_portable(&self, x: &[i8], row_scales: &[f32], out: &mut [f32]) {
        let mut sums = vec![0i32; self.n];
        for (i, &sx) in row_scales.iter().enumerate() {
            sums.fill(0);
            let row = &x[i * self.k_padded..(i + 1) * self.k_padded];
            for (g, group) in row.chunks_exact(GROUP).enumerate() {
                let block = &self.packed[g * self.n_padded * GROUP..][..self.n * GROUP];
                for (sum, w) in sums.iter_mut().zip(block.chunks_exact(GROUP)) {
                    for (&a, &b) in group.iter().zip(w) {
                        *sum += a as i32 * b as i32;
                    }
                }
            }
            self.finish_row(&sums, sx, &mut out[i * self.n..(i + 1) * self.n]);
        }
    }

    /// One output row from its exact sums: `sum·(sx·sw) + b`, in the order every kernel
    /// uses (so all give the same bits).
    fn finish_row(&self, sums: &[i32], sx: f32, out: &mut [f32]) {
        self.finish(sums, sx, 0, out);
    }

    /// [`Int8Matrix::finish_row`] for columns `j0..j0 + sums.len()` of a row.
    fn finish(&self, sums: &[i32], sx: f32, j0: usize, out: &mut [f32]) {
        let scales = &self.scales[j0..j0 + sums.len()];
        for ((y, &s), &sw) in out.iter_mut().zip(sums).zip(scales) {
            *y = s as f32 * (sx * sw);
        }
        if let Some(bias) = &self.bias {
            for (y, b) in out.iter_mut().zip(&bias[j0..]) {
                *y += b;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{GROUP, Int8Matrix};
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
        for n0 in (0..w.n_padded).step_by(64) {
            let blocks = ((w.n_padded - n0) / 16).min(4);
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
            let stride = w.n_padded * GROUP;
            let weights = w.packed.as_ptr().add(n0 * GROUP);
            let rows = x.as_ptr().add(i * w.k_padded);
            for g in 0..groups {
                let mut b = [_mm512_setzero_si512(); B];
                for (c, b) in b.iter_mut().enumerate() {
                    *b = _mm512_loadu_si512(weights.add(g * stride + c * 64) as *const _);
                }
                for (r, acc) in acc.iter_mut().enumerate() {
                    let quad =
                        (rows.add(r * w.k_padded + g * GROUP) as *const i32).read_unaligned();
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
            let stride = w.n_padded * GROUP;
            let ones = _mm256_set1_epi16(1);
            for (i, &sx) in scales.iter().enumerate() {
                let row = x.as_ptr().add(i * w.k_padded);
                for n0 in (0..w.n_padded).step_by(32) {
                    let blocks = ((w.n_padded - n0) / 8).min(4);
                    let mut acc = [_mm256_setzero_si256(); 4];
                    for g in 0..groups {
                        let quad = (row.add(g * GROUP) as *const i32).read_unaligned();
                        let a = _mm256_set1_epi32(quad);
                        let magnitude = _mm256_abs_epi8(a);
                        for (c, acc) in acc.iter_mut().enumerate().take(blocks) {
                            let b = _mm256_loadu_si256(
                                w.packed.as_ptr().add(g * stride + (n0 + c * 8) * GROUP)
                                    as *const _,
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
}

/// `len` values in −spread..spread from a linear congruential generator: the random
/// products the tests and the relaxed kernel's self-check compare kernels on.
#[cfg(any(test, target_arch = "wasm32"))]
fn random(len: usize, state: &mut u64, spread: f32) -> Vec<f32> {
    (0..len)
        .map(|_| {
            *state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((*state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * spread
        })
        .collect()
}

/// The relaxed-SIMD dot product kernel (the `transduce-relaxed` module's `dot`, called
/// through JavaScript): `sums[i][j] = Σ_g Σ_t w[g][j][t]·x[i][4g + t]` for `m` rows and
/// `n_padded` columns, `w` int8 `[groups][n_padded][4]`, `x` unsigned 7-bit `[m][4·groups]`.
#[cfg(target_arch = "wasm32")]
pub type RelaxedDot =
    unsafe fn(w: *const i8, x: *const i8, sums: *mut i32, m: usize, groups: usize, n_padded: usize);

/// Registers (or withdraws, `None`) the relaxed-SIMD kernel for the matrices made from now
/// on. The kernel is checked first, against the definition on random products whose sizes
/// reach every row block (1 to 4 rows) and tails of both dimensions: a browser whose
/// instruction disagrees (the result outside 7-bit operands is implementation-defined)
/// gets `false` and the SIMD128 kernel.
#[cfg(target_arch = "wasm32")]
pub fn use_relaxed_dot(kernel: Option<RelaxedDot>) -> bool {
    wasm::RELAXED.set(kernel);
    if kernel.is_none() {
        return false;
    }
    let mut state = 29;
    let agrees = [(7, 37, 29), (1, 5, 3), (2, 192, 17)]
        .into_iter()
        .all(|(m, k, n)| {
            let w = random(k * n, &mut state, 0.5);
            let x = random(m * k, &mut state, 3.0);
            let matrix = Int8Matrix::quantize(k, n, &w, None);
            let mut out = Vec::new();
            matrix.apply(&x, m, &mut out);
            let mut want = vec![0.0; m * n];
            let mut q = vec![0i8; k];
            for i in 0..m {
                let sx = quantize_activations(&x[i * k..(i + 1) * k], &mut q);
                let sums: Vec<i32> = (0..n)
                    .map(|j| (0..k).map(|l| q[l] as i32 * matrix.at(l, j) as i32).sum())
                    .collect();
                matrix.finish_row(&sums, sx, &mut want[i * n..(i + 1) * n]);
            }
            out == want
        });
    if !agrees {
        wasm::RELAXED.set(None);
    }
    agrees
}

/// Whether matrices made now use the relaxed-SIMD kernel.
#[cfg(target_arch = "wasm32")]
pub fn relaxed_dot_active() -> bool {
    wasm::relaxed().is_some()
}

#[cfg(target_arch = "wasm32")]
mod wasm {
    use super::{GROUP, Int8Matrix, RelaxedDot};
    use std::arch::wasm32::*;
    use std::cell::{Cell, RefCell};

    thread_local! {
        pub static RELAXED: Cell<Option<RelaxedDot>> = const { Cell::new(None) };
        static SUMS: RefCell<Vec<i32>> = const { RefCell::new(Vec::new()) };
    }

    pub fn relaxed() -> Option<RelaxedDot> {
        RELAXED.get()
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
                        for (g, quad) in row.chunks_exact(4).enumerate() {
                            let block = &w.quads[g * w.n_padded * 4..][..w.n_padded * 4];
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
    fn block<const R: usize>(
        w: &Int8Matrix,
        xs: &[u32],
        n0: usize,
        sums: &mut [[i32; COLUMNS]; ROWS],
    ) {
        let groups = w.k_padded / GROUP;
        let stride = w.n_padded * GROUP;
        assert_eq!(xs.len(), R * groups);
        assert!(n0 + COLUMNS <= w.n_padded);
        let mut lo = [i32x4_splat(0); R];
        let mut hi = [i32x4_splat(0); R];
        for g in 0..groups {
            // SAFETY: group g's columns n0..n0 + 8 lie inside `packed` (checked above).
            let (b0, b1) = unsafe {
                let p = w.packed.as_ptr().add(g * stride + n0 * GROUP);
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
}

#[cfg(test)]
mod tests {

    #[test]
    fn widened_products_are_the_f32_products_of_q_times_scale_and_each_row_its_own() {
        let (k, n) = (70, 150);
        let values: Vec<f32> = (0..k * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        let matrix = Int8Matrix::quantize(k, n, &values, Some(&vec![0.25; n]));
        let w = matrix.dequantized();
        let m = 5;
        let x: Vec<f32> = (0..m * k)
            .map(|i| ((i * 11 % 29) as f32 - 14.0) * 0.07)
            .collect();
        let mut out = Vec::new();
        matrix.apply_widened(&x, m, &mut out);
        for r in 0..m {
            for j in 0..n {
                // The definition, summed over the inputs in order (the kernel's order).
                let mut want = 0.0f32;
                for i in 0..k {
                    want += x[r * k + i] * w[i * n + j];
                }
                want += 0.25;
                assert_eq!(
                    out[r * n + j].to_bits(),
                    want.to_bits(),
                    "row {r}, column {j}"
                );
            }
            // A row alone gives the same bits as in a batch.
            let mut one = Vec::new();
            matrix.apply_widened(&x[r * k..(r + 1) * k], 1, &mut one);
            assert_eq!(one, out[r * n..(r + 1) * n]);
        }
    }

    use super::*;

    /// Quantize → dequantize stays within half a step of each value's scale.
    #[test]
    fn round_trip_within_half_a_step() {
        let mut state = 7;
        for len in [1, 3, 16, 17, 192, 769] {
            let row = random(len, &mut state, 3.5);
            let mut q = vec![0i8; len];
            let s = quantize_row(&row, &mut q);
            assert!(q.iter().all(|&q| q != i8::MIN));
            assert_eq!(q.iter().map(|q| q.unsigned_abs()).max(), Some(127));
            for (&v, &q) in row.iter().zip(&q) {
                assert!(
                    (v - q as f32 * s).abs() <= s * 0.5 * (1.0 + 1e-5),
                    "{v} {q} {s}"
                );
            }
        }
        // Rounding is to nearest, ties to even: 127 is the largest, so row / 127 · 127 holds
        // the values themselves.
        let row: Vec<f32> = (-254..=254).map(|i| i as f32 * 0.5).collect();
        let mut q = vec![0i8; row.len()];
        assert_eq!(quantize_row(&row, &mut q), 1.0);
        for (&v, &q) in row.iter().zip(&q) {
            assert_eq!(q as f32, v.round_ties_even(), "{v}");
        }
        let mut q = [5i8; 3];
        assert_eq!(quantize_row(&[0.0; 3], &mut q), 0.0);
        assert_eq!(q, [0; 3]);
        // Activations: 7 bits, the same bound at their own step.
        for len in [1, 5, 192, 769] {
            let row = random(len, &mut state, 2.5);
            let mut q = vec![0i8; len];
            let s = quantize_activations(&row, &mut q);
            assert_eq!(q.iter().map(|q| q.unsigned_abs()).max(), Some(63));
            for (&v, &q) in row.iter().zip(&q) {
                assert!(
                    (v - q as f32 * s).abs() <= s * 0.5 * (1.0 + 1e-5),
                    "{v} {q} {s}"
                );
            }
        }
    }

    /// Every kernel this CPU runs against the definition computed from the quantized
    /// values, over odd and tail sizes in both dimensions and every row count a tile
    /// covers; and the result within the quantization's bound of the f32 product.
    #[test]
    fn products_match_the_definition_at_every_size() {
        let mut state = 11;
        for (m, k, n) in [
            (1, 1, 1),
            (1, 5, 3),
            (2, 7, 17),
            (3, 192, 576),
            (4, 33, 65),
            (5, 64, 80),
            (7, 768, 192),
            (9, 19, 130),
            (1, 192, 8000),
            (13, 3, 31),
        ] {
            let x = random(m * k, &mut state, 2.0);
            let w = random(k * n, &mut state, 0.3);
            let bias = random(n, &mut state, 0.5);
            let matrix = Int8Matrix::quantize(k, n, &w, Some(&bias));
            let mut out = vec![f32::NAN; 3];
            matrix.apply(&x, m, &mut out);
            assert_eq!(out.len(), m * n);
            let mut qx = vec![0i8; k];
            for i in 0..m {
                let sx = quantize_activations(&x[i * k..(i + 1) * k], &mut qx);
                for j in 0..n {
                    let sum: i32 = (0..k).map(|l| qx[l] as i32 * matrix.at(l, j) as i32).sum();
                    let want = sum as f32 * (sx * matrix.scale(j)) + bias[j];
                    assert_eq!(
                        out[i * n + j].to_bits(),
                        want.to_bits(),
                        "{m}×{k}×{n} at {i},{j}"
                    );
                    let exact: f32 =
                        (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum::<f32>() + bias[j];
                    // Each product errs by at most half a step of each factor.
                    let bound: f32 = (0..k)
                        .map(|l| {
                            (x[i * k + l].abs() * matrix.scale(j) + w[l * n + j].abs() * sx) * 0.5
                                + sx * matrix.scale(j) * 0.25
                        })
                        .sum();
                    assert!(
                        (out[i * n + j] - exact).abs() <= bound * 1.001 + 1e-5,
                        "{m}×{k}×{n}"
                    );
                }
            }
            // The portable loops give the same bits as the kernel this CPU chose.
            #[cfg(not(target_arch = "wasm32"))]
            {
                let mut quantized = vec![0i8; m * matrix.k_padded];
                let scales: Vec<f32> = (0..m)
                    .map(|i| {
                        quantize_activations(
                            &x[i * k..(i + 1) * k],
                            &mut quantized[i * matrix.k_padded..],
                        )
                    })
                    .collect();
                let mut portable = vec![0.0; m * n];
                matrix.apply_portable(&quantized, &scales, &mut portable);
                assert_eq!(portable, out);
                #[cfg(target_arch = "x86_64")]
                if std::arch::is_x86_feature_detected!("avx2") {
                    let mut avx2 = vec![0.0; m * n];
                    // SAFETY: the CPU has AVX2.
                    unsafe { x86::avx2(&matrix, &quantized, &scales, &mut avx2) };
                    assert_eq!(avx2, out);
                }
            }
        }
    }

    /// Extreme values: ±127 everywhere is the largest sum a pair of rows can make; no
    /// kernel saturates.
    #[test]
    fn extreme_values_do_not_saturate() {
        let (m, k, n) = (3, 256, 40);
        for sign in [1.0f32, -1.0] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| if i % 2 == 0 { sign } else { -sign })
                .collect();
            let w: Vec<f32> = (0..k * n)
                .map(|i| if (i / n) % 2 == 0 { 1.0 } else { -1.0 })
                .collect();
            let matrix = Int8Matrix::quantize(k, n, &w, None);
            let mut out = Vec::new();
            matrix.apply(&x, m, &mut out);
            for &y in &out {
                assert_eq!(y, sign * k as f32);
            }
        }
    }
}
