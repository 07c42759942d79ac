//! The norm's kernels: [`ROWS`] rows a workgroup, [`LANES`] threads a row, forward and
//! backward.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};

use crate::reduce::across_lanes;

/// Threads that share one row (their partial sums meet in workgroup memory).
pub(crate) const LANES: u32 = 32;
/// Rows per workgroup: 256 threads.
pub(crate) const ROWS: u32 = 8;

/// The sum of `value` over the [`LANES`] threads of this thread's row, the same in each of
/// them. Every thread of the workgroup must call it (it synchronizes the workgroup).
#[cube]
fn row_total(shared: &mut Shared<[f32]>, value: f32) -> f32 {
    across_lanes(
        shared,
        value,
        (UNIT_POS_Y * LANES) as usize,
        UNIT_POS_X as usize,
        comptime!(LANES as usize),
        false,
    )
}

/// The mean of the row of `z` at `base` (`width` values), in every thread of the row;
/// rows not `live` (past the end) read nothing but take part in the barriers.
#[cube]
fn row_mean<F: Float>(
    z: &LinearView<'_, F>,
    shared: &mut Shared<[f32]>,
    base: usize,
    live: bool,
    #[comptime] width: usize,
) -> f32 {
    let mut sum = 0.0f32;
    if live {
        let mut j = UNIT_POS_X as usize;
        while j < width {
            sum += f32::cast_from(z.read(base + j));
            j += LANES as usize;
        }
    }
    row_total(shared, sum) / f32::cast_from(width)
}

/// √(var + ε) of the row around its `mean`: two passes, as burn's norm (the variance of
/// the centred values).
#[cube]
fn row_deviation<F: Float>(
    z: &LinearView<'_, F>,
    shared: &mut Shared<[f32]>,
    base: usize,
    live: bool,
    mean: f32,
    epsilon: f32,
    #[comptime] width: usize,
) -> f32 {
    let mut squares = 0.0f32;
    if live {
        let mut j = UNIT_POS_X as usize;
        while j < width {
            let c = f32::cast_from(z.read(base + j)) - mean;
            squares += c * c;
            j += LANES as usize;
        }
    }
    (row_total(shared, squares) / f32::cast_from(width) + epsilon).sqrt()
}

#[cube(launch_unchecked)]
pub(crate) fn norm_forward<F: Float>(
    z: &LinearView<'_, F>,
    gamma: &LinearView<'_, f32>,
    beta: &LinearView<'_, f32>,
    out: &mut LinearViewMut<'_, F>,
    rows: InputScalar,
    epsilon: InputScalar,
    #[comptime] width: usize,
    #[define(F)] _dtype: ElemType,
) {
    let mut shared = Shared::<[f32]>::new_slice(comptime!((LANES * ROWS) as usize));
    let row = CUBE_POS * ROWS as usize + UNIT_POS_Y as usize;
    // Rows past the end still take part in the barriers; they read and write nothing.
    let live = row < rows.get::<u32>() as usize;
    let base = row * width;
    let lanes = LANES as usize;

    let mean = row_mean(z, &mut shared, base, live, width);
    let denom = row_deviation(
        z,
        &mut shared,
        base,
        live,
        mean,
        epsilon.get::<f32>(),
        width,
    );

    if live {
        let mut j = UNIT_POS_X as usize;
        while j < width {
            let normalized = (f32::cast_from(z.read(base + j)) - mean) / denom;
            out.write(
                base + j,
                F::cast_from(normalized * gamma.read(j) + beta.read(j)),
            );
            j += lanes;
        }
    }
}

/// With x̂ = (z − μ)/σ and g = dy·γ: dz = (g − mean(g) − x̂·mean(g·x̂))/σ; and the rows
/// `[dy·x̂, dy]` side by side, whose column sums are γ's and β's gradients (one reduction
/// for both).
#[cube(launch_unchecked)]
pub(crate) fn norm_backward<F: Float>(
    z: &LinearView<'_, F>,
    gamma: &LinearView<'_, f32>,
    dy: &LinearView<'_, F>,
    dz: &mut LinearViewMut<'_, F>,
    stacked: &mut LinearViewMut<'_, f32>,
    rows: InputScalar,
    epsilon: InputScalar,
    #[comptime] width: usize,
    #[define(F)] _dtype: ElemType,
) {
    let mut shared = Shared::<[f32]>::new_slice(comptime!((LANES * ROWS) as usize));
    let row = CUBE_POS * ROWS as usize + UNIT_POS_Y as usize;
    let live = row < rows.get::<u32>() as usize;
    let base = row * width;
    let lanes = LANES as usize;
    let n = f32::cast_from(width);

    let mean = row_mean(z, &mut shared, base, live, width);
    let denom = row_deviation(
        z,
        &mut shared,
        base,
        live,
        mean,
        epsilon.get::<f32>(),
        width,
    );

    let mut g_sum = 0.0f32;
    let mut gx_sum = 0.0f32;
    if live {
        let mut j = UNIT_POS_X as usize;
        while j < width {
            let xhat = (f32::cast_from(z.read(base + j)) - mean) / denom;
            let d = f32::cast_from(dy.read(base + j));
            let g = d * gamma.read(j);
            g_sum += g;
            gx_sum += g * xhat;
            stacked.write(2 * base + j, d * xhat);
            stacked.write(2 * base + width + j, d);
            j += lanes;
        }
    }
    let g_mean = row_total(&mut shared, g_sum) / n;
    let gx_mean = row_total(&mut shared, gx_sum) / n;

    if live {
        let mut j = UNIT_POS_X as usize;
        while j < width {
            let xhat = (f32::cast_from(z.read(base + j)) - mean) / denom;
            let g = f32::cast_from(dy.read(base + j)) * gamma.read(j);
            dz.write(
                base + j,
                F::cast_from((g - g_mean - xhat * gx_mean) / denom),
            );
            j += lanes;
        }
    }
}
