//! The host decoder's matrix products over plain `f32` arrays, through `gemm` (the crate
//! burn's CPU backend multiplies with): weight matrices with their bias, the output
//! projection kept in the layouts gemm is fastest on, and the int8 forms ([`super::int8`])
//! they switch to when quantized.

use super::int8::{Int8Matrix, quantize_rows};

/// A weight matrix `[rows, cols]`, row-major, with an optional bias of `cols`, and
/// optionally its int8 form ([`Matrix::quantize`]), which products then use.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub int8: Option<Int8Matrix>,
    /// Products in f32 over the int8 form ([`Int8Matrix::apply_widened`]): a matrix held in
    /// int8 only, asked for f32 products ([`Matrix::dequantize`]).
    pub widened: bool,
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
            widened: false,
        }
    }

    /// A matrix held in its int8 form only (read from an int8 bundle): no f32 copy until
    /// [`Matrix::dequantize`] asks for one.
    pub fn from_int8(int8: Int8Matrix) -> Matrix {
        Matrix {
            rows: int8.k,
            cols: int8.n,
            data: Vec::new(),
            bias: int8.bias.clone(),
            int8: Some(int8),
            widened: false,
        }
    }

    /// Whether the f32 values are held (not so for a matrix read from an int8 bundle until
    /// it is dequantized).
    pub fn has_f32(&self) -> bool {
        self.data.len() == self.rows * self.cols
    }

    /// Adds the int8 form (per output column): products quantize their input per row and
    /// multiply in int8 from now on. A matrix held in int8 only keeps its form.
    pub fn quantize(&mut self) {
        if !self.has_f32() {
            self.widened = false;
            return;
        }
        self.int8 = Some(Int8Matrix::quantize(
            self.rows,
            self.cols,
            &self.data,
            self.bias.as_deref(),
        ));
    }

    /// f32 products from now on: the int8 form is dropped, or, for a matrix held in int8
    /// only, kept and multiplied in f32 as `q·scale` ([`Int8Matrix::apply_widened`]): the
    /// same weights with no f32 copy.
    pub fn dequantize(&mut self) {
        if self.has_f32() {
            self.int8 = None;
        } else if self.int8.is_some() {
            self.widened = true;
        }
    }

    /// The f32 values held, widened from the int8 form if need be (`q·scale`), with f32
    /// products (a copy a GPU decoder can upload from).
    pub fn materialize(&mut self) {
        if !self.has_f32()
            && let Some(int8) = &self.int8
        {
            self.data = int8.dequantized();
        }
        self.int8 = None;
        self.widened = false;
    }

    /// `out[m, cols] = x[m, rows] · self (+ bias)`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        assert_eq!(x.len(), m * self.rows);
        if let Some(int8) = &self.int8 {
            return if self.widened {
                int8.apply_widened(x, m, out)
            } else {
                int8.apply(x, m, out)
            };
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

    /// No columns (a placeholder while a projection changes form).
    fn empty() -> Columns {
        Columns {
            rows: 0,
            cols: 0,
            blocks: Vec::new(),
        }
    }

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
    /// Held in int8 only, multiplied in f32 as `q·scale` ([`Int8Matrix::apply_widened`]).
    Widened(Int8Matrix),
}

impl Projection {
    /// From the transposed weight `table` `[vocab, d_model]` (the shared embedding).
    pub fn from_table(table: Vec<f32>, vocab: usize) -> Projection {
        let form = ProjectionForm::F32(Columns::transposed(&table, vocab));
        Projection { table, form }
    }

    /// From its int8 form only (an int8 bundle's tied embedding or untied projection, per
    /// vocabulary row): no f32 table until [`Projection::dequantize`].
    pub fn from_int8(int8: Int8Matrix) -> Projection {
        Projection {
            table: Vec::new(),
            form: ProjectionForm::Int8(int8),
        }
    }

    /// Vocabulary row `token` of the table `[vocab, d_model]` into `out` (`d_model`
    /// values): the tied embedding's row (§3.4).
    pub fn row(&self, token: usize, out: &mut [f32]) {
        match &self.form {
            ProjectionForm::Int8(int8) | ProjectionForm::Widened(int8) if self.table.is_empty() => {
                int8.column(token, out)
            }
            _ => {
                let d = out.len();
                out.copy_from_slice(&self.table[token * d..(token + 1) * d]);
            }
        }
    }

    /// Switches to the int8 form (per vocabulary row, as the tied embedding is stored):
    /// products use it from now on.
    pub fn quantize(&mut self) {
        if matches!(self.form, ProjectionForm::Widened(_)) {
            let ProjectionForm::Widened(int8) =
                std::mem::replace(&mut self.form, ProjectionForm::F32(Columns::empty()))
            else {
                unreachable!("matched above")
            };
            self.form = ProjectionForm::Int8(int8);
            return;
        }
        if let ProjectionForm::F32(columns) = &self.form {
            let (vocab, d) = (columns.cols, columns.rows);
            let (rows, scales) = quantize_rows(&self.table, d);
            self.form = ProjectionForm::Int8(Int8Matrix::from_rows(d, vocab, &rows, scales, None));
        }
    }

    /// Back to f32 products; held in int8 only, over the int8 form (no f32 copy).
    pub fn dequantize(&mut self) {
        if !matches!(self.form, ProjectionForm::Int8(_)) {
            return;
        }
        let ProjectionForm::Int8(int8) =
            std::mem::replace(&mut self.form, ProjectionForm::F32(Columns::empty()))
        else {
            unreachable!("matched above")
        };
        self.form = if self.table.is_empty() {
            ProjectionForm::Widened(int8)
        } else {
            ProjectionForm::F32(Columns::transposed(&self.table, int8.n))
        };
    }

    /// The f32 table held (widened from the int8 form if need be), with f32 products.
    pub fn materialize(&mut self) {
        let int8 = match &self.form {
            ProjectionForm::Int8(int8) | ProjectionForm::Widened(int8) => int8,
            ProjectionForm::F32(_) => return,
        };
        if self.table.is_empty() {
            // The table `[vocab, d]` is the transpose of `[d, vocab]`.
            self.table = transpose(&int8.dequantized(), int8.k, int8.n);
        }
        self.form = ProjectionForm::F32(Columns::transposed(&self.table, int8.n));
    }

    /// The int8 form, when the projection has one (held, or used for its products).
    pub fn int8(&self) -> Option<&Int8Matrix> {
        match &self.form {
            ProjectionForm::Int8(int8) | ProjectionForm::Widened(int8) => Some(int8),
            ProjectionForm::F32(_) => None,
        }
    }

    /// Whether products run in int8.
    pub fn is_int8(&self) -> bool {
        matches!(self.form, ProjectionForm::Int8(_))
    }

    /// The table `[vocab, d_model]`; empty for a projection held in int8 only (until
    /// [`Projection::dequantize`]).
    pub fn table(&self) -> &[f32] {
        &self.table
    }

    /// `out[m, vocab] = x[m, d_model] · self`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        match &self.form {
            ProjectionForm::Int8(int8) => int8.apply(x, m, out),
            ProjectionForm::Widened(int8) => int8.apply_widened(x, m, out),
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
