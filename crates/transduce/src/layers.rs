//! Encoder and decoder layers (§3.1): each sub-layer is wrapped as
//! `LayerNorm(x + Dropout(Sublayer(x)))` (post-LN, with residual dropout of §5.4).

use burn::nn::{Initializer, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{relu, silu};

use crate::attention::{KvCache, MultiHeadAttention};
use crate::config::{Activation, ModelConfig};
use crate::dropout::Dropout;
use crate::ops::{NORM_EPSILON, layer_norm};
use crate::positionwise::positionwise;
use crate::precision::apply_linear;

/// The residual connection around a sub-layer: LayerNorm(x + Dropout(Sublayer(x)))
/// (§3.1, with the dropout of §5.4), the norm in f32 ([`layer_norm`], fused where `fused`
/// allows it).
fn residual(
    norm: &LayerNorm,
    dropout: &Dropout,
    x: Tensor<3>,
    sublayer: Tensor<3>,
    fused: bool,
) -> Tensor<3> {
    layer_norm(norm, x + dropout.forward(sublayer), fused)
}

/// FFN(x) = max(0, xW1 + b1)W2 + b2 (§3.3), or with swish in place of max(0, ·) for
/// models that use it ([`Activation`]).
#[derive(Module, Debug)]
pub struct FeedForward {
    pub fc1: Linear,
    pub fc2: Linear,
    #[module(skip)]
    activation: Activation,
}

impl FeedForward {
    pub fn new(d_model: usize, d_ff: usize, activation: Activation, device: &Device) -> Self {
        let linear = |i, o| {
            LinearConfig::new(i, o)
                .with_initializer(Initializer::XavierUniform { gain: 1.0 })
                .init(device)
        };
        FeedForward {
            fc1: linear(d_model, d_ff),
            fc2: linear(d_ff, d_model),
            activation,
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        positionwise(x, |x| {
            let hidden = apply_linear(&self.fc1, x);
            let hidden = match self.activation {
                Activation::Relu => relu(hidden),
                Activation::Swish => silu(hidden),
            };
            apply_linear(&self.fc2, hidden)
        })
    }
}

fn attention(config: &ModelConfig, device: &Device) -> MultiHeadAttention {
    MultiHeadAttention::new(
        config.d_model,
        config.n_heads,
        config.d_k,
        config.d_v,
        config.attention_dropout,
        config.attention_bias,
        device,
    )
}

fn norm(config: &ModelConfig, device: &Device) -> LayerNorm {
    LayerNormConfig::new(config.d_model)
        .with_epsilon(NORM_EPSILON)
        .init(device)
}

/// Encoder layer: self-attention then FFN (§3.1).
#[derive(Module, Debug)]
pub struct EncoderLayer {
    pub self_attn: MultiHeadAttention,
    pub self_attn_norm: LayerNorm,
    pub ffn: FeedForward,
    pub ffn_norm: LayerNorm,
    dropout: Dropout,
}

impl EncoderLayer {
    pub fn new(config: &ModelConfig, device: &Device) -> Self {
        EncoderLayer {
            self_attn: attention(config, device),
            self_attn_norm: norm(config, device),
            ffn: FeedForward::new(config.d_model, config.d_ff, config.activation, device),
            ffn_norm: norm(config, device),
            dropout: Dropout::new(config.dropout),
        }
    }

    /// `x`: `[b, s, d_model]`; `blocked`: source padding, `[b, 1, 1, s]`; `fused`: the
    /// fused kernels allowed ([`crate::ops::fused`]).
    pub fn forward(
        &self,
        x: Tensor<3>,
        blocked: &Tensor<4, Bool>,
        need_weights: bool,
        fused: bool,
    ) -> (Tensor<3>, Option<Tensor<4>>) {
        let kv = self.self_attn.project_kv(x.clone());
        let attended =
            self.self_attn
                .attend(x.clone(), &kv, Some(blocked.clone()), need_weights, fused);
        let x = residual(
            &self.self_attn_norm,
            &self.dropout,
            x,
            attended.output,
            fused,
        );
        let ffn = self.ffn.forward(x.clone());
        let x = residual(&self.ffn_norm, &self.dropout, x, ffn, fused);
        (x, attended.weights)
    }
}

/// Decoder layer: masked self-attention, encoder–decoder attention, FFN (§3.1).
#[derive(Module, Debug)]
pub struct DecoderLayer {
    pub self_attn: MultiHeadAttention,
    pub self_attn_norm: LayerNorm,
    pub cross_attn: MultiHeadAttention,
    pub cross_attn_norm: LayerNorm,
    pub ffn: FeedForward,
    pub ffn_norm: LayerNorm,
    dropout: Dropout,
}

/// Attention weights of one decoder layer.
pub struct DecoderWeights {
    pub self_attn: Tensor<4>,
    pub cross_attn: Tensor<4>,
}

impl DecoderLayer {
    pub fn new(config: &ModelConfig, device: &Device) -> Self {
        DecoderLayer {
            self_attn: attention(config, device),
            self_attn_norm: norm(config, device),
            cross_attn: attention(config, device),
            cross_attn_norm: norm(config, device),
            ffn: FeedForward::new(config.d_model, config.d_ff, config.activation, device),
            ffn_norm: norm(config, device),
            dropout: Dropout::new(config.dropout),
        }
    }

    /// One decoder layer over target positions `y` `[b, t, d_model]`, given the keys and
    /// values its self-attention may see (`self_kv`: this and earlier positions) and the
    /// encoder's (`cross_kv`). The full pass and the cached step both go through here;
    /// `fused`: the fused kernels allowed ([`crate::ops::fused`]).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        y: Tensor<3>,
        self_kv: &KvCache,
        self_blocked: Option<Tensor<4, Bool>>,
        cross_kv: &KvCache,
        cross_blocked: &Tensor<4, Bool>,
        need_weights: bool,
        fused: bool,
    ) -> (Tensor<3>, Option<DecoderWeights>) {
        let own = self
            .self_attn
            .attend(y.clone(), self_kv, self_blocked, need_weights, fused);
        let y = residual(&self.self_attn_norm, &self.dropout, y, own.output, fused);
        let cross = self.cross_attn.attend(
            y.clone(),
            cross_kv,
            Some(cross_blocked.clone()),
            need_weights,
            fused,
        );
        let y = residual(&self.cross_attn_norm, &self.dropout, y, cross.output, fused);
        let ffn = self.ffn.forward(y.clone());
        let y = residual(&self.ffn_norm, &self.dropout, y, ffn, fused);
        let weights = match (own.weights, cross.weights) {
            (Some(self_attn), Some(cross_attn)) => Some(DecoderWeights {
                self_attn,
                cross_attn,
            }),
            _ => None,
        };
        (y, weights)
    }
}
