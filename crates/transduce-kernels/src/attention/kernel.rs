//! The attention kernels: one workgroup of [`THREADS`] per (batch, head, query) row
//! forward and for the queries' gradients, one per (batch, head, key) for the keys' and
//! values'.

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};

use super::{BLOCKED, MAX_KEYS, THREADS};
use crate::reduce::across_lanes;

/// A launch's sizes (runtime values, so that one compiled kernel serves every shape; a
/// replayed graph keeps them, as its shape does): workgroup rows, queries, keys, and the
/// mask's strides over batch and query (0 where it broadcasts).
#[derive(CubeLaunch, CubeType)]
pub(crate) struct Sizes {
    pub(crate) rows: InputScalar,
    pub(crate) queries: InputScalar,
    pub(crate) keys: InputScalar,
    pub(crate) mask_batch: InputScalar,
    pub(crate) mask_query: InputScalar,
}

// `if masked { if … }` stays nested: `masked` is decided when the kernel is compiled, and
// the inner read must not be emitted without a mask.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments, clippy::collapsible_if)]
pub(crate) fn attention_forward<F: Float>(
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
    let m = across_lanes(&mut shared, m, 0, t, comptime!(THREADS), true);
    let mut sum = 0.0f32;
    let mut j = t;
    while j < tk {
        let e = (scores[j] - m).exp();
        scores[j] = e;
        sum += e;
        j += THREADS;
    }
    let total = across_lanes(&mut shared, sum, 0, t, comptime!(THREADS), false);
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
pub(crate) fn attention_backward_queries<F: Float>(
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
    let dot = across_lanes(&mut shared, dot, 0, t, comptime!(THREADS), false);
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
pub(crate) fn attention_backward_keys<F: Float>(
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
