//! The norm's kernels as a backend extension: the trait, and its cubecl implementation that
//! launches [`super::kernel`]'s kernels.

use burn::backend::fusion::custom::TensorSpec;
use burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use burn::tensor::DType;
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use super::kernel::{LANES, ROWS, norm_backward, norm_forward};
use crate::args::{f32_arg, float_elem, u32_arg};

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()), Autodiff: cfg(all()))]
pub trait LayerNormKernel: Backend {
    /// `(z − mean)/sqrt(var + ε)·γ + β` over the rows of `z` (`[rows, d]`; f32, or f16 or
    /// bf16 computed in f32), in `z`'s type; γ and β in f32.
    #[fusion(dtype = z, shape = z)]
    fn layer_norm_rows(
        z: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self>;

    /// The gradient of [`LayerNormKernel::layer_norm_rows`] for `z` given the output's
    /// `dy` (both in `z`'s type), and `[dy·x̂, dy]` (`[rows, 2d]`, f32: its column sums are
    /// γ's and β's gradients).
    #[fusion(meta = |z, _gamma, _dy, _epsilon| (
        z.clone(),
        TensorSpec::new([z.shape[0], 2 * z.shape[1]].into(), DType::F32),
    ))]
    fn layer_norm_rows_backward(
        z: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        dy: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>);
}

fn launch_geometry(rows: usize) -> (CubeDim, usize) {
    (CubeDim::new_2d(LANES, ROWS), rows.div_ceil(ROWS as usize))
}

fn empty_like(t: &CubeTensor) -> CubeTensor {
    empty_device_dtype(
        t.client.clone(),
        t.device.clone(),
        burn::backend::TensorMetadata::shape(t),
        t.dtype,
    )
}

impl LayerNormKernel for CubeBackend {
    fn layer_norm_rows(
        z: CubeTensor,
        gamma: CubeTensor,
        beta: CubeTensor,
        epsilon: f64,
    ) -> CubeTensor {
        let z = into_contiguous(z);
        let (gamma, beta) = (into_contiguous(gamma), into_contiguous(beta));
        let [rows, width] = burn::backend::TensorMetadata::shape(&z).dims::<2>();
        let out = empty_like(&z);
        let dtype = float_elem(z.dtype);
        let client = z.client.clone();
        let (cube_dim, cubes) = launch_geometry(rows);
        let cube_count = calculate_cube_count_elemwise(&client, cubes * 256, cube_dim);
        // SAFETY: every access is within row < rows and j < width of a contiguous
        // [rows, width] tensor; γ and β hold `width` values.
        unsafe {
            norm_forward::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                z.into_linear_view(),
                gamma.into_linear_view(),
                beta.into_linear_view(),
                out.clone().into_linear_view(),
                u32_arg(rows),
                f32_arg(epsilon),
                width,
                dtype,
            );
        }
        out
    }

    fn layer_norm_rows_backward(
        z: CubeTensor,
        gamma: CubeTensor,
        dy: CubeTensor,
        epsilon: f64,
    ) -> (CubeTensor, CubeTensor) {
        let (z, gamma, dy) = (
            into_contiguous(z),
            into_contiguous(gamma),
            into_contiguous(dy),
        );
        let [rows, width] = burn::backend::TensorMetadata::shape(&z).dims::<2>();
        let dz = empty_like(&z);
        let stacked = empty_device_dtype(
            z.client.clone(),
            z.device.clone(),
            [rows, 2 * width].into(),
            DType::F32,
        );
        let dtype = float_elem(z.dtype);
        let client = z.client.clone();
        let (cube_dim, cubes) = launch_geometry(rows);
        let cube_count = calculate_cube_count_elemwise(&client, cubes * 256, cube_dim);
        // SAFETY: as the forward's.
        unsafe {
            norm_backward::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                z.into_linear_view(),
                gamma.into_linear_view(),
                dy.into_linear_view(),
                dz.clone().into_linear_view(),
                stacked.clone().into_linear_view(),
                u32_arg(rows),
                f32_arg(epsilon),
                width,
                dtype,
            );
        }
        (dz, stacked)
    }
}
