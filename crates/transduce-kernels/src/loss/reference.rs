//! The kernel's oracle: the loss sums and `p − q` as burn's tensor operations, the formulas
//! of the model's unfused path (`transduce::train::loss`, which the browser's build needs
//! without this crate and so keeps its own copy), on logits cast to f32 first as that path
//! casts them.

use burn::tensor::activation::softmax;
use burn::tensor::{FloatDType, IndexingUpdateOp, Int, Tensor};

/// What [`super::smoothed_cross_entropy`] returns, by tensor operations: the smoothed loss
/// and −log p(target) summed over the rows of `logits` `[rows, v]` whose target
/// (`targets` `[rows, 1]`) is not `pad`, and when `tracked` the gradient `p − q`.
pub fn smoothed_cross_entropy(
    logits: &Tensor<2>,
    targets: &Tensor<2, Int>,
    epsilon: f64,
    tracked: bool,
    pad: u32,
) -> (Tensor<1>, Tensor<1>, Option<Tensor<2>>) {
    let [n, v] = logits.dims();
    let z = logits.clone().without_autodiff().cast(FloatDType::F32);
    let keep = targets.clone().not_equal_elem(pad as i64).float();
    let p = softmax(z.clone(), 1);
    // log Σ_k e^{z_k} = max z − log max p: max p ≥ 1/v never underflows.
    let log_norm = z.clone().max_dim(1) - p.clone().max_dim(1).log();
    let nll = (log_norm.clone() - z.clone().gather(1, targets.clone())) * keep.clone();
    let spread = epsilon / (v as f64 - 1.0);
    // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
    let uniform = (log_norm.mul_scalar(v as f64) - z.sum_dim(1)) * keep.clone();
    let smoothed = nll.clone().mul_scalar(1.0 - epsilon - spread) + uniform.mul_scalar(spread);
    let grad = tracked.then(|| {
        // p − q on the kept rows: q = spread everywhere plus 1 − ε − spread at the target.
        let at_target = Tensor::<2>::full([n, 1], -(1.0 - epsilon - spread), &p.device());
        p.sub_scalar(spread)
            .scatter(1, targets.clone(), at_target, IndexingUpdateOp::Add)
            * keep
    });
    (smoothed.sum(), nll.sum(), grad)
}
