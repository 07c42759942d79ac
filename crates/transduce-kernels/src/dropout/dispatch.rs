//! Masks on burn's tensors for one step.

use burn::backend::Dispatch;
use burn::tensor::Tensor;

use super::forward::DropoutMask;

/// The masks of one step, as the model's dropout asks for them (`transduce::dropout`'s
/// `DeviceMasks`): for an input `like`, dropout site `site` and keep probability `keep`, a
/// mask drawn on the device from `step` (`[1]`, the optimizer's updates so far, read at run
/// time) and the run's `seed`.
pub fn step_masks(step: Tensor<1>, seed: u64) -> impl Fn(Tensor<1>, u64, f64) -> Tensor<1> {
    let seed = (seed ^ (seed >> 32)) as u32;
    move |like: Tensor<1>, site: u64, keep: f64| {
        Tensor::from_dispatch(<Dispatch as DropoutMask>::dropout_mask(
            like.into_dispatch(),
            step.clone().into_dispatch(),
            seed,
            site as u32,
            keep,
        ))
    }
}
