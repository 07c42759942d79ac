//! Adam's group kernels: the update, the finite check, the accumulation.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;

use super::{BETA_1, BETA_2};

/// Adam's update of up to [`super::GROUP`] parameters: thread `i` updates element `i` of each
/// parameter that has one, with burn's arithmetic per element.
#[cube(launch_unchecked)]
pub(crate) fn adam_group_kernel(
    params: &mut Sequence<OwnedTensor<f32>>,
    grads: &Sequence<OwnedTensor<f32>>,
    firsts: &mut Sequence<OwnedTensor<f32>>,
    seconds: &mut Sequence<OwnedTensor<f32>>,
    scalars: &Tensor<f32>,
    #[comptime] scaled: bool,
) {
    let i = ABSOLUTE_POS;
    let mut unscale = f32::new(1.0);
    if scaled {
        if scalars[4] == f32::new(0.0) {
            terminate!();
        }
        unscale = scalars[3];
    }
    let lr = scalars[0];
    let combined = scalars[1];
    let epsilon = scalars[2];
    #[unroll]
    for k in 0..params.len() {
        let param = params.index_mut(k);
        if i < param.len() {
            let mut g = grads.index(k)[i];
            if scaled {
                g *= unscale;
            }
            let first = firsts.index_mut(k);
            let second = seconds.index_mut(k);
            let m = first[i] * f32::new(comptime!(BETA_1 as f32))
                + g * f32::new(comptime!((1.0 - BETA_1) as f32));
            let v = second[i] * f32::new(comptime!(BETA_2 as f32))
                + g * g * f32::new(comptime!((1.0 - BETA_2) as f32));
            let step = m * combined / (v.sqrt() + epsilon);
            param[i] -= step * lr;
            first[i] = m;
            second[i] = v;
        }
    }
}

/// Writes 0 into `ok` where any element of up to [`super::GROUP`] gradients is not finite (inf or
/// NaN). Every thread that finds one writes the same value, so the race is benign (as in
/// PyTorch's `_amp_foreach_non_finite_check_and_unscale_`); the caller sets `ok` to 1
/// before.
#[cube(launch_unchecked)]
pub(crate) fn finite_group_kernel(grads: &Sequence<OwnedTensor<f32>>, ok: &mut Tensor<f32>) {
    let i = ABSOLUTE_POS;
    #[unroll]
    for k in 0..grads.len() {
        let grad = grads.index(k);
        if i < grad.len() {
            let g = grad[i];
            if g.is_nan() || g.is_inf() {
                ok[0] = f32::new(0.0);
            }
        }
    }
}

/// Adds up to [`super::GROUP`] gradients into their accumulators, in place (`--accum` under
/// graphs). On a step's first batch (`flags[1]` is 1) the accumulators take the gradients
/// as they are, as burn's `GradientsAccumulator` keeps its first.
#[cube(launch_unchecked)]
pub(crate) fn accumulate_group_kernel(
    sums: &mut Sequence<OwnedTensor<f32>>,
    grads: &Sequence<OwnedTensor<f32>>,
    flags: &Tensor<f32>,
) {
    let i = ABSOLUTE_POS;
    let first = flags[1] > f32::new(0.5);
    #[unroll]
    for k in 0..sums.len() {
        let sum = sums.index_mut(k);
        if i < sum.len() {
            let g = grads.index(k)[i];
            if first {
                sum[i] = g;
            } else {
                sum[i] += g;
            }
        }
    }
}
