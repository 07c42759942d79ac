//! Adam's update (§5.3) as one kernel per parameter, writing the parameter and its two
//! moments in place.
//!
//! As tensor operations ([`super::graph::DeviceAdam`]'s oracle path) an update is a fused
//! kernel writing new buffers, then three copies back into the buffers a replayed graph
//! reads: four kernels per parameter, three of them copies. This kernel reads the gradient
//! and the step's scalars and rewrites the three buffers where they are: one kernel, and a
//! replay stays a fixed point by construction. It computes burn's formulas in burn's order.
//!
//! Under a loss scale (half precision) the scalars also carry 1/scale and whether every
//! gradient of the step was finite: the kernel unscales the gradient as it reads it, and
//! on a step that overflowed writes nothing, so the skip happens on the device.

use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::cubecl::std::tensor::layout::linear::{LinearView, LinearViewMut};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use transduce::burn::backend::{Backend, backend_extension, tensor::FloatTensor};

/// β1, β2 and ε of §5.3 (the kernel's constants; [`super::graph::DeviceAdam`] uses the same).
pub const BETA_1: f64 = 0.9;
pub const BETA_2: f64 = 0.98;
pub const EPSILON: f64 = 1e-9;

#[cube(launch_unchecked)]
fn adam_kernel(
    param: &mut LinearViewMut<'_, f32>,
    grad: &LinearView<'_, f32>,
    first: &mut LinearViewMut<'_, f32>,
    second: &mut LinearViewMut<'_, f32>,
    scalars: &LinearView<'_, f32>,
    #[comptime] scaled: bool,
) {
    let i = ABSOLUTE_POS;
    if !param.is_in_bounds(i) {
        terminate!();
    }
    let mut g = grad.read(i);
    if scaled {
        // A skipped step (some gradient not finite) leaves everything as it was.
        if scalars.read(4) == f32::new(0.0) {
            terminate!();
        }
        g *= scalars.read(3);
    }
    // The constants as burn passes them: f64 values rounded to f32.
    let m = first.read(i) * f32::new(comptime!(BETA_1 as f32))
        + g * f32::new(comptime!((1.0 - BETA_1) as f32));
    let v = second.read(i) * f32::new(comptime!(BETA_2 as f32))
        + g * g * f32::new(comptime!((1.0 - BETA_2) as f32));
    let lr = scalars.read(0);
    let combined = scalars.read(1);
    let epsilon = scalars.read(2);
    let step = m * combined / (v.sqrt() + epsilon);
    param.write(i, param.read(i) - step * lr);
    first.write(i, m);
    second.write(i, v);
}

/// A buffer this kernel may write: the tensor's own when nothing else holds it, a copy
/// otherwise (never another tensor's values changed under it).
fn writable(tensor: CubeTensor) -> CubeTensor {
    let tensor = into_contiguous(tensor);
    if tensor.can_mut() {
        tensor
    } else {
        tensor.copy()
    }
}

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()))]
pub trait AdamKernel: Backend {
    /// One Adam update of `param` from `grad`, with the step's `[learning rate, combined
    /// bias correction, scaled ε]` in `scalars`, followed under a loss scale by `[1/scale,
    /// 1 if the step's gradients are all finite else 0]`: returns the parameter and the two
    /// moments, in their own buffers where those were free to write.
    #[fusion(meta = |param, _grad, first, second, _scalars| (param.clone(), first.clone(), second.clone()))]
    fn adam_in_place(
        param: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        first: FloatTensor<Self>,
        second: FloatTensor<Self>,
        scalars: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>);
}

impl AdamKernel for CubeBackend {
    fn adam_in_place(
        param: CubeTensor,
        grad: CubeTensor,
        first: CubeTensor,
        second: CubeTensor,
        scalars: CubeTensor,
    ) -> (CubeTensor, CubeTensor, CubeTensor) {
        let (param, first, second) = (writable(param), writable(first), writable(second));
        let (grad, scalars) = (into_contiguous(grad), into_contiguous(scalars));
        let scaled = scalars.meta.num_elements() == 5;
        let n = param.meta.num_elements();
        let client = param.client.clone();
        let cube_dim = CubeDim::new(&client, n);
        let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
        // SAFETY: every view is bounds-checked against the parameter's length, which the
        // gradient and the moments share; the scalars hold three values.
        unsafe {
            adam_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                param.clone().into_linear_view(),
                grad.into_linear_view(),
                first.clone().into_linear_view(),
                second.clone().into_linear_view(),
                scalars.into_linear_view(),
                scaled,
            );
        }
        (param, first, second)
    }
}
