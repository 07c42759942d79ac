//! A weight matrix quantized per output column, in the kernels' packed layout.

use super::quantize::quantize_row;

/// Values in the packed weight layout: native kernels read int8 quads
/// (`[k/4][n][4]`), the wasm kernel int16 pairs (`[k/2][n][2]`).
#[cfg(not(target_arch = "wasm32"))]
pub(super) type Packed = i8;
#[cfg(target_arch = "wasm32")]
pub(super) type Packed = i16;

/// Inner-dimension values per packed group.
#[cfg(not(target_arch = "wasm32"))]
pub(super) const GROUP: usize = 4;
#[cfg(target_arch = "wasm32")]
pub(super) const GROUP: usize = 2;

/// The inner dimension is padded to a multiple of this (whole quads for every layout).
pub(super) const K_PAD: usize = 4;

/// Columns are padded to a multiple of this (one 512-bit register of int32 sums).
pub(super) const COLUMN_PAD: usize = 16;

/// Columns per panel of the packed layout: a panel's weights (`k × PANEL`) are contiguous,
/// so a kernel's pass over one column block streams one span of memory instead of `k / GROUP`
/// pieces a whole row of the matrix apart (58,112 columns × 4 bytes for opus-mt-en-de's
/// output projection: a page each). The kernels' column blocks (64 for VNNI, 32 for AVX2,
/// 8 in wasm) divide it. Measured: docs/BENCHMARKS.md, "The int8 product's panels".
pub(super) const PANEL: usize = 64;

/// A weight matrix `[k, n]` (`x·W`) quantized per output column and packed for the
/// kernels, with its bias.
#[derive(Clone, Debug)]
pub struct Int8Matrix {
    /// Inner dimension (input features) and output columns.
    pub k: usize,
    pub n: usize,
    /// `k` rounded up to a whole group, `n` to [`COLUMN_PAD`].
    pub(super) k_padded: usize,
    pub(super) n_padded: usize,
    /// Panels of [`PANEL`] columns (the last one `n_padded` mod `PANEL` wide when that is
    /// not 0), one after another, each `[k_padded / GROUP][width][GROUP]`
    /// ([`Int8Matrix::offset`]); padding is zero. Empty when `quads` holds the weights.
    pub(super) packed: Vec<Packed>,
    /// wasm32 with the relaxed-SIMD kernel registered when the matrix was made: int8
    /// quads in the same panels, each `[k_padded / 4][width][4]` (its layout); empty
    /// otherwise.
    pub(super) quads: Vec<i8>,
    /// Per output column: the scale, and Σₖ qw (the correction of the kernels that add an
    /// offset to the activations).
    pub(super) scales: Vec<f32>,
    pub(super) sums: Vec<i32>,
    pub bias: Option<Vec<f32>>,
}

/// [`Int8Matrix::panel`] of a matrix of these padded sizes.
fn panel(k_padded: usize, n_padded: usize, j: usize) -> (usize, usize) {
    let first = j / PANEL * PANEL;
    (first * k_padded, PANEL.min(n_padded - first))
}

/// The index of input `i`, output `j` in panels of groups of `G` values (`packed`'s
/// layout for `G` = [`GROUP`], `quads`' for 4).
fn grouped_offset<const G: usize>(k_padded: usize, n_padded: usize, i: usize, j: usize) -> usize {
    let (start, width) = panel(k_padded, n_padded, j);
    start + (i / G * width + j % PANEL) * G + i % G
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
        let relaxed = super::relaxed::relaxed().is_some();
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
                    quads[grouped_offset::<4>(k_padded, n_padded, i, j)] = q;
                } else {
                    packed[grouped_offset::<GROUP>(k_padded, n_padded, i, j)] = q as Packed;
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
            self.packed[self.offset(i, j)] as i8
        } else {
            self.quads[self.quad_offset(i, j)]
        }
    }

    /// Where column `j`'s panel starts in `packed`, and its width (a multiple of
    /// [`COLUMN_PAD`]).
    pub(super) fn panel(&self, j: usize) -> (usize, usize) {
        panel(self.k_padded, self.n_padded, j)
    }

    /// Every panel's start and width, in column order.
    pub(super) fn panels(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        (0..self.n_padded).step_by(PANEL).map(|j| self.panel(j))
    }

    /// The index in `packed` of input `i`, output `j`.
    pub(super) fn offset(&self, i: usize, j: usize) -> usize {
        grouped_offset::<GROUP>(self.k_padded, self.n_padded, i, j)
    }

    /// The index in `quads` of input `i`, output `j`: the same panels, over int8 quads.
    pub(super) fn quad_offset(&self, i: usize, j: usize) -> usize {
        grouped_offset::<4>(self.k_padded, self.n_padded, i, j)
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

    /// One output row from its exact sums: `sum·(sx·sw) + b`, in the order every kernel
    /// uses (so all give the same bits).
    pub(super) fn finish_row(&self, sums: &[i32], sx: f32, out: &mut [f32]) {
        self.finish(sums, sx, 0, out);
    }

    /// [`Int8Matrix::finish_row`] for columns `j0..j0 + sums.len()` of a row.
    pub(super) fn finish(&self, sums: &[i32], sx: f32, j0: usize, out: &mut [f32]) {
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
