//! The loss on burn's tensors through the kernel.

use burn::backend::Dispatch;
use burn::tensor::{Int, Tensor};

use super::forward::LossKernel;

/// The label-smoothed cross-entropy of `logits` `[rows, v]` (on a cubecl device; f32, or
/// f16 or bf16 read as such) against `targets` `[rows, 1]` with smoothing `epsilon`, as one
/// kernel, a workgroup per row: the smoothed loss and −log p(target) summed over the rows
/// (`[1]` each, f32), and, when `tracked`, the smoothed loss's gradient `p − q` (`[rows,
/// v]`, f32). Rows whose target is `pad` count zero.
pub fn smoothed_cross_entropy(
    logits: &Tensor<2>,
    targets: &Tensor<2, Int>,
    epsilon: f64,
    tracked: bool,
    pad: u32,
) -> (Tensor<1>, Tensor<1>, Option<Tensor<2>>) {
    let z = logits.clone().without_autodiff();
    let [n, _] = z.dims();
    // Ids as floats: exact below 2²⁴, and the kernel reads one type.
    let ids = targets.clone().float().reshape([n]);
    let (sums, grad) = <Dispatch as LossKernel>::smoothed_cross_entropy(
        z.into_dispatch(),
        ids.into_dispatch(),
        epsilon,
        tracked,
        pad,
    );
    let sums = Tensor::<2>::from_dispatch(sums).sum_dim(0).reshape([2]);
    (
        sums.clone().slice(0..1),
        sums.slice(1..2),
        tracked.then(|| Tensor::from_dispatch(grad)),
    )
}
