//! Layer norm on burn's tensors through the fused kernels, where they apply.

use burn::backend::Dispatch;
use burn::nn::LayerNorm;
use burn::tensor::{DType, Tensor};

use super::forward::LayerNormKernel;
use crate::device::is_cube;

/// `norm(x)` through the fused kernels, where they apply: an f32, f16 or bf16 input (half
/// precision read and written as such, computed in f32) on a cubecl device (wgpu, CUDA), a
/// norm with β. `None` otherwise: the caller runs burn's norm.
pub fn try_layer_norm(norm: &LayerNorm, x: &Tensor<3>, epsilon: f64) -> Option<Tensor<3>> {
    if !matches!(x.dtype(), DType::F32 | DType::F16 | DType::BF16) || !is_cube(&x.device()) {
        return None;
    }
    let beta = norm.beta.as_ref()?.val();
    let [b, t, d] = x.dims();
    let rows = x.clone().reshape([b * t, d]);
    let y = <Dispatch as LayerNormKernel>::layer_norm_rows(
        rows.into_dispatch(),
        norm.gamma.val().into_dispatch(),
        beta.into_dispatch(),
        epsilon,
    );
    Some(Tensor::<2>::from_dispatch(y).reshape([b, t, d]))
}
