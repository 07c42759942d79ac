//! The floating-point type a forward pass computes in.
//!
//! The paper trained in f32 (§5.2 does not say otherwise); half precision (f16, bf16) is
//! how GPUs are used for training today. burn 0.22 has no autocast, so the model does it:
//! parameters stay f32 (the optimizer's master weights, updated in f32 by Adam) and each
//! weight is cast to the activations' type where it is used, so gradients flow back
//! through the cast to the f32 parameter. What half precision loses most easily stays in
//! f32, as mixed-precision training does elsewhere: attention scores and their softmax,
//! the layer norms' statistics, and the loss (the logits are cast up before it).
//!
//! The compute type enters once, at the embeddings ([`crate::model::Transformer::with_precision`]);
//! every later operation follows the type of its input, so f32 (the default, and all that
//! inference uses) casts nothing.

use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::module::linear;
use serde::{Deserialize, Serialize};

/// The type activations are computed in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32.
    #[default]
    F32,
    /// IEEE half: 10-bit mantissa, range ±65,504 (training needs loss scaling).
    F16,
    /// bfloat16: f32's range with an 8-bit mantissa (no loss scaling needed).
    Bf16,
}

impl Precision {
    /// Every precision, in the order users see them listed.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::F16, Precision::Bf16];

    /// The precision a user named (`f32`, `f16`, `bf16`).
    pub fn from_name(name: &str) -> Option<Precision> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// burn's dtype for this precision.
    pub fn dtype(self) -> FloatDType {
        match self {
            Precision::F32 => FloatDType::F32,
            Precision::F16 => FloatDType::F16,
            Precision::Bf16 => FloatDType::BF16,
        }
    }

    /// The name users type (`f32`, `f16`, `bf16`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::Bf16 => "bf16",
        }
    }
}

/// `x·W + b` with `W` and `b` cast to the type of `x` (a no-op when they match).
pub fn apply_linear(layer: &Linear, x: Tensor<2>) -> Tensor<2> {
    let dtype = x.dtype();
    linear(
        x,
        layer.weight.val().cast(dtype),
        layer.bias.as_ref().map(|b| b.val().cast(dtype)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_json() {
        for p in Precision::ALL {
            assert_eq!(Precision::from_name(p.name()), Some(p));
            let json = serde_json::to_string(&p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Precision>(&json).unwrap(), p);
        }
    }
}
