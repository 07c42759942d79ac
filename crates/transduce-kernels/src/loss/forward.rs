//! The loss kernel as a backend extension: the trait, and its cubecl implementation.

use burn::backend::fusion::custom::TensorSpec;
use burn::backend::{Backend, TensorMetadata, backend_extension, tensor::FloatTensor};
use burn::tensor::DType;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use super::kernel::{THREADS, smoothed_cross_entropy};
use crate::args::{f32_arg, float_elem, u32_arg};

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()))]
pub trait LossKernel: Backend {
    /// For `logits` `[rows, v]` (f32, or f16 or bf16 read as such and computed in f32) and
    /// `targets` `[rows]` (ids as floats): each row's `[smoothed cross-entropy, −log
    /// p(target)]` (`[rows, 2]`, f32, 0 on PAD rows) and, when `tracked`, the gradient of
    /// the smoothed loss `p − q` (`[rows, v]`, f32: under a loss scale it is scaled before
    /// it is rounded to half precision; `[1, 1]` unused otherwise). Rows whose target is
    /// `pad` count zero.
    #[fusion(meta = |logits, _targets, _epsilon, tracked, _pad| (
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
        pad: u32,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

impl LossKernel for CubeBackend {
    fn smoothed_cross_entropy(
        logits: CubeTensor,
        targets: CubeTensor,
        epsilon: f64,
        tracked: bool,
        pad: u32,
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
                pad as usize,
                dtype,
            );
        }
        (sums, grad)
    }
}
