//! Where the model chooses between a fused kernel ([`transduce_kernels`], native GPU
//! training) and burn's primitives, in one place, and what a device is:
//! - [`fused`]: whether the fused kernels run on a device (they are on, and it is a cubecl
//!   device), for the norms, the attention and the loss ([`crate::train::loss`]);
//!   [`set_fused`] turns them off for the process (`--no-fused-layers`, to compare);
//! - [`layer_norm`]: the norm, fused or burn's in f32;
//! - [`fused_attention`]: attention over all heads fused, or `None` for the primitives
//!   ([`crate::attention::scaled_dot_product`]);
//! - [`is_cpu`], [`is_flex`]: the CPU backends (no graphs, no cubecl kernels; burn-flex's
//!   host memory is what the host paths read).
//!
//! In wasm there are no kernels: every choice is the primitives.

use std::sync::atomic::{AtomicBool, Ordering};

use burn::nn::LayerNorm;
use burn::prelude::*;
use burn::tensor::FloatDType;

/// The layer norms' ε (burn's default), named so the fused kernel uses the same.
pub const NORM_EPSILON: f64 = 1e-5;

static FUSED: AtomicBool = AtomicBool::new(true);

/// Turns the fused kernels on (the default) or off for the whole process: off, the model
/// and the loss run as burn's primitives (`transduce bench --no-fused-layers`).
pub fn set_fused(on: bool) {
    FUSED.store(on, Ordering::Relaxed);
}

/// Whether the fused kernels run on `device`: they are on ([`set_fused`]), and it is a
/// cubecl device (wgpu, CUDA; an autodiff device counts by its inner one). Never in wasm.
pub fn fused(device: &Device) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        FUSED.load(Ordering::Relaxed) && transduce_kernels::device::is_cube(device)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = device;
        false
    }
}

/// Whether `device` is one of the CPU backends (burn-flex, or ndarray kept to compare): no
/// graphs and no cubecl kernels there. In wasm every device is (burn-flex).
pub fn is_cpu(device: &Device) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        #[allow(deprecated)]
        let ndarray = Device::ndarray();
        is_flex(device) || device.clone().inner() == ndarray
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = device;
        true
    }
}

/// Whether `device` is burn-flex, the CPU backend whose tensors the host paths read in place
/// (an autodiff device counts by its inner one).
pub fn is_flex(device: &Device) -> bool {
    device.clone().inner() == Device::flex()
}

/// Layer normalization computed in f32 whatever the input's type (its mean and variance
/// over d_model values lose too much in half precision), returned in the input's type:
/// through the fused kernel where it runs ([`fused`]; it reads and writes half precision
/// itself, computing in f32), else burn's norm on the input cast to f32.
pub fn layer_norm(norm: &LayerNorm, x: Tensor<3>) -> Tensor<3> {
    #[cfg(not(target_arch = "wasm32"))]
    if fused(&x.device())
        && let Some(y) = transduce_kernels::layer_norm::try_layer_norm(norm, &x, NORM_EPSILON)
    {
        return y;
    }
    let dtype = x.dtype();
    norm.forward(x.cast(FloatDType::F32)).cast(dtype)
}

/// Attention of `q` (`[batch, queries, heads·d_k]`) over `k` and `v` (`[batch, keys,
/// heads·d]`) through the fused kernels where they run ([`fused`]; training, f32, f16 or
/// bf16, at most [`transduce_kernels::attention::MAX_KEYS`] keys): the context `[batch,
/// queries, heads·d_v]` and the weights `[batch, heads, queries, keys]`. `None`: the caller
/// runs the primitives. `blocked` is `[batch or 1, 1, queries or 1, keys]`, true where a key
/// is hidden.
pub fn fused_attention(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    blocked: Option<&Tensor<4, Bool>>,
    heads: usize,
) -> Option<(Tensor<3>, Tensor<4>)> {
    #[cfg(not(target_arch = "wasm32"))]
    if fused(&q.device()) {
        return transduce_kernels::attention::try_attention(q, k, v, blocked, heads);
    }
    #[cfg(target_arch = "wasm32")]
    let _ = (k, v, blocked, heads);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::precision::apply_linear;
    use burn::nn::{LayerNormConfig, LinearConfig};

    #[test]
    fn f32_paths_equal_burns_own_layers() {
        let device = Device::flex();
        let layer = LinearConfig::new(3, 2).init(&device);
        let x = Tensor::<2>::from_floats([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]], &device);
        let ours = apply_linear(&layer, x.clone()).into_data();
        let burns = layer.forward(x).into_data();
        ours.assert_eq(&burns, true);

        let norm = LayerNormConfig::new(3).init(&device);
        let x = Tensor::<3>::from_floats([[[1.0, 2.0, 4.0]]], &device);
        let ours = layer_norm(&norm, x.clone()).into_data();
        ours.assert_eq(&norm.forward(x).into_data(), true);
    }
}
