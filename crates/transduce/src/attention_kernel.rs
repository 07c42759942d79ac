//! Scaled dot-product attention over all heads (§3.2.1, §3.2.2) as one kernel forward and
//! two backward, for training on the cubecl backends (wgpu, CUDA).
//!
//! As burn primitives a multi-head attention splits its queries, keys and values into
//! heads (copies: a matrix product takes no permuted batch), multiplies, scales, masks,
//! takes the softmax, multiplies again and merges the heads (another copy); its backward
//! copies and multiplies as many times again: about 25 launches per attention and step.
//! These kernels read the heads where the projections wrote them (`[batch, length, heads ×
//! d]`) and write their results there, so nothing is copied:
//! - forward: one workgroup per (batch, head, query) computes the scores, the softmax
//!   (kept for the backward) and the weighted values;
//! - backward, per query: dP = dO·Vᵀ, dS = P ⊙ (dP − Σ P ⊙ dP)/√d_k (0 where blocked),
//!   dQ = dS·K;
//! - backward, per key: dK = dSᵀ·Q, dV = Pᵀ·dO.
//!
//! The loops are plain (no tiles): at the lengths of translation (tens of tokens) a
//! workgroup per row has enough to do, and what the step pays for is launches. The oracle
//! is [`crate::attention::scaled_dot_product`] (burn's primitives). Native only.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, Dispatch, backend_extension, tensor::FloatTensor,
};
use burn::tensor::{Bool, DType, Shape, Tensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use crate::fused_layers::{f32_arg, float_elem, u32_arg};

/// Threads per workgroup (one row of scores, or one key's gradients).
const THREADS: usize = 64;
/// The most keys a row may have (the scores stay in workgroup memory: 4 KiB).
pub const MAX_KEYS: usize = 1024;
/// The score of a blocked position, as the primitives' `mask_fill`.
const BLOCKED: f32 = -1.0e9;

/// The sum (`max` false) or maximum of `value` over the workgroup, the same in every
/// thread; every thread must call it.
#[cube]
fn across(shared: &mut Shared<[f32]>, value: f32, #[comptime] max: bool) -> f32 {
    shared[UNIT_POS as usize] = value;
    sync_cube();
    let mut total = shared[0];
    for t in 1..THREADS {
        let x = shared[t];
        if max {
            if x > total {
                total = x;
            }
        } else {
            total += x;
        }
    }
    sync_cube();
    total
}

/// A launch's sizes (runtime values, so that one compiled kernel serves every shape; a
/// replayed graph keeps them, as its shape does): workgroup rows, queries, keys, and the
/// mask's strides over batch and query (0 where it broadcasts).
#[derive(CubeLaunch, CubeType)]
struct Sizes {
    rows: InputScalar,
    queries: InputScalar,
    keys: InputScalar,
    mask_batch: InputScalar,
    mask_query: InputScalar,
}

// `if masked { if … }` stays nested: `masked` is decided when the kernel is compiled, and
// the inner read must not be emitted without a mask.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
fn attention_forward<F: Float>(
    q: &LinearView<'_, F>,
    k: &LinearView<'_, F>,
    v: &LinearView<'_, F>,
    mask: &LinearView<'_, f32>,
    out: &mut LinearViewMut<'_, F>,
    weights: &mut LinearViewMut<'_, f32>,
    sizes: Sizes,
    scale: InputScalar,
    #[comptime] heads: usize,
    #[comptime] dk: usize,
    #[comptime] dv: usize,
    #[comptime] masked: bool,
    #[define(F)] _dtype: ElemType,
) {
    let tq = sizes.queries.get::<u32>() as usize;
    let tk = sizes.keys.get::<u32>() as usize;
    let row = CUBE_POS;
    if row >= sizes.rows.get::<u32>() as usize {
        terminate!();
    }
    let i = row % tq;
    let h = (row / tq) % heads;
    let b = row / tq / heads;
    let mask_base =
        b * sizes.mask_batch.get::<u32>() as usize + i * sizes.mask_query.get::<u32>() as usize;
    let t = UNIT_POS as usize;
    let mut scores = Shared::<[f32]>::new_slice(MAX_KEYS);
    let mut shared = Shared::<[f32]>::new_slice(THREADS);
    let divisor = scale.get::<f32>();

    let q_base = ((b * tq + i) * heads + h) * dk;
    let mut m = f32::new(-3.0e38);
    let mut j = t;
    while j < tk {
        let k_base = ((b * tk + j) * heads + h) * dk;
        let mut s = 0.0f32;
        for d in 0..dk {
            s += f32::cast_from(q.read(q_base + d)) * f32::cast_from(k.read(k_base + d));
        }
        let mut s = s / divisor;
        // The mask (1 blocked) is [batch or 1, queries or 1, keys], its strides 0 where
        // it broadcasts.
        if masked {
            if mask.read(mask_base + j) > 0.5f32 {
                s = f32::new(BLOCKED);
            }
        }
        scores[j] = s;
        m = f32::max(m, s);
        j += THREADS;
    }
    let m = across(&mut shared, m, true);
    let mut sum = 0.0f32;
    let mut j = t;
    while j < tk {
        let e = (scores[j] - m).exp();
        scores[j] = e;
        sum += e;
        j += THREADS;
    }
    let total = across(&mut shared, sum, false);
    let mut j = t;
    while j < tk {
        let p = scores[j] / total;
        scores[j] = p;
        weights.write(row * tk + j, p);
        j += THREADS;
    }
    sync_cube();
    let out_base = ((b * tq + i) * heads + h) * dv;
    let mut d = t;
    while d < dv {
        let mut acc = 0.0f32;
        for j in 0..tk {
            acc += scores[j] * f32::cast_from(v.read(((b * tk + j) * heads + h) * dv + d));
        }
        out.write(out_base + d, F::cast_from(acc));
        d += THREADS;
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
fn attention_backward_queries<F: Float>(
    k: &LinearView<'_, F>,
    v: &LinearView<'_, F>,
    mask: &LinearView<'_, f32>,
    weights: &LinearView<'_, f32>,
    d_out: &LinearView<'_, F>,
    dq: &mut LinearViewMut<'_, F>,
    d_scores: &mut LinearViewMut<'_, f32>,
    sizes: Sizes,
    scale: InputScalar,
    #[comptime] heads: usize,
    #[comptime] dk: usize,
    #[comptime] dv: usize,
    #[comptime] masked: bool,
    #[define(F)] _dtype: ElemType,
) {
    let tq = sizes.queries.get::<u32>() as usize;
    let tk = sizes.keys.get::<u32>() as usize;
    let row = CUBE_POS;
    if row >= sizes.rows.get::<u32>() as usize {
        terminate!();
    }
    let i = row % tq;
    let h = (row / tq) % heads;
    let b = row / tq / heads;
    let mask_base =
        b * sizes.mask_batch.get::<u32>() as usize + i * sizes.mask_query.get::<u32>() as usize;
    let t = UNIT_POS as usize;
    let mut ds = Shared::<[f32]>::new_slice(MAX_KEYS);
    let mut shared = Shared::<[f32]>::new_slice(THREADS);
    let divisor = scale.get::<f32>();

    let o_base = ((b * tq + i) * heads + h) * dv;
    let mut dot = 0.0f32;
    let mut j = t;
    while j < tk {
        let v_base = ((b * tk + j) * heads + h) * dv;
        let mut dp = 0.0f32;
        for d in 0..dv {
            dp += f32::cast_from(d_out.read(o_base + d)) * f32::cast_from(v.read(v_base + d));
        }
        ds[j] = dp;
        dot += weights.read(row * tk + j) * dp;
        j += THREADS;
    }
    let dot = across(&mut shared, dot, false);
    let mut j = t;
    while j < tk {
        let mut g = weights.read(row * tk + j) * (ds[j] - dot) / divisor;
        if masked {
            if mask.read(mask_base + j) > 0.5f32 {
                g = f32::new(0.0);
            }
        }
        ds[j] = g;
        d_scores.write(row * tk + j, g);
        j += THREADS;
    }
    sync_cube();
    let q_base = ((b * tq + i) * heads + h) * dk;
    let mut d = t;
    while d < dk {
        let mut acc = 0.0f32;
        for j in 0..tk {
            acc += ds[j] * f32::cast_from(k.read(((b * tk + j) * heads + h) * dk + d));
        }
        dq.write(q_base + d, F::cast_from(acc));
        d += THREADS;
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn attention_backward_keys<F: Float>(
    q: &LinearView<'_, F>,
    weights: &LinearView<'_, f32>,
    d_scores: &LinearView<'_, f32>,
    d_out: &LinearView<'_, F>,
    dk_out: &mut LinearViewMut<'_, F>,
    dv_out: &mut LinearViewMut<'_, F>,
    sizes: Sizes,
    #[comptime] heads: usize,
    #[comptime] dk: usize,
    #[comptime] dv: usize,
    #[define(F)] _dtype: ElemType,
) {
    let tq = sizes.queries.get::<u32>() as usize;
    let tk = sizes.keys.get::<u32>() as usize;
    let row = CUBE_POS;
    if row >= sizes.rows.get::<u32>() as usize {
        terminate!();
    }
    // Workgroup `row` is key j of (batch, head): [batch, heads, keys].
    let j = row % tk;
    let h = (row / tk) % heads;
    let b = row / tk / heads;
    let t = UNIT_POS as usize;
    // Score (i, j) of (b, h) is at scores_base + i·tk.
    let scores_base = (b * heads + h) * tq * tk + j;
    let mut d = t;
    while d < dk {
        let mut acc = 0.0f32;
        for i in 0..tq {
            acc += d_scores.read(scores_base + i * tk)
                * f32::cast_from(q.read(((b * tq + i) * heads + h) * dk + d));
        }
        dk_out.write(((b * tk + j) * heads + h) * dk + d, F::cast_from(acc));
        d += THREADS;
    }
    let mut d = t;
    while d < dv {
        let mut acc = 0.0f32;
        for i in 0..tq {
            acc += weights.read(scores_base + i * tk)
                * f32::cast_from(d_out.read(((b * tq + i) * heads + h) * dv + d));
        }
        dv_out.write(((b * tk + j) * heads + h) * dv + d, F::cast_from(acc));
        d += THREADS;
    }
}

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

impl<B: AttentionKernel, C: CheckpointStrategy> AttentionKernel for Autodiff<B, C> {
    fn attention_heads(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        #[derive(Debug)]
        struct Attention;

        /// Queries, keys, values, mask, weights; heads and whether masked.
        type State<B> = ([FloatTensor<B>; 5], usize, bool);

        impl<B: AttentionKernel> Backward<B, 3> for Attention {
            type State = State<B>;

            fn backward(
                self,
                ops: Ops<Self::State, 3>,
                grads: &mut Gradients,
                _checkpointer: &mut Checkpointer,
            ) {
                let [q_node, k_node, v_node] = ops.parents;
                let d_out = grads.consume::<B>(&ops.node);
                let ([q, k, v, mask, weights], heads, masked) = ops.state;
                let (dq, d_scores) = B::attention_heads_backward_queries(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    mask,
                    weights.clone(),
                    d_out.clone(),
                    heads,
                    masked,
                );
                if k_node.is_some() || v_node.is_some() {
                    let (dk, dv) =
                        B::attention_heads_backward_keys(q, k, v, weights, d_scores, d_out, heads);
                    if let Some(node) = k_node {
                        grads.register::<B>(node.id, dk);
                    }
                    if let Some(node) = v_node {
                        grads.register::<B>(node.id, dv);
                    }
                }
                if let Some(node) = q_node {
                    grads.register::<B>(node.id, dq);
                }
            }
        }

        let mask_inner = mask.into_primitive();
        match Attention
            .prepare::<C>([q.node(), k.node(), v.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (q, k, v) = (q.into_primitive(), k.into_primitive(), v.into_primitive());
                let (out, weights) = B::attention_heads(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    mask_inner.clone(),
                    heads,
                    masked,
                );
                let state = ([q, k, v, mask_inner, weights.clone()], heads, masked);
                (prep.finish(state, out), Self::from_inner(weights))
            }
            OpsKind::UnTracked(prep) => {
                let (out, weights) = B::attention_heads(
                    q.into_primitive(),
                    k.into_primitive(),
                    v.into_primitive(),
                    mask_inner,
                    heads,
                    masked,
                );
                (prep.finish(out), Self::from_inner(weights))
            }
        }
    }

    fn attention_heads_backward_queries(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        // A backward is not itself differentiated: its outputs are constants.
        let (dq, ds) = B::attention_heads_backward_queries(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            mask.into_primitive(),
            weights.into_primitive(),
            d_out.into_primitive(),
            heads,
            masked,
        );
        (Self::from_inner(dq), Self::from_inner(ds))
    }

    fn attention_heads_backward_keys(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_scores: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (dk, dv) = B::attention_heads_backward_keys(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            weights.into_primitive(),
            d_scores.into_primitive(),
            d_out.into_primitive(),
            heads,
        );
        (Self::from_inner(dk), Self::from_inner(dv))
    }
}

/// Attention through the fused kernels, where they apply: f32, f16 or bf16 queries, keys and values
/// (`[batch, length, heads·d]`) on a cubecl device (wgpu, CUDA) under autodiff (training),
/// at most [`MAX_KEYS`] keys, the kernels [`crate::fused_layers::enabled`]. Returns the
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
    if !device.is_autodiff() || !crate::fused_layers::applies(&device) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::scaled_dot_product;
    use crate::dropout::Dropout;
    use crate::layer_norm_kernel::test_gpu::{SERIAL, count_launches, wgpu_device};
    use burn::tensor::{Device, FloatDType, TensorData};

    /// The primitives' values to 2·10⁻⁵ of the largest.
    fn assert_close(what: &str, got: &[f32], want: &[f32]) {
        crate::layer_norm_kernel::test_gpu::assert_close(what, got, want, 2e-5);
    }

    /// Values in [−1, 1] that repeat only after 513, offset by `shift`: multiples of 1/256,
    /// so f16 holds them exactly and a half-precision run starts from the f32 run's inputs.
    fn values(n: usize, shift: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (((i * 7919 + shift * 104_729) % 513) as f32 / 256.0) - 1.0)
            .collect()
    }

    fn leaf(dims: [usize; 3], shift: usize, device: &Device) -> Tensor<3> {
        let n = dims.iter().product();
        Tensor::<1>::from_floats(values(n, shift).as_slice(), device)
            .reshape(dims)
            .require_grad()
    }

    /// A tensor's values as f32, whatever its type.
    fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
        let n = t.shape().num_elements();
        t.reshape([n])
            .into_data()
            .convert::<f32>()
            .try_to_vec::<f32>()
            .unwrap()
    }

    struct Case {
        batch: usize,
        queries: usize,
        keys: usize,
        heads: usize,
        dk: usize,
        dv: usize,
        mask: Option<Vec<Vec<bool>>>,
        /// The mask's dims, `[batch or 1, 1, queries or 1, keys]`.
        mask_dims: [usize; 4],
    }

    struct Outcome {
        context: Vec<f32>,
        weights: Vec<f32>,
        dq: Vec<f32>,
        dk: Vec<f32>,
        dv: Vec<f32>,
    }

    /// The context, the weights and the gradients of Σ context·w for the f32 leaves q, k and
    /// v, computed in `dtype` (the leaves cast to it): fused, or through burn's primitives
    /// (split heads, `scaled_dot_product`, merge).
    /// How [`run`] attends.
    #[derive(Clone, Copy, PartialEq)]
    enum How {
        /// The fused kernels, in the inputs' type.
        Fused,
        /// The fused kernels in f32, the inputs cast up and the context cast back.
        FusedInF32,
        /// burn's primitives.
        Primitives,
    }

    fn run(case: &Case, how: How, dtype: FloatDType, device: &Device) -> Outcome {
        let (b, tq, tk, h) = (case.batch, case.queries, case.keys, case.heads);
        let q = leaf([b, tq, h * case.dk], 1, device);
        let k = leaf([b, tk, h * case.dk], 2, device);
        let v = leaf([b, tk, h * case.dv], 3, device);
        let w = Tensor::<1>::from_floats(values(b * tq * h * case.dv, 4).as_slice(), device)
            .reshape([b, tq, h * case.dv])
            .cast(dtype);
        let (qc, kc, vc) = (
            q.clone().cast(dtype),
            k.clone().cast(dtype),
            v.clone().cast(dtype),
        );
        let blocked = case.mask.as_ref().map(|rows| {
            let flat: Vec<bool> = rows.iter().flatten().copied().collect();
            Tensor::<4, Bool>::from_data(TensorData::new(flat, case.mask_dims), device)
        });
        let (context, weights) = if how == How::Fused {
            try_attention(&qc, &kc, &vc, blocked.as_ref(), h).expect("fused path applies")
        } else if how == How::FusedInF32 {
            let up = |t: &Tensor<3>| t.clone().cast(FloatDType::F32);
            let (context, weights) =
                try_attention(&up(&qc), &up(&kc), &up(&vc), blocked.as_ref(), h)
                    .expect("fused path applies");
            (context.cast(dtype), weights)
        } else {
            let split = |t: &Tensor<3>, d: usize| {
                let [b, n, _] = t.dims();
                t.clone().reshape([b, n, h, d]).swap_dims(1, 2)
            };
            let (context, weights) = scaled_dot_product(
                split(&qc, case.dk),
                split(&kc, case.dk),
                split(&vc, case.dv),
                blocked,
                &Dropout::new(0.0),
            );
            let merged = context.swap_dims(1, 2).reshape([b, tq, h * case.dv]);
            (merged, weights)
        };
        let grads = (context.clone() * w).sum().backward();
        Outcome {
            context: floats(context),
            weights: floats(weights),
            dq: floats(q.grad(&grads).unwrap()),
            dk: floats(k.grad(&grads).unwrap()),
            dv: floats(v.grad(&grads).unwrap()),
        }
    }

    fn cases() -> Vec<Case> {
        let causal = |t: usize| -> Vec<Vec<bool>> {
            (0..t).map(|i| (0..t).map(|j| j > i).collect()).collect()
        };
        vec![
            // Encoder self-attention: padding masks per batch entry.
            Case {
                batch: 2,
                queries: 5,
                keys: 5,
                heads: 2,
                dk: 8,
                dv: 8,
                mask: Some(vec![vec![false; 5], vec![false, false, false, true, true]]),
                mask_dims: [2, 1, 1, 5],
            },
            // Decoder self-attention: causal, more keys than a workgroup's 64 threads.
            Case {
                batch: 1,
                queries: 70,
                keys: 70,
                heads: 3,
                dk: 4,
                dv: 4,
                mask: Some(causal(70)),
                mask_dims: [1, 1, 70, 70],
            },
            // Cross-attention without a mask; d_v ≠ d_k.
            Case {
                batch: 2,
                queries: 3,
                keys: 6,
                heads: 2,
                dk: 8,
                dv: 12,
                mask: None,
                mask_dims: [1, 1, 1, 6],
            },
            // A query whose keys are all blocked (uniform weights, no score gradient).
            Case {
                batch: 1,
                queries: 2,
                keys: 3,
                heads: 1,
                dk: 4,
                dv: 4,
                mask: Some(vec![vec![true, true, true], vec![false, true, false]]),
                mask_dims: [1, 1, 2, 3],
            },
        ]
    }

    /// The fused forward and backward give the primitives' context, weights and
    /// gradients for q, k and v to rounding: padding, causal and no masks, d_v ≠ d_k, rows
    /// longer than a workgroup, a fully blocked row.
    #[test]
    fn fused_attention_is_the_primitives_forward_and_backward() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let Some(device) = wgpu_device("fused_attention_is_the_primitives_forward_and_backward")
        else {
            return;
        };
        let device = device.autodiff();
        for (n, case) in cases().iter().enumerate() {
            let fused = run(case, How::Fused, FloatDType::F32, &device);
            let burn = run(case, How::Primitives, FloatDType::F32, &device);
            let what = |name: &str| format!("case {n} {name}");
            assert_close(&what("context"), &fused.context, &burn.context);
            assert_close(&what("weights"), &fused.weights, &burn.weights);
            assert_close(&what("dq"), &fused.dq, &burn.dq);
            assert_close(&what("dk"), &fused.dk, &burn.dk);
            assert_close(&what("dv"), &fused.dv, &burn.dv);
        }
    }

    /// What an attention's forward and backward launch, fused and as primitives.
    #[test]
    fn fused_attention_launches_a_few_kernels() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let Some(device) = wgpu_device("fused_attention_launches_a_few_kernels") else {
            return;
        };
        let device = device.autodiff();
        let case = &cases()[0];
        let launches = |fused: bool| {
            let how = if fused { How::Fused } else { How::Primitives };
            run(case, how, FloatDType::F32, &device); // compiled and tuned: not counted
            count_launches(|| {
                run(case, how, FloatDType::F32, &device);
            })
        };
        let (fused, burn) = (launches(true), launches(false));
        println!("attention forward + backward (+ the test's own): fused {fused}, burn's {burn}");
        assert!(fused + 10 <= burn, "fused {fused}, burn's {burn}");
    }

    /// In half precision the fused kernels read and write f16 and compute in f32: the
    /// context and the gradients are the f32 primitives' (inputs f16 holds exactly) to
    /// f16's rounding, the weights (f32 either way) to f32's; and they are the f32 kernels
    /// between casts, bit for bit.
    #[test]
    fn fused_attention_in_f16_is_the_f32_primitives_to_f16_rounding() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let Some(device) =
            wgpu_device("fused_attention_in_f16_is_the_f32_primitives_to_f16_rounding")
        else {
            return;
        };
        if !device.supports_dtype(FloatDType::F16) {
            println!("skipped: the adapter has no f16");
            return;
        }
        let device = device.autodiff();
        for (n, case) in cases().iter().enumerate() {
            let half = run(case, How::Fused, FloatDType::F16, &device);
            let burn = run(case, How::Primitives, FloatDType::F32, &device);
            // Reading and writing f16 is the f32 kernels between casts, bit for bit: the
            // same f32 values inside, the same roundings at the edges.
            let around = run(case, How::FusedInF32, FloatDType::F16, &device);
            for (name, a, b) in [
                ("context", &half.context, &around.context),
                ("weights", &half.weights, &around.weights),
                ("dq", &half.dq, &around.dq),
                ("dk", &half.dk, &around.dk),
                ("dv", &half.dv, &around.dv),
            ] {
                assert_eq!(
                    a, b,
                    "case {n} {name}: f16 kernels against f32 between casts"
                );
            }
            let what = |name: &str| format!("case {n} {name}");
            let f16 = |what: &str, got: &[f32], want: &[f32]| {
                crate::layer_norm_kernel::test_gpu::assert_close(what, got, want, 2e-3)
            };
            f16(&what("context"), &half.context, &burn.context);
            assert_close(&what("weights"), &half.weights, &burn.weights);
            f16(&what("dq"), &half.dq, &burn.dq);
            f16(&what("dk"), &half.dk, &burn.dk);
            f16(&what("dv"), &half.dv, &burn.dv);
        }
    }
}
