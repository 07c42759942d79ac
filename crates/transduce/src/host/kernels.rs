//! The arithmetic of the host decoder over plain `f32` slices: matrix products through
//! `gemm` (the crate burn's CPU backend multiplies with), and the row-wise operations —
//! layer normalization, softmax, log-softmax — written so the compiler vectorizes them.
//!
//! Sums use eight independent accumulators: a single running sum is a dependency chain the
//! compiler may not reorder (floating-point addition is not associative), eight are eight
//! SIMD lanes.

use super::int8::{Int8Matrix, quantize_rows};

const LANES: usize = 8;

/// A weight matrix `[rows, cols]`, row-major, with an optional bias of `cols`, and
/// optionally its int8 form ([`Matrix::quantize`]), which products then use.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub int8: Option<Int8Matrix>,
}

impl Matrix {
    /// An f32 matrix.
    pub fn new(rows: usize, cols: usize, data: Vec<f32>, bias: Option<Vec<f32>>) -> Matrix {
        Matrix {
            rows,
            cols,
            data,
            bias,
            int8: None,
        }
    }

    /// Adds the int8 form (per output column): products quantize their input per row and
    /// multiply in int8 from now on.
    pub fn quantize(&mut self) {
        self.int8 = Some(Int8Matrix::quantize(
            self.rows,
            self.cols,
            &self.data,
            self.bias.as_deref(),
        ));
    }

    /// Drops the int8 form: f32 products again.
    pub fn dequantize(&mut self) {
        self.int8 = None;
    }

    /// `out[m, cols] = x[m, rows] · self (+ bias)`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        assert_eq!(x.len(), m * self.rows);
        if let Some(int8) = &self.int8 {
            return int8.apply(x, m, out);
        }
        let len = m * self.cols;
        out.clear();
        out.reserve(len);
        // SAFETY: `out` has room for the m rows of `cols`, which gemm writes without
        // reading; every element is written before the length covers it. Writing into
        // the spare capacity saves zeroing (a memset of the whole output) each step.
        unsafe {
            self.write(x, m, out.as_mut_ptr(), self.cols);
            out.set_len(len);
        }
        self.add_bias(out, m, self.cols);
    }

    /// Writes `x[m, rows] · self` (no bias) into rows of `stride` at `out`.
    ///
    /// # Safety
    /// `out` must be valid for writes of `(m − 1)·stride + cols` elements, `x` hold
    /// `m·rows` and `stride ≥ cols`.
    unsafe fn write(&self, x: &[f32], m: usize, out: *mut f32, stride: usize) {
        debug_assert!(x.len() == m * self.rows && stride >= self.cols);
        if m == 0 {
            return;
        }
        // SAFETY: x is [m, rows] and data [rows, cols], row-major and of those lengths
        // (by construction); out as the caller promises. β = 0 and `read_dst` false:
        // gemm does not read the destination.
        unsafe {
            gemm::gemm(
                m,
                self.cols,
                self.rows,
                out,
                1,
                stride as isize,
                false,
                x.as_ptr(),
                1,
                self.rows as isize,
                self.data.as_ptr(),
                1,
                self.cols as isize,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                parallelism(m, self.cols, self.rows),
            );
        }
    }

    /// Adds the bias to the first `cols` of each of `m` rows of `stride`.
    fn add_bias(&self, out: &mut [f32], m: usize, stride: usize) {
        if let Some(bias) = &self.bias {
            for row in out.chunks_mut(stride).take(m) {
                for (y, b) in row.iter_mut().zip(bias) {
                    *y += b;
                }
            }
        }
    }
}

/// A wide matrix `[rows, cols]` kept as column blocks, each a row-major `[rows, ≤ BLOCK]`
/// matrix: the output projection (§3.4), `[d_model, vocab]`. One row-major `[d_model,
/// vocab]` array puts a whole vocabulary (32 KB at 8,000 tokens) between the values one
/// micro-kernel tile reads, and the `[vocab, d_model]` embedding read as its transpose
/// made gemm repack all of it at every step; blocks keep a tile's reads close.
#[derive(Clone, Debug)]
pub struct Columns {
    pub rows: usize,
    pub cols: usize,
    blocks: Vec<Matrix>,
}

impl Columns {
    const BLOCK: usize = 256;

    /// The blocks of a row-major `[rows, cols]` matrix.
    pub fn new(matrix: &Matrix) -> Columns {
        Columns::from_fn(
            matrix.rows,
            matrix.cols,
            |r, c| matrix.data[r * matrix.cols + c],
            matrix.bias.as_deref(),
        )
    }

    /// The blocks of the transpose of a row-major `table` `[cols, rows]`: the tied output
    /// projection `Eᵀ` from the embedding `E`.
    pub fn transposed(table: &[f32], cols: usize) -> Columns {
        let rows = table.len() / cols.max(1);
        Columns::from_fn(rows, cols, |r, c| table[c * rows + r], None)
    }

    fn from_fn(
        rows: usize,
        cols: usize,
        at: impl Fn(usize, usize) -> f32,
        bias: Option<&[f32]>,
    ) -> Columns {
        let blocks = (0..cols)
            .step_by(Self::BLOCK)
            .map(|start| {
                let width = Self::BLOCK.min(cols - start);
                Matrix::new(
                    rows,
                    width,
                    (0..rows * width)
                        .map(|i| at(i / width, start + i % width))
                        .collect(),
                    bias.map(|b| b[start..start + width].to_vec()),
                )
            })
            .collect();
        Columns { rows, cols, blocks }
    }

    /// `out[m, cols] = x[m, rows] · self (+ bias)`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        assert_eq!(x.len(), m * self.rows);
        let len = m * self.cols;
        out.clear();
        out.reserve(len);
        let mut start = 0;
        // SAFETY: block b writes columns start..start + width of every row (within `len`,
        // as the blocks' widths sum to `cols`); together they write every element before
        // the length covers it (see `Matrix::apply`).
        unsafe {
            for block in &self.blocks {
                block.write(x, m, out.as_mut_ptr().add(start), self.cols);
                start += block.cols;
            }
            out.set_len(len);
        }
        let mut start = 0;
        for block in &self.blocks {
            block.add_bias(&mut out[start..], m, self.cols);
            start += block.cols;
        }
    }
}

/// The output projection (§3.4) `[d_model, vocab]`, kept two ways because gemm's speed
/// depends on the layout: a single row (greedy decoding of one sentence) runs fastest over
/// the `[vocab, d_model]` table read as its transpose (gemm's row-major matrix-vector
/// product), more rows over column blocks ([`Columns`]), which gemm streams or packs a
/// block at a time instead of repacking the whole transposed table at every step (when
/// it was introduced: 300 test2016 sentences, beam 4, one at a time, 3.25 s → 1.9–2.1 s;
/// in batches of 32, 1.62 s → 1.40–1.50 s).
#[derive(Clone, Debug)]
pub struct Projection {
    /// `[vocab, d_model]`.
    table: Vec<f32>,
    form: ProjectionForm,
}

/// What a [`Projection`] multiplies with besides its table.
#[derive(Clone, Debug)]
enum ProjectionForm {
    /// f32: the column blocks (for more than one row).
    F32(Columns),
    /// int8, per vocabulary row; the f32 blocks are dropped meanwhile (6 MB for `compact`).
    Int8(Int8Matrix),
}

impl Projection {
    /// From the transposed weight `table` `[vocab, d_model]` (the shared embedding).
    pub fn from_table(table: Vec<f32>, vocab: usize) -> Projection {
        let form = ProjectionForm::F32(Columns::transposed(&table, vocab));
        Projection { table, form }
    }

    /// Switches to the int8 form (per vocabulary row, as the tied embedding is stored):
    /// products use it from now on.
    pub fn quantize(&mut self) {
        if let ProjectionForm::F32(columns) = &self.form {
            let (vocab, d) = (columns.cols, columns.rows);
            let (rows, scales) = quantize_rows(&self.table, d);
            self.form = ProjectionForm::Int8(Int8Matrix::from_rows(d, vocab, &rows, scales, None));
        }
    }

    /// Back to f32 products.
    pub fn dequantize(&mut self) {
        if let ProjectionForm::Int8(int8) = &self.form {
            self.form = ProjectionForm::F32(Columns::transposed(&self.table, int8.n));
        }
    }

    /// Whether products run in int8.
    pub fn is_int8(&self) -> bool {
        matches!(self.form, ProjectionForm::Int8(_))
    }

    /// The table `[vocab, d_model]`.
    pub fn table(&self) -> &[f32] {
        &self.table
    }

    /// `out[m, vocab] = x[m, d_model] · self`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        match &self.form {
            ProjectionForm::Int8(int8) => int8.apply(x, m, out),
            ProjectionForm::F32(columns) if m == 1 => {
                times_transposed(x, m, &self.table, columns.cols, out)
            }
            ProjectionForm::F32(columns) => columns.apply(x, m, out),
        }
    }
}

/// `out[m, n] = x[m, k] · tableᵀ` for a row-major `table` `[n, k]`.
fn times_transposed(x: &[f32], m: usize, table: &[f32], n: usize, out: &mut Vec<f32>) {
    let k = table.len() / n.max(1);
    assert_eq!(x.len(), m * k);
    out.clear();
    if m == 0 {
        return;
    }
    out.reserve(m * n);
    // SAFETY: as in `Matrix::write` (gemm writes all m·n elements of the spare capacity
    // without reading them, then the length covers them); the right-hand side is `table`
    // read column-major, element (i, j) at j·k + i.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            x.as_ptr(),
            1,
            k as isize,
            table.as_ptr(),
            k as isize,
            1,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism(m, n, k),
        );
        out.set_len(m * n);
    }
}

/// burn's CPU backend's rule: products of at least 192³ multiply-adds use every thread.
fn parallelism(m: usize, n: usize, k: usize) -> gemm::Parallelism {
    #[cfg(not(target_arch = "wasm32"))]
    if m.saturating_mul(n).saturating_mul(k) >= 192 * 192 * 192 {
        return gemm::Parallelism::Rayon(0);
    }
    let _ = (m, n, k);
    gemm::Parallelism::None
}

/// Σ aᵢ·bᵢ.
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let (ca, ra) = a.split_at(n - n % LANES);
    let (cb, rb) = b.split_at(n - n % LANES);
    for (x, y) in ca.chunks_exact(LANES).zip(cb.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// y += a·x.
#[inline]
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

#[inline]
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] += c[i];
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// `[rows, cols]` row-major → `[cols, rows]`.
pub fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0.0; values.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = values[r * cols + c];
        }
    }
    t
}

/// The larger of `a` and `b` by one comparison (`a` when `b` is NaN). Not `f32::max`,
/// whose NaN rule has no single instruction in wasm: there it is a call to `fmaxf` per
/// element (15% of a beam-search step in the browser before this); this is
/// `f32x4.pmax` in wasm and `maxps` on x86, and vectorizes on both.
#[inline(always)]
pub fn larger(a: f32, b: f32) -> f32 {
    if b > a { b } else { a }
}

/// The largest value of `x` (−∞ if empty), over [`LANES`] running maxima so the loop
/// vectorizes.
#[inline(always)]
pub fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] = larger(acc[i], c[i]);
        }
    }
    rest.iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &v| larger(m, v))
}

/// The first index whose `x[i] − shift` is largest, and that value (index 0 and −∞ when
/// nothing beats −∞): the scalar loop `if x[i] − shift > best`, found without subtracting
/// at every element. Subtracting is monotone, so the best value is `max(x) − shift`
/// (vectorized), and the first index reaching it lies in the first chunk whose own
/// maximum reaches it (the scalar loop was an eighth of greedy decoding at batch 32).
pub fn first_best(x: &[f32], shift: f32) -> (usize, f32) {
    const CHUNK: usize = 32;
    let best = max(x) - shift;
    if best == f32::NEG_INFINITY || best.is_nan() {
        return (0, f32::NEG_INFINITY);
    }
    for (c, chunk) in x.chunks(CHUNK).enumerate() {
        if max(chunk) - shift == best {
            let i = chunk.iter().position(|&v| v - shift == best).unwrap_or(0);
            return (c * CHUNK + i, best);
        }
    }
    (0, f32::NEG_INFINITY)
}

/// The largest magnitude in `x` (0 if empty; NaN if any value is NaN is not promised:
/// callers check finiteness of the result).
#[inline]
pub fn max_abs(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] = larger(acc[i], c[i].abs());
        }
    }
    rest.iter().map(|v| v.abs()).chain(acc).fold(0.0, larger)
}

/// LayerNorm over each row of `x` `[.., d]` in place (ε = 10⁻⁵, burn's default; the
/// variance is the biased one, as in Ba et al. 2016).
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just checked); the same code, the same bits (see
        // `log_softmax_shift`).
        return unsafe { layer_norm_avx2(x, gamma, beta) };
    }
    layer_norm_lanes(x, gamma, beta)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn layer_norm_avx2(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    layer_norm_lanes(x, gamma, beta)
}

#[inline(always)]
fn layer_norm_lanes(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
    const EPSILON: f32 = 1e-5;
    let d = gamma.len();
    for row in x.chunks_exact_mut(d) {
        let mean = sum(row) / d as f32;
        let mut acc = [0.0f32; LANES];
        let (chunks, rest) = row.split_at(d - d % LANES);
        for c in chunks.chunks_exact(LANES) {
            for i in 0..LANES {
                let c = c[i] - mean;
                acc[i] += c * c;
            }
        }
        let var = (acc.iter().sum::<f32>()
            + rest.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>())
            / d as f32;
        let scale = 1.0 / (var + EPSILON).sqrt();
        for ((v, g), b) in row.iter_mut().zip(gamma).zip(beta) {
            *v = (*v - mean) * scale * g + b;
        }
    }
}

/// Softmax of one row in place.
#[inline]
pub fn softmax(row: &mut [f32]) {
    let m = max(row);
    for v in row.iter_mut() {
        *v = exp(*v - m);
    }
    let total = sum(row);
    for v in row.iter_mut() {
        *v /= total;
    }
}

/// log-softmax of one row in place: x − max − log Σ e^(x − max).
pub fn log_softmax(row: &mut [f32]) {
    let shift = log_softmax_shift(row);
    for v in row.iter_mut() {
        *v -= shift;
    }
}

/// The shift s with log-softmax(x)ᵢ = xᵢ − s: max + log Σ e^(x − max). A search that only
/// ranks a row, or reads a few of its entries, subtracts it where it reads instead of
/// writing the whole row.
///
/// On x86-64 CPUs with AVX2 the same code runs compiled for AVX2 (the crate's baseline is
/// SSE2): eight lanes per instruction instead of four over the vocabulary's exponentials,
/// a sixth of a beam-search step. The lanes and the order of the sums are the code's, not
/// the instruction set's, and Rust does not fuse multiplies and adds, so both give the
/// same bits.
pub fn log_softmax_shift(row: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (just checked).
        return unsafe { log_softmax_shift_avx2(row) };
    }
    log_softmax_shift_lanes(row)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn log_softmax_shift_avx2(row: &[f32]) -> f32 {
    log_softmax_shift_lanes(row)
}

#[inline(always)]
fn log_softmax_shift_lanes(row: &[f32]) -> f32 {
    let m = max(row);
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = row.split_at(row.len() - row.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] += exp(c[i] - m);
        }
    }
    let total = acc.iter().sum::<f32>() + rest.iter().map(|&v| exp(v - m)).sum::<f32>();
    m + total.ln()
}

/// e^x for x ≤ 0 in f32 (relative error < 2·10⁻⁷), branch-free so loops over it
/// vectorize: x = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by Cephes' `expf` polynomial, 2^n
/// through the exponent bits. Inputs below −87 (where e^x is under f32's normal range)
/// give e^−87 ≈ 1.6·10⁻³⁸, which no sum of probabilities can tell from 0.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 · 2²³: adding it rounds to an integer held in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 0.0);
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_2e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 0.166_666_65;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // n is in −126..=0: its bits sit in the low mantissa of `shifted`.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits()) as i32;
    // Wrapping: no overflow check (and its branch) in the vectorized loop.
    e_r * f32::from_bits((n_bits.wrapping_add(127) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// first_best against the scalar loop it replaces, with ties and values that round to
    /// the same log-probability.
    #[test]
    fn first_best_is_the_scalar_loop() {
        let scalar = |x: &[f32], shift: f32| {
            let mut best = (0usize, f32::NEG_INFINITY);
            for (i, &v) in x.iter().enumerate() {
                if v - shift > best.1 {
                    best = (i, v - shift);
                }
            }
            best
        };
        let mut state = 11u64;
        for len in [1, 7, 31, 32, 33, 100, 8000] {
            for shift in [0.0f32, 3.25, 1.0e7] {
                let mut x: Vec<f32> = (0..len)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1);
                        ((state >> 40) % 64) as f32 * 0.5 - 16.0
                    })
                    .collect();
                assert_eq!(first_best(&x, shift), scalar(&x, shift), "{len} {shift}");
                // A later, larger value that rounds to the same log-probability: the
                // earlier one still wins, as in the scalar loop.
                if len > 40 {
                    x[5] = 20.0;
                    x[37] = 20.5;
                    assert_eq!(first_best(&x, 1.0e9), scalar(&x, 1.0e9));
                    assert_eq!(first_best(&x, 0.0).0, 37);
                }
            }
        }
        let all = [f32::NEG_INFINITY; 40];
        assert_eq!(first_best(&all, 0.0), scalar(&all, 0.0));
    }

    /// exp against f64's over its whole domain.
    #[test]
    fn exp_is_accurate() {
        let mut worst = 0.0f64;
        for i in 0..=1_000_000 {
            let x = -87.0 * i as f32 / 1_000_000.0;
            let exact = (x as f64).exp();
            worst = worst.max(((exp(x) as f64) - exact).abs() / exact);
        }
        assert!(worst < 2e-7, "relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) > 0.0 && exp(-1000.0) < 1e-37);
    }

    /// The log-softmax shift against f64's definition, and the AVX2 build of it (taken on
    /// CPUs that have it) bit for bit against the baseline build.
    #[test]
    fn log_softmax_shift_is_exact_and_the_same_on_every_path() {
        let mut state = 0x9e37_79b9_u32;
        for len in [1, 7, 8, 9, 100, 8000] {
            let row: Vec<f32> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (state >> 8) as f32 / (1 << 24) as f32 * 40.0 - 20.0
                })
                .collect();
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
            let want = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
            let found = log_softmax_shift(&row);
            assert!(
                (found as f64 - want).abs() < 1e-5 * want.abs().max(1.0),
                "{len}"
            );
            assert_eq!(
                found.to_bits(),
                log_softmax_shift_lanes(&row).to_bits(),
                "{len}"
            );
        }
    }

    /// Products against the definition, row-major and through a transposed table.
    #[test]
    fn products_by_definition() {
        // 600 columns: three blocks of `Columns`, the last one narrower.
        for (m, k, n) in [(3, 19, 11), (7, 19, 600)] {
            let x: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
            let w: Vec<f32> = (0..k * n)
                .map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0)
                .collect();
            let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
            let matrix = Matrix::new(k, n, w.clone(), Some(bias.clone()));
            // Stale contents must not leak into the products.
            let mut out = vec![f32::NAN; 2 * m * n];
            matrix.apply(&x, m, &mut out);
            let mut out_c = vec![f32::NAN; m * n / 2];
            Columns::new(&matrix).apply(&x, m, &mut out_c);
            // The same matrix stored transposed, [n, k].
            let table: Vec<f32> = (0..n * k).map(|i| w[(i % k) * n + i / k]).collect();
            let mut out_t = vec![f32::NAN; 2 * m * n];
            Columns::transposed(&table, n).apply(&x, m, &mut out_t);
            let projection = Projection::from_table(table.clone(), n);
            let mut out_p = Vec::new();
            let mut out_1 = Vec::new();
            projection.apply(&x, m, &mut out_p);
            projection.apply(&x[..k], 1, &mut out_1);
            assert_eq!(out_p, out_t);
            assert_eq!(out_1[..], out_t[..n]);
            assert_eq!(out.len(), m * n);
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum();
                    assert_eq!(out[i * n + j], want + bias[j]);
                    assert_eq!(out_c[i * n + j], want + bias[j]);
                    assert_eq!(out_t[i * n + j], want);
                }
            }
        }
        let (k, x): (usize, Vec<f32>) = (19, (0..19).map(|i| i as f32 - 6.0).collect());
        assert_eq!(
            dot(&x[..k], &x[..k]),
            (0..k).map(|l| x[l] * x[l]).sum::<f32>()
        );
    }

    /// Row operations against their formulas in f64.
    #[test]
    fn row_operations_by_formula() {
        let row: Vec<f32> = (0..37)
            .map(|i| ((i * 17) % 23) as f32 * 0.37 - 4.0)
            .collect();
        let n = row.len() as f64;
        let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let gamma: Vec<f32> = (0..row.len()).map(|i| 1.0 + i as f32 * 0.01).collect();
        let beta: Vec<f32> = (0..row.len()).map(|i| i as f32 * -0.02).collect();
        let mut normed = row.clone();
        layer_norm(&mut normed, &gamma, &beta);
        let big = row.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
        let z: f64 = row.iter().map(|&v| (v as f64 - big).exp()).sum();
        let mut soft = row.clone();
        softmax(&mut soft);
        let mut log_soft = row.clone();
        log_softmax(&mut log_soft);
        for i in 0..row.len() {
            let x = row[i] as f64;
            let ln = (x - mean) / (var + 1e-5).sqrt() * gamma[i] as f64 + beta[i] as f64;
            assert!((normed[i] as f64 - ln).abs() < 1e-5, "layer norm {i}");
            let p = (x - big).exp() / z;
            assert!((soft[i] as f64 - p).abs() < 1e-6, "softmax {i}");
            assert!(
                (log_soft[i] as f64 - p.ln()).abs() < 1e-5,
                "log-softmax {i}"
            );
        }
    }
}
