//! Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2), with an explicit
//! key/value cache for incremental decoding.

use burn::nn::{Initializer, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::FloatDType;
use burn::tensor::activation::softmax;

use crate::dropout::Dropout;
use crate::positionwise::positionwise;
use crate::precision::apply_linear;

/// Large negative score for blocked positions. Finite, so a fully blocked row (a padded
/// query) gives uniform weights instead of NaN.
const BLOCKED: f32 = -1.0e9;

/// Keys and values of one attention layer, `[batch, heads, time, d]`.
///
/// Self-attention caches grow by one position per decoding step; cross-attention caches
/// are computed once from the encoder output.
#[derive(Clone, Debug)]
pub struct KvCache {
    pub k: Tensor<4>,
    pub v: Tensor<4>,
}

impl KvCache {
    /// Appends the keys and values of new positions along time.
    pub fn append(self, new: KvCache) -> KvCache {
        KvCache {
            k: Tensor::cat(vec![self.k, new.k], 2),
            v: Tensor::cat(vec![self.v, new.v], 2),
        }
    }

    /// Reorders (and repeats or drops) batch rows, as beam search does when it re-ranks.
    pub fn select(&self, rows: Tensor<1, Int>) -> KvCache {
        KvCache {
            k: self.k.clone().select(0, rows.clone()),
            v: self.v.clone().select(0, rows),
        }
    }

    /// Number of cached positions.
    pub fn len(&self) -> usize {
        self.k.dims()[2]
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Attention(Q, K, V) = softmax(QKᵀ / √d_k) V (§3.2.1), per head.
///
/// `q`: `[b, h, tq, d_k]`, `k`: `[b, h, tk, d_k]`, `v`: `[b, h, tk, d_v]`; `blocked` is true
/// where a query may not look (padding, the future), broadcastable to `[b, h, tq, tk]`.
/// Returns the context `[b, h, tq, d_v]` (in the inputs' type) and the weights
/// `[b, h, tq, tk]` (f32: the scores, their mask and softmax are computed in f32 whatever the
/// inputs' type, see [`crate::precision`]).
pub fn scaled_dot_product(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    blocked: Option<Tensor<4, Bool>>,
    dropout: &Dropout,
) -> (Tensor<4>, Tensor<4>) {
    let d_k = q.dims()[3];
    let dtype = q.dtype();
    let mut scores = q
        .matmul(k.swap_dims(2, 3))
        .cast(FloatDType::F32)
        .div_scalar((d_k as f64).sqrt());
    if let Some(blocked) = blocked {
        let shape = scores.dims();
        scores = scores.mask_fill(blocked.expand(shape), BLOCKED);
    }
    let weights = softmax(scores, 3);
    let context = dropout.forward(weights.clone().cast(dtype)).matmul(v);
    (context, weights)
}

/// Multi-head attention (§3.2.2): h heads of width d_k (queries, keys) and d_v (values).
///
/// The projections W^Q, W^K, W^V, W^O are plain matrices, as in the paper, unless the
/// model has attention biases ([`crate::config::ModelConfig::attention_bias`]).
#[derive(Module, Debug)]
pub struct MultiHeadAttention {
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub o: Linear,
    dropout: Dropout,
    n_heads: usize,
    d_k: usize,
    d_v: usize,
}

/// Output of one attention call.
pub struct Attended {
    /// `[b, tq, d_model]`
    pub output: Tensor<3>,
    /// `[b, h, tq, tk]`, when asked for.
    pub weights: Option<Tensor<4>>,
}

fn projection(d_in: usize, d_out: usize, bias: bool, device: &Device) -> Linear {
    LinearConfig::new(d_in, d_out)
        .with_bias(bias)
        .with_initializer(Initializer::XavierUniform { gain: 1.0 })
        .init(device)
}

impl MultiHeadAttention {
    pub fn new(
        d_model: usize,
        n_heads: usize,
        d_k: usize,
        d_v: usize,
        dropout: f64,
        bias: bool,
        device: &Device,
    ) -> Self {
        MultiHeadAttention {
            q: projection(d_model, n_heads * d_k, bias, device),
            k: projection(d_model, n_heads * d_k, bias, device),
            v: projection(d_model, n_heads * d_v, bias, device),
            o: projection(n_heads * d_v, d_model, bias, device),
            dropout: Dropout::new(dropout),
            n_heads,
            d_k,
            d_v,
        }
    }

    fn split_heads(&self, x: Tensor<3>, d: usize) -> Tensor<4> {
        let [b, t, _] = x.dims();
        x.reshape([b, t, self.n_heads, d]).swap_dims(1, 2)
    }

    /// Projects a sequence `[b, t, d_model]` to per-head keys and values.
    pub fn project_kv(&self, x: Tensor<3>) -> KvCache {
        KvCache {
            k: self.split_heads(
                positionwise(x.clone(), |x| apply_linear(&self.k, x)),
                self.d_k,
            ),
            v: self.split_heads(positionwise(x, |x| apply_linear(&self.v, x)), self.d_v),
        }
    }

    /// Queries `[b, tq, d_model]` attend over cached keys and values: through the fused
    /// kernels where `fused` allows them and they apply, else burn's primitives.
    pub fn attend(
        &self,
        query: Tensor<3>,
        kv: &KvCache,
        blocked: Option<Tensor<4, Bool>>,
        need_weights: bool,
        fused: bool,
    ) -> Attended {
        let [b, tq, _] = query.dims();
        let q = positionwise(query, |q| apply_linear(&self.q, q));
        if let Some(attended) = self.attend_fused(&q, kv, blocked.as_ref(), need_weights, fused) {
            return attended;
        }
        let q = self.split_heads(q, self.d_k);
        let (context, weights) =
            scaled_dot_product(q, kv.k.clone(), kv.v.clone(), blocked, &self.dropout);
        let merged = context
            .swap_dims(1, 2)
            .reshape([b, tq, self.n_heads * self.d_v]);
        Attended {
            output: positionwise(merged, |m| apply_linear(&self.o, m)),
            weights: need_weights.then_some(weights),
        }
    }
}

impl MultiHeadAttention {
    /// [`MultiHeadAttention::attend`] through the fused kernels ([`crate::ops::fused_attention`])
    /// where `fused` allows them and they apply: training on a cubecl device, no dropout on
    /// the weights. The heads stay where the projections wrote them.
    fn attend_fused(
        &self,
        q: &Tensor<3>,
        kv: &KvCache,
        blocked: Option<&Tensor<4, Bool>>,
        need_weights: bool,
        fused: bool,
    ) -> Option<Attended> {
        let [b, _, _] = q.dims();
        if self.dropout.prob() > 0.0 || kv.k.dims()[0] != b {
            return None;
        }
        let merged = |t: &Tensor<4>| {
            let [b, h, n, d] = t.dims();
            t.clone().swap_dims(1, 2).reshape([b, n, h * d])
        };
        let (context, weights) = crate::ops::fused_attention(
            q,
            &merged(&kv.k),
            &merged(&kv.v),
            blocked,
            self.n_heads,
            fused,
        )?;
        Some(Attended {
            output: positionwise(context, |m| apply_linear(&self.o, m)),
            weights: need_weights.then_some(weights),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaled_dot_product_by_hand() {
        let device = Device::flex();
        // One head, one query q = [1, 0], keys k1 = [1, 0], k2 = [0, 1], d_k = 2:
        // scores = [1/√2, 0]; weights = softmax → [e^{1/√2}, 1] / (e^{1/√2} + 1).
        let q = Tensor::<1>::from_floats([1.0, 0.0], &device).reshape([1, 1, 1, 2]);
        let k = Tensor::<1>::from_floats([1.0, 0.0, 0.0, 1.0], &device).reshape([1, 1, 2, 2]);
        let v = Tensor::<1>::from_floats([10.0, 20.0], &device).reshape([1, 1, 2, 1]);
        let dropout = Dropout::new(0.0);
        let (ctx, w) = scaled_dot_product(q.clone(), k.clone(), v.clone(), None, &dropout);
        let e = (1.0f64 / 2f64.sqrt()).exp();
        let w1 = e / (e + 1.0);
        let w: Vec<f32> = w.into_data().try_into_vec_as::<f32>().unwrap();
        assert!((w[0] as f64 - w1).abs() < 1e-6);
        let ctx: Vec<f32> = ctx.into_data().try_into_vec_as::<f32>().unwrap();
        assert!((ctx[0] as f64 - (10.0 * w1 + 20.0 * (1.0 - w1))).abs() < 1e-4);
        // Blocking the first key leaves all weight on the second.
        let blocked = Tensor::<1, Bool>::from_data([true, false], &device).reshape([1, 1, 1, 2]);
        let (ctx, _) = scaled_dot_product(q, k, v, Some(blocked), &dropout);
        let ctx: Vec<f32> = ctx.into_data().try_into_vec_as::<f32>().unwrap();
        assert!((ctx[0] - 20.0).abs() < 1e-4);
    }
}
