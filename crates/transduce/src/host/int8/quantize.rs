//! Rows quantized symmetrically to int8 (weights, 8 bits) or 7 bits (activations), with
//! their scales.

use crate::host::rows::max_abs;

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
    if crate::host::isa::avx2() {
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
    let big = max_abs(row);
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
    if max_abs(row) * inverse >= limit {
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
