//! Label-smoothed cross-entropy (§5.4, ε_ls = 0.1 in the paper).

use transduce::burn::prelude::*;
use transduce::burn::tensor::activation::log_softmax;
use transduce::tokenizer::PAD;

/// Sums over the non-PAD target positions of a batch.
pub struct LossSums {
    /// Σ cross-entropy against the smoothed distribution: what is minimized.
    pub smoothed: Tensor<1>,
    /// Σ −log p(target): for perplexity.
    pub nll: Tensor<1>,
}

/// Cross-entropy of `logits` `[b, t, v]` against `targets` `[b, t]` with the target
/// distribution q(y) = 1 − ε and q(k) = ε / (v − 1) for every other k, so that
/// `loss = −(1 − ε − ε/(v−1)) · log p(y) − ε/(v−1) · Σ_k log p(k)`. PAD targets count zero.
pub fn label_smoothed(logits: Tensor<3>, targets: Tensor<2, Int>, epsilon: f64) -> LossSums {
    let [b, t, v] = logits.dims();
    let n = b * t;
    let log_p = log_softmax(logits.reshape([n, v]), 1);
    let targets = targets.reshape([n, 1]);
    let keep = targets
        .clone()
        .not_equal_elem(PAD as i64)
        .reshape([n])
        .float();
    let nll = log_p.clone().gather(1, targets).reshape([n]).neg() * keep.clone();
    let smoothed = if epsilon > 0.0 {
        let spread = epsilon / (v as f64 - 1.0);
        let uniform = log_p.sum_dim(1).reshape([n]).neg() * keep;
        nll.clone().mul_scalar(1.0 - epsilon - spread) + uniform.mul_scalar(spread)
    } else {
        nll.clone()
    };
    LossSums {
        smoothed: smoothed.sum(),
        nll: nll.sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
