//! The products against their definition, every kernel against the plain loops.

use super::random::random;
#[cfg(target_arch = "x86_64")]
use super::x86;
use super::*;

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
        (6, 100, 100),
        (5, 40, 200),
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
                let exact: f32 = (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum::<f32>() + bias[j];
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
            super::portable::product(&matrix, &quantized, &scales, &mut portable);
            assert_eq!(portable, out);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                let mut avx2 = vec![0.0; m * n];
                // SAFETY: the CPU has AVX2; the activations come from quantize_activations.
                unsafe { x86::avx2(&matrix, &mut quantized.clone(), &scales, &mut avx2) };
                assert_eq!(avx2, out);
            }
        }
    }
}

/// The packed panels hold every quantized row exactly once: each (input, output) pair at
/// its own place, the padding zero, for panels of every width the padding leaves (16, 32,
/// 48 and 64 columns).
#[test]
fn packed_panels_hold_the_rows() {
    let mut state = 5;
    for (k, n) in [
        (1, 1),
        (5, 64),
        (7, 65),
        (9, 100),
        (4, 130),
        (3, 200),
        (2, 250),
    ] {
        let rows: Vec<i8> = random(n * k, &mut state, 100.0)
            .iter()
            .map(|v| v.clamp(-127.0, 127.0) as i8)
            .collect();
        let matrix = Int8Matrix::from_rows(k, n, &rows, vec![1.0; n], None);
        assert_eq!(matrix.rows_and_scales().0, rows, "{k}×{n}");
        #[cfg(not(target_arch = "wasm32"))]
        {
            let mut seen = vec![false; matrix.packed.len()];
            for i in 0..matrix.k_padded {
                for j in 0..matrix.n_padded {
                    let at = matrix.offset(i, j);
                    assert!(!seen[at], "{k}×{n}: ({i}, {j}) shares {at}");
                    seen[at] = true;
                    if i >= k || j >= n {
                        assert_eq!(matrix.packed[at], 0, "{k}×{n}: padding at ({i}, {j})");
                    }
                }
            }
            assert!(seen.iter().all(|&s| s), "{k}×{n}");
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
