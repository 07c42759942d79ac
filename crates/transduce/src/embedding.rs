//! Token embeddings scaled by √d_model (§3.4) and positional encodings (§3.5).

use burn::prelude::*;

/// The sinusoidal encoding of §3.5 for positions `start..start+len`:
/// PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)).
///
/// Computed on the host in f64 and uploaded: it is a constant, cheap next to any layer, and
/// computing it in f64 keeps large positions accurate.
pub fn sinusoid_table(start: usize, len: usize, d_model: usize) -> Vec<f32> {
    let mut table = Vec::with_capacity(len * d_model);
    // 10000^(2i/d_model) per dimension, once: the same values as computed per position
    // (a thousand rows of d_model `powf` calls were a twentieth of loading a bundle in wasm).
    let denominators: Vec<f64> = (0..d_model)
        .map(|j| 10_000f64.powf(2.0 * (j / 2) as f64 / d_model as f64))
        .collect();
    for pos in start..start + len {
        for (j, &denominator) in denominators.iter().enumerate() {
            let angle = pos as f64 / denominator;
            table.push(if j % 2 == 0 { angle.sin() } else { angle.cos() } as f32);
        }
    }
    table
}

/// Sinusoidal positions `start..start+len` as a `[1, len, d_model]` tensor.
pub fn sinusoid(start: usize, len: usize, d_model: usize, device: &Device) -> Tensor<3> {
    Tensor::<1>::from_floats(sinusoid_table(start, len, d_model).as_slice(), device)
        .reshape([1, len, d_model])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_formula_of_section_3_5() {
        let d = 512;
        let table = sinusoid_table(0, 60, d);
        // Hand-evaluated points of PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(..).
        let cases = [
            (0usize, 0usize, 0.0f64), // sin(0)
            (0, 1, 1.0),              // cos(0)
            (1, 0, 1f64.sin()),       // 2i = 0: angle = pos
            (1, 1, 1f64.cos()),
            (50, 0, 50f64.sin()),
            (7, 2, (7.0 / 10_000f64.powf(2.0 / 512.0)).sin()),
            (7, 3, (7.0 / 10_000f64.powf(2.0 / 512.0)).cos()),
            (59, 510, (59.0 / 10_000f64.powf(510.0 / 512.0)).sin()),
            (59, 511, (59.0 / 10_000f64.powf(510.0 / 512.0)).cos()),
        ];
        for (pos, j, expected) in cases {
            let got = table[pos * d + j] as f64;
            assert!(
                (got - expected).abs() < 1e-6,
                "PE({pos},{j}) = {got}, want {expected}"
            );
        }
        // A shifted window is the same rows of the table.
        let shifted = sinusoid_table(10, 5, d);
        assert_eq!(&shifted[..], &table[10 * d..15 * d]);
    }
}
