//! The mask kernel: a counter-based hash per element.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};

/// A 32-bit integer hash with good avalanche ("lowbias32", Chris Wellons' hash prospector).
#[cube]
fn mix(x: u32) -> u32 {
    let mut x = x;
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    x ^= x >> 16;
    x
}

/// Element `i` of the mask, in the mask's type `F` (the activations': f32, f16 or bf16), so
/// that a half-precision step's mask holds half-precision values (1/keep rounded to `F`).
#[cube(launch_unchecked)]
pub(crate) fn mask_kernel<F: Float>(
    mask: &mut LinearViewMut<'_, F>,
    step: &LinearView<'_, f32>,
    seed: InputScalar,
    site: InputScalar,
    threshold: InputScalar,
    scale: InputScalar,
    #[define(F)] _dtype: ElemType,
) {
    let i = ABSOLUTE_POS;
    if !mask.is_in_bounds(i) {
        terminate!();
    }
    let step = u32::cast_from(step.read(0));
    let stream = mix(mix(seed.get::<u32>() ^ mix(step)) ^ (site.get::<u32>() * 0x9e3779b9));
    let bits = mix(mix(u32::cast_from(i) ^ stream) + stream);
    let keep = bits < threshold.get::<u32>();
    mask.write(i, F::cast_from(select(keep, scale.get::<f32>(), 0.0f32)));
}
