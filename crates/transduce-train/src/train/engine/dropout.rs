//! Dropout masks (§5.4) drawn on the device from a step count in device memory, for steps
//! captured as graphs.
//!
//! burn's random kernels take their seed from the host as a kernel argument: a replayed
//! graph would draw the capture's mask on every step, silently. Here each mask element is a
//! counter-based hash of (run seed, step, dropout site, element index) with the step read
//! from the device counter the optimizer advances, so every replay draws new masks, and a
//! resumed run draws the masks an uninterrupted one would (they depend on nothing else).

use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_dtype;
use burn_cubecl::tensor::CubeTensor;
use transduce::burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use transduce::burn::tensor::Tensor as BurnTensor;
use transduce::dropout::DeviceMasks;

use transduce::burn::backend::Dispatch;

/// A 32-bit integer hash with good avalanche ("lowbias32", Chris Wellons' hash prospector).
#[cube]
fn mix(x: u32) -> u32 {
    let mut x = x;
    x ^= x >> 16;
    x *= 0x7feb352d;
    x ^= x >> 15;
    x *= 0x846ca68b;
    x ^= x >> 16;
    x
}

#[cube(launch_unchecked)]
fn mask_kernel(
    mask: &mut LinearViewMut<'_, f32>,
    step: &LinearView<'_, f32>,
    seed: InputScalar,
    site: InputScalar,
    threshold: InputScalar,
    scale: InputScalar,
) {
    let i = ABSOLUTE_POS;
    if !mask.is_in_bounds(i) {
        terminate!();
    }
    let step = u32::cast_from(step.read(0));
    let stream = mix(mix(seed.get::<u32>() ^ mix(step)) ^ (site.get::<u32>() * 0x9e3779b9));
    let bits = mix(mix(u32::cast_from(i) ^ stream) + stream);
    let keep = bits < threshold.get::<u32>();
    mask.write(i, select(keep, scale.get::<f32>(), 0.0f32));
}

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
            transduce::burn::backend::TensorMetadata::shape(&like),
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
        // SAFETY: the mask is written within its length; the step holds one value.
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
            );
        }
        mask
    }
}

/// The model's dropout masks for one step: drawn on the device from `step` (`[1]`, the
/// optimizer's updates so far, read at run time) and the run's `seed`.
pub fn device_masks(step: BurnTensor<1>, seed: u64) -> DeviceMasks {
    let seed = (seed ^ (seed >> 32)) as u32;
    std::rc::Rc::new(move |like: BurnTensor<1>, site: u64, keep: f64| {
        BurnTensor::from_dispatch(<Dispatch as DropoutMask>::dropout_mask(
            like.into_dispatch(),
            step.clone().into_dispatch(),
            seed,
            site as u32,
            keep,
        ))
    })
}
