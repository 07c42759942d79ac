//! The relaxed-SIMD kernel checked against the definition before it is used.

use super::matrix::Int8Matrix;
use super::quantize::quantize_activations;
use super::random::random;
use super::relaxed::{RELAXED, RelaxedDot};

/// Registers (or withdraws, `None`) the relaxed-SIMD kernel for the matrices made from now
/// on. The kernel is checked first, against the definition on random products whose sizes
/// reach every row block (1 to 4 rows), tails of both dimensions and panels of two widths
/// (150 columns: 64, 64 and 32): a browser whose
/// instruction disagrees (the result outside 7-bit operands is implementation-defined)
/// gets `false` and the SIMD128 kernel.
pub fn use_relaxed_dot(kernel: Option<RelaxedDot>) -> bool {
    RELAXED.set(kernel);
    if kernel.is_none() {
        return false;
    }
    let mut state = 29;
    let agrees = [(7, 37, 29), (1, 5, 3), (2, 192, 17), (3, 40, 150)]
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
        RELAXED.set(None);
    }
    agrees
}
