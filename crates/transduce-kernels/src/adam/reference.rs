//! The kernels' oracle: Adam's update (§5.3), the finite check and the accumulation as
//! burn's tensor operations. The trainer's `DeviceAdam` runs these where the kernels do not
//! (the CPU, `--no-fused-layers`), so the oracle is the unfused path itself.

use burn::tensor::Tensor;

use super::{BETA_1, BETA_2};

/// One flattened parameter's update by burn's `Adam` formulas, in burn's order: the new
/// parameter, first and second moments. `scalars` is `[lr, combined bias correction, scaled
/// ε]` (the kernel's), then under a loss scale `[1/scale, ok]`: the gradient is unscaled,
/// and where `ok` is 0 every value stays as it was (the step is skipped).
pub fn update(
    param: Tensor<1>,
    grad: Tensor<1>,
    first: Tensor<1>,
    second: Tensor<1>,
    scalars: &Tensor<1>,
) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
    let n = param.dims()[0];
    let [lr, combined, epsilon] = [0, 1, 2].map(|i| scalars.clone().slice(i..i + 1));
    let (grad, skipped) = match scalars.dims()[0] {
        5 => (
            grad.mul(scalars.clone().slice(3..4)),
            Some(scalars.clone().slice(4..5).equal_elem(0.0).expand([n])),
        ),
        _ => (grad, None),
    };
    let m = first
        .clone()
        .mul_scalar(BETA_1)
        .add(grad.clone().mul_scalar(1.0 - BETA_1));
    let v = second
        .clone()
        .mul_scalar(BETA_2)
        .add(grad.square().mul_scalar(1.0 - BETA_2));
    let step = m.clone().mul(combined).div(v.clone().sqrt().add(epsilon));
    let next = param.clone().sub(step.mul(lr));
    match skipped {
        Some(skipped) => (
            next.mask_where(skipped.clone(), param),
            m.mask_where(skipped.clone(), first),
            v.mask_where(skipped, second),
        ),
        None => (next, m, v),
    }
}

/// `[1]` if every element of every gradient is finite, else `[0]`: one sum per gradient
/// (inf and NaN survive a sum: inf − inf is NaN), then theirs.
pub fn all_finite(grads: &[Tensor<1>]) -> Tensor<1> {
    let sums = grads.iter().map(|g| g.clone().sum()).collect();
    Tensor::cat(sums, 0).sum().is_finite().float()
}

/// An accumulator after one batch: the gradient itself on a step's first batch, else the
/// sum so far plus it.
pub fn accumulate(sum: Tensor<1>, grad: Tensor<1>, first: bool) -> Tensor<1> {
    if first { grad } else { sum.add(grad) }
}
