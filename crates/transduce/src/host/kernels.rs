//! The arithmetic of the host decoder over plain `f32` slices: matrix products through
//! `gemm` (the crate burn's CPU backend multiplies with), and the row-wise operations —
//! layer normalization, softmax, log-softmax — written so the compiler vectorizes them.
//!
//! Sums use eight independent accumulators: a single running sum is a dependency chain the
//! compiler may not reorder (floating-point addition is not associative), eight are eight
//! SIMD lanes.

const LANES: usize = 8;

/// A weight matrix `[rows, cols]`, row-major, with an optional bias of `cols`.
#[derive(Clone, Debug)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

impl Matrix {
    /// `out[m, cols] = x[m, rows] · self (+ bias)`.
    pub fn apply(&self, x: &[f32], m: usize, out: &mut Vec<f32>) {
        debug_assert_eq!(x.len(), m * self.rows);
        out.clear();
        out.resize(m * self.cols, 0.0);
        if m == 0 {
            return;
        }
        // SAFETY: x is [m, rows], data [rows, cols] and out [m, cols], all row-major and of
        // those lengths (asserted above and by construction).
        unsafe {
            gemm::gemm(
                m,
                self.cols,
                self.rows,
                out.as_mut_ptr(),
                1,
                self.cols as isize,
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
        if let Some(bias) = &self.bias {
            for row in out.chunks_exact_mut(self.cols) {
                for (y, b) in row.iter_mut().zip(bias) {
                    *y += b;
                }
            }
        }
    }
}

/// `out[m, n] = x[m, k] · tableᵀ` for a row-major `table` `[n, k]`: the output projection
/// through the shared embedding matrix (§3.4), read in place.
pub fn times_transposed(x: &[f32], m: usize, table: &[f32], n: usize, out: &mut Vec<f32>) {
    let k = table.len() / n.max(1);
    debug_assert_eq!(x.len(), m * k);
    out.clear();
    out.resize(m * n, 0.0);
    if m == 0 {
        return;
    }
    // SAFETY: as in `Matrix::apply`; the right-hand side is `table` read column-major,
    // element (i, j) at j·k + i.
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

fn max(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let (chunks, rest) = x.split_at(x.len() - x.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] = acc[i].max(c[i]);
        }
    }
    rest.iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// LayerNorm over each row of `x` `[.., d]` in place (ε = 10⁻⁵, burn's default; the
/// variance is the biased one, as in Ba et al. 2016).
pub fn layer_norm(x: &mut [f32], gamma: &[f32], beta: &[f32]) {
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
    let m = max(row);
    let mut acc = [0.0f32; LANES];
    let (chunks, rest) = row.split_at(row.len() - row.len() % LANES);
    for c in chunks.chunks_exact(LANES) {
        for i in 0..LANES {
            acc[i] += exp(c[i] - m);
        }
    }
    let total = acc.iter().sum::<f32>() + rest.iter().map(|&v| exp(v - m)).sum::<f32>();
    let shift = m + total.ln();
    for v in row.iter_mut() {
        *v -= shift;
    }
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

    /// Products against the definition, row-major and through a transposed table.
    #[test]
    fn products_by_definition() {
        let (m, k, n) = (3, 19, 11);
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
        let w: Vec<f32> = (0..k * n)
            .map(|i| ((i * 5) % 11) as f32 * 0.5 - 2.0)
            .collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32).collect();
        let matrix = Matrix {
            rows: k,
            cols: n,
            data: w.clone(),
            bias: Some(bias.clone()),
        };
        let mut out = Vec::new();
        matrix.apply(&x, m, &mut out);
        // The same matrix stored transposed, [n, k].
        let table: Vec<f32> = (0..n * k).map(|i| w[(i % k) * n + i / k]).collect();
        let mut out_t = Vec::new();
        times_transposed(&x, m, &table, n, &mut out_t);
        for i in 0..m {
            for j in 0..n {
                let want: f32 = (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum();
                assert_eq!(out[i * n + j], want + bias[j]);
                assert_eq!(out_t[i * n + j], want);
            }
        }
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
