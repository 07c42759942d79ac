//! Label-smoothed cross-entropy (§5.4, ε_ls = 0.1 in the paper).

use transduce::burn::prelude::*;
use transduce::burn::tensor::IndexingUpdateOp;
use transduce::burn::tensor::activation::softmax;
use transduce::tokenizer::PAD;

/// Sums over the non-PAD target positions of a batch.
pub struct LossSums {
    /// Σ cross-entropy against the smoothed distribution: what is minimized. Its
    /// gradient reaches the logits when they are tracked.
    pub smoothed: Tensor<1>,
    /// Σ −log p(target): for perplexity (a value only, no gradient).
    pub nll: Tensor<1>,
}

/// Cross-entropy of `logits` `[b, t, v]` against `targets` `[b, t]` with the target
/// distribution q(y) = 1 − ε and q(k) = ε / (v − 1) for every other k, so that
/// `loss = −(1 − ε − ε/(v−1)) · log p(y) − ε/(v−1) · Σ_k log p(k)`. PAD targets count zero.
///
/// Computed fused, as PyTorch's `cross_entropy` is: one softmax over the vocabulary gives
/// both the value and the gradient `∂loss/∂logits = p − q`, so no log-softmax graph over
/// the `[b·t, v]` logits is recorded and differentiated op by op (that graph, for an
/// 8,000-word vocabulary, costs more passes over memory than the softmax itself). The
/// gradient enters autodiff through `Σ (p − q) · logits` with `p − q` a constant, whose
/// gradient is exactly `p − q`; its value is swapped for the loss's own.
pub fn label_smoothed(logits: Tensor<3>, targets: Tensor<2, Int>, epsilon: f64) -> LossSums {
    let [b, t, v] = logits.dims();
    let n = b * t;
    let tracked = logits.is_require_grad() || logits.is_tracked();
    let logits = logits.reshape([n, v]);
    let z = logits.clone().without_autodiff();
    let targets = targets.reshape([n, 1]).without_autodiff();
    let keep = targets.clone().not_equal_elem(PAD as i64).float();
    let p = softmax(z.clone(), 1);
    // log Σ_k e^{z_k} = max z − log max p: max p ≥ 1/v never underflows, so −log p(y)
    // stays finite however confident the model is.
    let log_norm = z.clone().max_dim(1) - p.clone().max_dim(1).log();
    let nll = (log_norm.clone() - z.clone().gather(1, targets.clone())) * keep.clone();
    let spread = epsilon / (v as f64 - 1.0);
    let smoothed = if epsilon > 0.0 {
        // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
        let uniform = (log_norm.mul_scalar(v as f64) - z.sum_dim(1)) * keep.clone();
        nll.clone().mul_scalar(1.0 - epsilon - spread) + uniform.mul_scalar(spread)
    } else {
        nll.clone()
    };
    let (smoothed, nll) = (smoothed.sum(), nll.sum());
    if !tracked {
        return LossSums { smoothed, nll };
    }
    // p − q on the kept rows: q = spread everywhere plus 1 − ε − spread at the target.
    let at_target = Tensor::<2>::full([n, 1], -(1.0 - epsilon - spread), &p.device());
    let grad = p
        .sub_scalar(spread)
        .scatter(1, targets, at_target, IndexingUpdateOp::Add);
    let surrogate = (logits * grad).sum_dim(1) * keep;
    let surrogate = surrogate.sum();
    let smoothed = surrogate.clone() - surrogate.detach() + smoothed;
    LossSums { smoothed, nll }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transduce::burn::tensor::activation::log_softmax;

    fn scalar(t: Tensor<1>) -> f64 {
        t.into_data().try_into_vec_as::<f64>().unwrap()[0]
    }

    #[test]
    fn hand_computed_value() {
        let device = Device::flex();
        // p = softmax(logits) = [0.25, 0.5, 0.25]; target 1; ε = 0.1 → q = [0.05, 0.9, 0.05]
        // CE = −(0.9·ln 0.5 + 0.05·ln 0.25 + 0.05·ln 0.25) = 0.9·0.693147 + 0.1·1.386294
        //    = 0.762462; NLL = ln 2 = 0.693147. A PAD target (id 0) in position 2 adds nothing.
        let logits = Tensor::<1>::from_floats(
            [0.25f32.ln(), 0.5f32.ln(), 0.25f32.ln(), 3.0, 1.0, -2.0],
            &device,
        )
        .reshape([1, 2, 3]);
        let targets = Tensor::<2, Int>::from_data([[1i32, PAD as i32]], &device);
        let sums = label_smoothed(logits.clone(), targets.clone(), 0.1);
        assert!((scalar(sums.smoothed) - 0.762_462).abs() < 1e-5);
        assert!((scalar(sums.nll) - std::f64::consts::LN_2).abs() < 1e-5);
        let plain = label_smoothed(logits, targets, 0.0);
        assert!((scalar(plain.smoothed) - std::f64::consts::LN_2).abs() < 1e-5);
    }

    /// The loss written op by op from its definition, differentiated by autodiff.
    fn reference(logits: Tensor<3>, targets: Tensor<2, Int>, epsilon: f64) -> Tensor<1> {
        let [b, t, v] = logits.dims();
        let n = b * t;
        let log_p = log_softmax(logits.reshape([n, v]), 1);
        let targets = targets.reshape([n, 1]);
        let keep = targets.clone().not_equal_elem(PAD as i64).float();
        let spread = epsilon / (v as f64 - 1.0);
        let q = Tensor::<2>::full([n, v], spread, &log_p.device()).scatter(
            1,
            targets,
            Tensor::full([n, 1], 1.0 - epsilon - spread, &log_p.device()),
            IndexingUpdateOp::Add,
        );
        (log_p * q * keep).sum().neg()
    }

    /// The fused loss has the value and the gradient of the definition, PAD rows included.
    #[test]
    fn gradient_matches_the_definition() {
        let device = Device::flex().autodiff();
        let (b, t, v) = (2, 3, 7);
        let values: Vec<f32> = (0..b * t * v)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.4)
            .collect();
        let targets = Tensor::<2, Int>::from_data([[3i32, 1, PAD as i32], [6, 2, 5]], &device);
        for epsilon in [0.0, 0.1] {
            let leaf = || {
                Tensor::<1>::from_floats(values.as_slice(), &device)
                    .reshape([b, t, v])
                    .require_grad()
            };
            let (x, y) = (leaf(), leaf());
            let fused = label_smoothed(x.clone(), targets.clone(), epsilon).smoothed;
            let expected = reference(y.clone(), targets.clone(), epsilon);
            let (fused_value, expected_value) = (scalar(fused.clone()), scalar(expected.clone()));
            assert!((fused_value - expected_value).abs() < 1e-5 * expected_value.abs());
            let gx = x.grad(&fused.backward()).unwrap().into_data();
            let gy = y.grad(&expected.backward()).unwrap().into_data();
            let (gx, gy) = (
                gx.try_to_vec::<f32>().unwrap(),
                gy.try_to_vec::<f32>().unwrap(),
            );
            for (i, (a, e)) in gx.iter().zip(&gy).enumerate() {
                assert!((a - e).abs() < 1e-6, "ε {epsilon}, element {i}: {a} vs {e}");
            }
            // The PAD position gets no gradient at all.
            assert!(gx[2 * v..3 * v].iter().all(|&g| g == 0.0));
        }
    }

    /// A confident wrong prediction (p(target) ≈ e^-200) has a finite loss of ≈ 200.
    #[test]
    fn confident_mistakes_stay_finite() {
        let device = Device::flex();
        let logits = Tensor::<1>::from_floats([200.0, 0.0, 0.0], &device).reshape([1, 1, 3]);
        let targets = Tensor::<2, Int>::from_data([[2i32]], &device);
        let nll = scalar(label_smoothed(logits, targets, 0.1).nll);
        assert!((nll - 200.0).abs() < 1e-3, "{nll}");
    }
}
