//! Which devices the kernels run on.

use burn::backend::DispatchDevice;
use burn::tensor::Device;

/// Whether `device` is a cubecl device (wgpu, CUDA), where these kernels run; an autodiff
/// device counts by its inner one.
pub fn is_cube(device: &Device) -> bool {
    matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Cube(_)
    )
}
