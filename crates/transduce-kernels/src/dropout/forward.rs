//! The mask kernel as a backend extension: the trait, and its cubecl implementation.

use burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;

use super::kernel::mask_kernel;
use crate::args::float_elem;

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()))]
pub trait DropoutMask: Backend {
    /// A mask shaped like `like` (whose values are not read): each element
    /// `1 / keep` with probability `keep`, else 0, from (`seed`, the step in `step`
    /// (`[1]`), `site`, the element's index).
    #[fusion(dtype = like, shape = like)]
    fn dropout_mask(
        like: FloatTensor<Self>,
        step: FloatTensor<Self>,
        seed: u32,
        site: u32,
        keep: f64,
    ) -> FloatTensor<Self>;
}

impl DropoutMask for CubeBackend {
    fn dropout_mask(
        like: CubeTensor,
        step: CubeTensor,
        seed: u32,
        site: u32,
        keep: f64,
    ) -> CubeTensor {
        let mask = empty_device_dtype(
            like.client.clone(),
            like.device.clone(),
            burn::backend::TensorMetadata::shape(&like),
            like.dtype,
        );
        let step = into_contiguous(step);
        let n = mask.meta.num_elements();
        let client = mask.client.clone();
        let cube_dim = CubeDim::new(&client, n);
        let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
        // An element survives when its 32 bits fall below keep · 2³² (as the CPU's masks).
        let threshold = (keep * 4_294_967_296.0).min(u32::MAX as f64) as u32;
        let u32_type = cubecl::ir::ElemType::UInt(cubecl::ir::UIntKind::U32);
        let dtype = float_elem(mask.dtype);
        // SAFETY: the mask is written within its length, in its own type; the step holds
        // one value.
        unsafe {
            mask_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                mask.clone().into_linear_view(),
                step.into_linear_view(),
                InputScalar::new(seed, u32_type),
                InputScalar::new(site, u32_type),
                InputScalar::new(threshold, u32_type),
                InputScalar::new(
                    (1.0 / keep) as f32,
                    cubecl::ir::ElemType::Float(cubecl::ir::FloatKind::F32),
                ),
                dtype,
            );
        }
        mask
    }
}
