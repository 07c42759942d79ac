//! Where the model chooses between a fused kernel ([`transduce_kernels`], native GPU
//! training) and burn's primitives, in one place, and what a device is:
//! - [`fused`]: whether the fused kernels run on a device (the caller allows them, and it is
//!   a cubecl device), for the norms, the attention and the loss ([`crate::train::loss`]).
//!   Whether they are allowed is an explicit value, not a process-wide switch: a model
//!   carries it ([`crate::Transformer::fused`], off with `--no-fused-layers`, to compare)
//!   and passes it to every call here, so two models in one process may differ;
//! - [`layer_norm`]: the norm, fused or burn's in f32;
//! - [`fused_attention`]: attention over all heads fused, or `None` for the primitives
//!   ([`crate::attention::scaled_dot_product`]);
//! - [`is_cpu`], [`is_flex`]: the CPU backends (no graphs, no cubecl kernels; burn-flex's
//!   host memory is what the host paths read).
//!
//! In wasm there are no kernels: every choice is the primitives.

use burn::nn::LayerNorm;
use burn::prelude::*;
use burn::tensor::FloatDType;

/// The layer norms' ε (burn's default), named so the fused kernel uses the same.
pub const NORM_EPSILON: f64 = 1e-5;

/// Whether the fused kernels run on `device`: the caller allows them (`allowed`: the
/// model's [`crate::Transformer::fused`]), and it is a cubecl device (wgpu, CUDA; an
/// autodiff device counts by its inner one). Never in wasm.
pub fn fused(allowed: bool, device: &Device) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        allowed && transduce_kernels::device::is_cube(device)
    }
    #[cfg(target_arch = "wasm32")]
    {
        let _ = (allowed, device);
        false
    }
}

/// Whether `device` is the CPU backend (burn-flex): no graphs and no cubecl kernels there.
/// In wasm every device is.
pub fn is_cpu(device: &Device) -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        is_flex(device)
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
/// through the fused kernel where it runs ([`fused`] with `allowed`; it reads and writes
/// half precision itself, computing in f32), else burn's norm on the input cast to f32.
pub fn layer_norm(norm: &LayerNorm, x: Tensor<3>, allowed: bool) -> Tensor<3> {
    #[cfg(not(target_arch = "wasm32"))]
    if fused(allowed, &x.device())
        && let Some(y) = transduce_kernels::layer_norm::try_layer_norm(norm, &x, NORM_EPSILON)
    {
        return y;
    }
    #[cfg(target_arch = "wasm32")]
    let _ = allowed;
    let dtype = x.dtype();
    norm.forward(x.cast(FloatDType::F32)).cast(dtype)
}

/// Attention of `q` (`[batch, queries, heads·d_k]`) over `k` and `v` (`[batch, keys,
/// heads·d]`) through the fused kernels where they run ([`fused`] with `allowed`; training,
/// f32, f16 or bf16, at most [`transduce_kernels::attention::MAX_KEYS`] keys): the context `[batch,
/// queries, heads·d_v]` and the weights `[batch, heads, queries, keys]`. `None`: the caller
/// runs the primitives. `blocked` is `[batch or 1, 1, queries or 1, keys]`, true where a key
/// is hidden.
pub fn fused_attention(
    q: &Tensor<3>,
    k: &Tensor<3>,
    v: &Tensor<3>,
    blocked: Option<&Tensor<4, Bool>>,
    heads: usize,
    allowed: bool,
) -> Option<(Tensor<3>, Tensor<4>)> {
    #[cfg(not(target_arch = "wasm32"))]
    if fused(allowed, &q.device()) {
        return transduce_kernels::attention::try_attention(q, k, v, blocked, heads);
    }
    #[cfg(target_arch = "wasm32")]
    let _ = (q, k, v, blocked, heads, allowed);
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
        let ours = layer_norm(&norm, x.clone(), true).into_data();
        ours.assert_eq(&norm.forward(x).into_data(), true);
    }

    /// The fused kernels run only where the caller allows them and the device is a cubecl
    /// one: never on the CPU backends.
    #[test]
    fn fused_needs_permission_and_a_cubecl_device() {
        assert!(!fused(true, &Device::flex()));
        assert!(!fused(true, &Device::flex().autodiff()));
        let Some(gpu) = transduce_kernels::testing::wgpu_device("fused_needs_permission") else {
            return;
        };
        assert!(fused(true, &gpu) && fused(true, &gpu.clone().autodiff()));
        assert!(!fused(false, &gpu));
    }

    /// A model built with the fused kernels off (`--no-fused-layers`) keeps that through a
    /// parameter walk, and its training pass and loss take burn's primitives: more
    /// launches than the fused model's, the same loss to rounding.
    #[test]
    fn a_model_without_fused_kernels_takes_the_primitives() {
        use crate::ModelConfig;
        use crate::train::loss::label_smoothed;
        use burn::module::Module;
        use transduce_kernels::testing::{count_launches, gpu_lock, wgpu_device};

        /// A walk over the parameters that leaves them as they are.
        struct Same;
        impl burn::module::ModuleMapper for Same {}

        let mut config = ModelConfig::preset("tiny").unwrap();
        config.dropout = 0.0;
        let plain = crate::Transformer::new(&config, &Device::flex()).unwrap();
        assert!(plain.fused());
        let off = plain.with_fused(false).map(&mut Same);
        assert!(!off.fused(), "the flag survives a parameter walk");

        let _serial = gpu_lock();
        let Some(gpu) = wgpu_device("a_model_without_fused_kernels_takes_the_primitives") else {
            return;
        };
        let device = gpu.autodiff();
        device.seed(3);
        let model = crate::Transformer::new(&config, &device).unwrap();
        let ids = |rows: [[i32; 5]; 2]| Tensor::<2, Int>::from_data(rows, &device);
        let src = ids([[5, 6, 7, 8, 2], [9, 10, 11, 2, 0]]);
        let tgt_in = ids([[1, 12, 13, 14, 15], [1, 16, 17, 18, 0]]);
        let tgt_out = ids([[12, 13, 14, 15, 2], [16, 17, 18, 2, 0]]);
        let step = |fused: bool| {
            let model = model.clone().with_fused(fused);
            let logits = model.forward(src.clone(), tgt_in.clone());
            let sums = label_smoothed(logits, tgt_out.clone(), 0.1, model.fused());
            let _ = sums.smoothed.clone().backward();
            sums.smoothed.into_data().try_to_vec::<f32>().unwrap()[0]
        };
        step(true);
        step(false); // compiled and tuned: not counted
        let (fused, fused_launches) = count_launches(|| step(true));
        let (unfused, unfused_launches) = count_launches(|| step(false));
        assert!(
            (fused - unfused).abs() <= 1e-4 * unfused.abs(),
            "loss {fused} fused, {unfused} unfused"
        );
        assert!(
            fused_launches < unfused_launches,
            "launches: {fused_launches} fused, {unfused_launches} unfused"
        );
    }
}
