//! The plain loops: the kernel of targets without a faster one, and the oracle the others
//! are tested against (every kernel's int32 sums are exact, so all agree bit for bit).

use super::matrix::{GROUP, Int8Matrix, PANEL};

/// The plain loops, over the same packed layout.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
pub fn product(w: &Int8Matrix, x: &[i8], row_scales: &[f32], out: &mut [f32]) {
    let mut sums = vec![0i32; w.n];
    for (i, &sx) in row_scales.iter().enumerate() {
        sums.fill(0);
        let row = &x[i * w.k_padded..(i + 1) * w.k_padded];
        for (sums, (start, width)) in sums.chunks_mut(PANEL).zip(w.panels()) {
            let panel = &w.packed[start..start + w.k_padded * width];
            for (group, block) in row
                .chunks_exact(GROUP)
                .zip(panel.chunks_exact(width * GROUP))
            {
                for (sum, w) in sums.iter_mut().zip(block.chunks_exact(GROUP)) {
                    for (&a, &b) in group.iter().zip(w) {
                        *sum += a as i32 * b as i32;
                    }
                }
            }
        }
        w.finish_row(&sums, sx, &mut out[i * w.n..(i + 1) * w.n]);
    }
}
