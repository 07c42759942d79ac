//! The attention kernels as a backend extension: the trait, and its cubecl implementation
//! that launches [`super::kernel`]'s kernels.

use burn::backend::fusion::custom::TensorSpec;
use burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use burn::tensor::{DType, Shape};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use super::THREADS;
use super::kernel::{
    SizesLaunch, attention_backward_keys, attention_backward_queries, attention_forward,
};
use crate::args::{f32_arg, float_elem, u32_arg};

/// The shape of the attention weights, `[batch, heads, queries, keys]`.
fn weights_shape(q: &Shape, k: &Shape, heads: usize) -> Shape {
    [q[0], heads, q[1], k[1]].into()
}

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()), Autodiff: cfg(all()))]
pub trait AttentionKernel: Backend {
    /// Attention of `q` (`[batch, queries, heads·d_k]`) over `k` and `v` (`[batch, keys,
    /// heads·d]`), `mask` `[batch or 1, queries or 1, keys]` (1 = blocked; ignored unless
    /// `masked`): the context `[batch, queries, heads·d_v]` and the weights `[batch,
    /// heads, queries, keys]`.
    #[fusion(meta = |q, k, v, _mask, heads, _masked| (
        TensorSpec::new([q.shape[0], q.shape[1], v.shape[2]].into(), q.dtype),
        TensorSpec::new(weights_shape(&q.shape, &k.shape, *heads), DType::F32),
    ))]
    fn attention_heads(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The gradient for `q` and that of the scores, from the context's `d_out`.
    #[fusion(meta = |q, _k, _v, _mask, weights, _d_out, _heads, _masked| (
        TensorSpec::new(q.shape.clone(), q.dtype),
        TensorSpec::new(weights.shape.clone(), weights.dtype),
    ))]
    #[allow(clippy::too_many_arguments)]
    fn attention_heads_backward_queries(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);

    /// The gradients for `k` and `v`, from the weights, the scores' gradient and `d_out`.
    #[fusion(meta = |_q, k, v, _weights, _d_scores, _d_out, _heads| (
        TensorSpec::new(k.shape.clone(), k.dtype),
        TensorSpec::new(v.shape.clone(), v.dtype),
    ))]
    fn attention_heads_backward_keys(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_scores: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

fn empty(like: &CubeTensor, shape: Shape) -> CubeTensor {
    empty_device_dtype(like.client.clone(), like.device.clone(), shape, like.dtype)
}

/// The weights and the scores' gradient: f32 whatever the inputs' type.
fn empty_f32(like: &CubeTensor, shape: Shape) -> CubeTensor {
    empty_device_dtype(like.client.clone(), like.device.clone(), shape, DType::F32)
}

fn sizes(rows: usize, queries: usize, keys: usize, mask: (usize, usize)) -> SizesLaunch {
    SizesLaunch::new(
        u32_arg(rows),
        u32_arg(queries),
        u32_arg(keys),
        u32_arg(mask.0),
        u32_arg(mask.1),
    )
}

/// The mask's strides over (batch, query): 0 where it broadcasts.
fn mask_strides(mask: &CubeTensor, masked: bool) -> (usize, usize) {
    if !masked {
        return (0, 0);
    }
    let [mb, mq, mk] = mask.meta.shape().dims::<3>();
    (
        if mb > 1 { mq * mk } else { 0 },
        if mq > 1 { mk } else { 0 },
    )
}

/// √d_k, the scores' divisor (§3.2.1), as the primitives compute it.
fn scale(dk: usize) -> InputScalar {
    f32_arg((dk as f64).sqrt())
}

impl AttentionKernel for CubeBackend {
    fn attention_heads(
        q: CubeTensor,
        k: CubeTensor,
        v: CubeTensor,
        mask: CubeTensor,
        heads: usize,
        masked: bool,
    ) -> (CubeTensor, CubeTensor) {
        let (q, k, v, mask) = (
            into_contiguous(q),
            into_contiguous(k),
            into_contiguous(v),
            into_contiguous(mask),
        );
        let [batch, tq, hdk] = q.meta.shape().dims::<3>();
        let [_, tk, hdv] = v.meta.shape().dims::<3>();
        let (dk, dv) = (hdk / heads, hdv / heads);
        let out = empty(&q, [batch, tq, hdv].into());
        let weights = empty_f32(&q, [batch, heads, tq, tk].into());
        let dtype = float_elem(q.dtype);
        let rows = batch * heads * tq;
        let (sb, sq) = mask_strides(&mask, masked);
        let client = q.client.clone();
        let dim = CubeDim::new_1d(THREADS as u32);
        let count = calculate_cube_count_elemwise(&client, rows * THREADS, dim);
        // SAFETY: every index is within the shapes checked by `try_attention` (contiguous
        // tensors; at most MAX_KEYS keys).
        unsafe {
            attention_forward::launch_unchecked(
                &client,
                count,
                dim,
                q.into_linear_view(),
                k.into_linear_view(),
                v.into_linear_view(),
                mask.into_linear_view(),
                out.clone().into_linear_view(),
                weights.clone().into_linear_view(),
                sizes(rows, tq, tk, (sb, sq)),
                scale(dk),
                heads,
                dk,
                dv,
                masked,
                dtype,
            );
        }
        (out, weights)
    }

    fn attention_heads_backward_queries(
        q: CubeTensor,
        k: CubeTensor,
        v: CubeTensor,
        mask: CubeTensor,
        weights: CubeTensor,
        d_out: CubeTensor,
        heads: usize,
        masked: bool,
    ) -> (CubeTensor, CubeTensor) {
        let (k, v, mask, weights, d_out) = (
            into_contiguous(k),
            into_contiguous(v),
            into_contiguous(mask),
            into_contiguous(weights),
            into_contiguous(d_out),
        );
        let [batch, tq, hdk] = q.meta.shape().dims::<3>();
        let [_, tk, hdv] = v.meta.shape().dims::<3>();
        let (dk, dv) = (hdk / heads, hdv / heads);
        let dq = empty(&k, [batch, tq, hdk].into());
        let d_scores = empty_f32(&k, [batch, heads, tq, tk].into());
        let dtype = float_elem(k.dtype);
        let rows = batch * heads * tq;
        let (sb, sq) = mask_strides(&mask, masked);
        let client = k.client.clone();
        let dim = CubeDim::new_1d(THREADS as u32);
        let count = calculate_cube_count_elemwise(&client, rows * THREADS, dim);
        // SAFETY: as the forward's.
        unsafe {
            attention_backward_queries::launch_unchecked(
                &client,
                count,
                dim,
                k.into_linear_view(),
                v.into_linear_view(),
                mask.into_linear_view(),
                weights.into_linear_view(),
                d_out.into_linear_view(),
                dq.clone().into_linear_view(),
                d_scores.clone().into_linear_view(),
                sizes(rows, tq, tk, (sb, sq)),
                scale(dk),
                heads,
                dk,
                dv,
                masked,
                dtype,
            );
        }
        (dq, d_scores)
    }

    fn attention_heads_backward_keys(
        q: CubeTensor,
        k: CubeTensor,
        v: CubeTensor,
        weights: CubeTensor,
        d_scores: CubeTensor,
        d_out: CubeTensor,
        heads: usize,
    ) -> (CubeTensor, CubeTensor) {
        let (q, weights, d_scores, d_out) = (
            into_contiguous(q),
            into_contiguous(weights),
            into_contiguous(d_scores),
            into_contiguous(d_out),
        );
        let [batch, tq, hdk] = q.meta.shape().dims::<3>();
        let [_, tk, hdv] = v.meta.shape().dims::<3>();
        let (dk, dv) = (hdk / heads, hdv / heads);
        let dk_out = empty(&q, k.meta.shape().clone());
        let dv_out = empty(&q, v.meta.shape().clone());
        let dtype = float_elem(q.dtype);
        let keys = batch * heads * tk;
        let client = q.client.clone();
        let dim = CubeDim::new_1d(THREADS as u32);
        let count = calculate_cube_count_elemwise(&client, keys * THREADS, dim);
        // SAFETY: as the forward's.
        unsafe {
            attention_backward_keys::launch_unchecked(
                &client,
                count,
                dim,
                q.into_linear_view(),
                weights.into_linear_view(),
                d_scores.into_linear_view(),
                d_out.into_linear_view(),
                dk_out.clone().into_linear_view(),
                dv_out.clone().into_linear_view(),
                sizes(keys, tq, tk, (0, 0)),
                heads,
                dk,
                dv,
                dtype,
            );
        }
        (dk_out, dv_out)
    }
}
