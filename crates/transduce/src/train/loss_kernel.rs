//! The label-smoothed cross-entropy (§5.4) of each row of logits, with its gradient, as one
//! cubecl kernel (wgpu, CUDA): a workgroup per row passes over the vocabulary three times
//! (maximum; sum of exponentials and of logits; p − q), where the same formulas as tensor
//! operations ([`super::loss`]'s `on_device`, this kernel's oracle) launch a dozen kernels
//! and keep several `[rows, vocabulary]` tensors (the step's largest) in memory.

use crate::fused_layers::{f32_arg, float_elem, u32_arg};
use crate::tokenizer::PAD;
use burn::backend::fusion::custom::TensorSpec;
use burn::backend::{Backend, TensorMetadata, backend_extension, tensor::FloatTensor};
use burn::tensor::DType;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

/// Threads per row.
const THREADS: usize = 256;

/// Threads that each fold [`GROUP`] partial values, then [`GROUP`] of those are folded.
const GROUP: usize = 16;

/// The sum (`max` false) or maximum of `value` over the workgroup, the same in every
/// thread, in two levels of 16 (workgroup memory is written outside loops only); every
/// thread must call it.
#[cube]
fn across(shared: &mut Shared<[f32]>, value: f32, #[comptime] max: bool) -> f32 {
    let t = UNIT_POS as usize;
    shared[t] = value;
    sync_cube();
    let mut part = shared[t * GROUP % THREADS];
    if t < GROUP {
        for i in 1..GROUP {
            let other = shared[t * GROUP + i];
            if max {
                part = f32::max(part, other);
            } else {
                part += other;
            }
        }
    }
    sync_cube();
    if t < GROUP {
        shared[t] = part;
    }
    sync_cube();
    let mut total = shared[0];
    for i in 1..GROUP {
        let other = shared[i];
        if max {
            total = f32::max(total, other);
        } else {
            total += other;
        }
    }
    sync_cube();
    total
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn smoothed_cross_entropy<F: Float>(
    logits: &LinearView<'_, F>,
    targets: &LinearView<'_, f32>,
    sums: &mut LinearViewMut<'_, f32>,
    grad: &mut LinearViewMut<'_, f32>,
    rows: InputScalar,
    epsilon: InputScalar,
    #[comptime] vocab: usize,
    #[comptime] tracked: bool,
    #[define(F)] _dtype: ElemType,
) {
    let row = CUBE_POS;
    if row >= rows.get::<u32>() as usize {
        terminate!();
    }
    let t = UNIT_POS as usize;
    let mut shared = Shared::<[f32]>::new_slice(THREADS);
    let base = row * vocab;
    let eps = epsilon.get::<f32>();
    let spread = eps / f32::cast_from(vocab - 1);

    let mut m = f32::new(-3.0e38);
    let mut j = t;
    while j < vocab {
        m = f32::max(m, f32::cast_from(logits.read(base + j)));
        j += THREADS;
    }
    let m = across(&mut shared, m, true);
    let mut exps = 0.0f32;
    let mut total = 0.0f32;
    let mut j = t;
    while j < vocab {
        let z = f32::cast_from(logits.read(base + j));
        exps += (z - m).exp();
        total += z;
        j += THREADS;
    }
    let exps = across(&mut shared, exps, false);
    let total = across(&mut shared, total, false);
    let log_norm = m + exps.ln();
    let target = u32::cast_from(targets.read(row)) as usize;
    let keep = target != comptime!(PAD as usize);
    if t == 0 {
        let mut nll = 0.0f32;
        let mut smoothed = 0.0f32;
        if keep {
            nll = log_norm - f32::cast_from(logits.read(base + target));
            // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
            let uniform = f32::cast_from(vocab) * log_norm - total;
            smoothed = nll * (1.0f32 - eps - spread) + uniform * spread;
        }
        sums.write(2 * row, smoothed);
        sums.write(2 * row + 1, nll);
    }
    if tracked {
        let mut j = t;
        while j < vocab {
            // p − q: q = spread everywhere plus 1 − ε − spread at the target; 0 on PAD.
            let mut g = 0.0f32;
            if keep {
                g = (f32::cast_from(logits.read(base + j)) - m).exp() / exps - spread;
                if j == target {
                    g -= 1.0f32 - eps - spread;
                }
            }
            grad.write(base + j, g);
            j += THREADS;
        }
    }
}

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()))]
pub trait LossKernel: Backend {
    /// For `logits` `[rows, v]` (f32, or f16 or bf16 read as such and computed in f32) and
    /// `targets` `[rows]` (ids as floats): each row's `[smoothed cross-entropy, −log
    /// p(target)]` (`[rows, 2]`, f32, 0 on PAD rows) and, when `tracked`, the gradient of
    /// the smoothed loss `p − q` (`[rows, v]`, f32: under a loss scale it is scaled before
    /// it is rounded to half precision; `[1, 1]` unused otherwise).
    #[fusion(meta = |logits, _targets, _epsilon, tracked| (
        TensorSpec::new([logits.shape[0], 2].into(), DType::F32),
        TensorSpec::new(
            if *tracked { logits.shape.clone() } else { [1, 1].into() },
            DType::F32,
        ),
    ))]
    fn smoothed_cross_entropy(
        logits: FloatTensor<Self>,
        targets: FloatTensor<Self>,
        epsilon: f64,
        tracked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

impl LossKernel for CubeBackend {
    fn smoothed_cross_entropy(
        logits: CubeTensor,
        targets: CubeTensor,
        epsilon: f64,
        tracked: bool,
    ) -> (CubeTensor, CubeTensor) {
        let (logits, targets) = (into_contiguous(logits), into_contiguous(targets));
        let [rows, vocab] = logits.shape().dims::<2>();
        let empty = |shape: [usize; 2], dtype| {
            empty_device_dtype(
                logits.client.clone(),
                logits.device.clone(),
                shape.into(),
                dtype,
            )
        };
        let sums = empty([rows, 2], DType::F32);
        let grad = empty(if tracked { [rows, vocab] } else { [1, 1] }, DType::F32);
        let dtype = float_elem(logits.dtype);
        let client = logits.client.clone();
        let dim = CubeDim::new_1d(THREADS as u32);
        let count = calculate_cube_count_elemwise(&client, rows * THREADS, dim);
        // SAFETY: row < rows and j < vocab index a contiguous [rows, vocab] tensor; the
        // targets are ids below vocab (the batches' own), one per row.
        unsafe {
            smoothed_cross_entropy::launch_unchecked(
                &client,
                count,
                dim,
                logits.into_linear_view(),
                targets.into_linear_view(),
                sums.clone().into_linear_view(),
                grad.clone().into_linear_view(),
                u32_arg(rows),
                f32_arg(epsilon),
                vocab,
                tracked,
                dtype,
            );
        }
        (sums, grad)
    }
}
