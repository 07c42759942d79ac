//! The loss kernel: a workgroup of [`THREADS`] per row of logits.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};

use crate::reduce::across_groups;

/// Threads per row.
pub(crate) const THREADS: usize = 256;

/// Threads that each fold [`GROUP`] partial values, then [`GROUP`] of those are folded.
const GROUP: usize = 16;

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn smoothed_cross_entropy<F: Float>(
    logits: &LinearView<'_, F>,
    targets: &LinearView<'_, f32>,
    sums: &mut LinearViewMut<'_, f32>,
    grad: &mut LinearViewMut<'_, f32>,
    rows: InputScalar,
    epsilon: InputScalar,
    #[comptime] vocab: usize,
    #[comptime] tracked: bool,
    #[comptime] pad: usize,
    #[define(F)] _dtype: ElemType,
) {
    let row = CUBE_POS;
    if row >= rows.get::<u32>() as usize {
        terminate!();
    }
    let t = UNIT_POS as usize;
    let mut shared = Shared::<[f32]>::new_slice(THREADS);
    let base = row * vocab;
    let eps = epsilon.get::<f32>();
    let spread = eps / f32::cast_from(vocab - 1);

    let mut m = f32::new(-3.0e38);
    let mut j = t;
    while j < vocab {
        m = f32::max(m, f32::cast_from(logits.read(base + j)));
        j += THREADS;
    }
    let m = across_groups(&mut shared, m, comptime!(THREADS), comptime!(GROUP), true);
    let mut exps = 0.0f32;
    let mut total = 0.0f32;
    let mut j = t;
    while j < vocab {
        let z = f32::cast_from(logits.read(base + j));
        exps += (z - m).exp();
        total += z;
        j += THREADS;
    }
    let exps = across_groups(
        &mut shared,
        exps,
        comptime!(THREADS),
        comptime!(GROUP),
        false,
    );
    let total = across_groups(
        &mut shared,
        total,
        comptime!(THREADS),
        comptime!(GROUP),
        false,
    );
    let log_norm = m + exps.ln();
    let target = u32::cast_from(targets.read(row)) as usize;
    let keep = target != pad;
    if t == 0 {
        let mut nll = 0.0f32;
        let mut smoothed = 0.0f32;
        if keep {
            nll = log_norm - f32::cast_from(logits.read(base + target));
            // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
            let uniform = f32::cast_from(vocab) * log_norm - total;
            smoothed = nll * (1.0f32 - eps - spread) + uniform * spread;
        }
        sums.write(2 * row, smoothed);
        sums.write(2 * row + 1, nll);
    }
    if tracked {
        let mut j = t;
        while j < vocab {
            // p − q: q = spread everywhere plus 1 − ε − spread at the target; 0 on PAD.
            let mut g = 0.0f32;
            if keep {
                g = (f32::cast_from(logits.read(base + j)) - m).exp() / exps - spread;
                if j == target {
                    g -= 1.0f32 - eps - spread;
                }
            }
            grad.write(base + j, g);
            j += THREADS;
        }
    }
}
