//! The kernels' oracle: attention by burn's primitives, the model's unfused path
//! (`transduce::ops::scaled_dot_product`) without dropout on the weights.

use burn::tensor::activation::softmax;
use burn::tensor::{Bool, FloatDType, Tensor};

use super::BLOCKED;

/// softmax(QKᵀ / √d_k)·V (§3.2.1) over the heads of `q` (`[batch, queries, heads·d_k]`),
/// `k` and `v` (`[batch, keys, heads·d]`), `blocked` broadcastable to `[batch, heads,
/// queries, keys]`: the context `[batch, queries, heads·d_v]` (in the inputs' type) and the
/// weights `[batch, heads, queries, keys]` (f32). Each head is split out (a copy) and the
/// context merged back, as the model's unfused path does.
pub fn attention_heads(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    blocked: Option<Tensor<4, Bool>>,
    heads: usize,
) -> (Tensor<3>, Tensor<4>) {
    let split = |t: &Tensor<3>| {
        let [b, n, hd] = t.dims();
        t.clone().reshape([b, n, heads, hd / heads]).swap_dims(1, 2)
    };
    let [b, tq, _] = q.dims();
    let (q, k, v) = (split(q), split(k), split(v));
    let [_, _, _, d_k] = q.dims();
    let d_v = v.dims()[3];
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
    let context = weights.clone().cast(dtype).matmul(v);
    let merged = context.swap_dims(1, 2).reshape([b, tq, heads * d_v]);
    (merged, weights)
}
