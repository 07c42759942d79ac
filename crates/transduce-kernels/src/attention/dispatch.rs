//! Attention on burn's tensors through the fused kernels, where they apply.

use burn::backend::Dispatch;
use burn::tensor::{Bool, DType, Tensor};

use super::MAX_KEYS;
use super::forward::AttentionKernel;
use crate::device::is_cube;

/// Attention through the fused kernels, where they apply: f32, f16 or bf16 queries, keys and values
/// (`[batch, length, heads·d]`) on a cubecl device (wgpu, CUDA) under autodiff (training),
/// at most [`MAX_KEYS`] keys. Returns the
/// context `[batch, queries, heads·d_v]` and the weights `[batch, heads, queries, keys]`,
/// or `None`: the caller runs the primitives. `blocked` is `[batch or 1, 1, queries or 1,
/// keys]`, true where a key is hidden.
pub fn try_attention(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    blocked: Option<&Tensor<4, Bool>>,
    heads: usize,
) -> Option<(Tensor<3>, Tensor<4>)> {
    let device = q.device();
    if !device.is_autodiff() || !is_cube(&device) {
        return None;
    }
    // f32, or half precision read and written as such and computed in f32 (the unfused
    // path keeps the scores and their softmax in f32 too).
    let dtype = q.dtype();
    if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
        || [k, v].iter().any(|t| t.dtype() != dtype)
    {
        return None;
    }
    let [batch, tq, _] = q.dims();
    let tk = k.dims()[1];
    if tk > MAX_KEYS || tk == 0 || tq == 0 {
        return None;
    }
    let (mask, masked) = match blocked {
        Some(blocked) => {
            let [mb, mh, mq, mk] = blocked.dims();
            if mh != 1 || mk != tk || (mb != 1 && mb != batch) || (mq != 1 && mq != tq) {
                return None;
            }
            (blocked.clone().float().reshape([mb, mq, mk]), true)
        }
        // Not read (the kernel is compiled without the mask).
        None => (q.clone().detach().slice([0..1, 0..1, 0..1]), false),
    };
    let (out, weights) = <Dispatch as AttentionKernel>::attention_heads(
        q.clone().into_dispatch(),
        k.clone().into_dispatch(),
        v.clone().into_dispatch(),
        mask.into_dispatch(),
        heads,
        masked,
    );
    Some((Tensor::from_dispatch(out), Tensor::from_dispatch(weights)))
}
