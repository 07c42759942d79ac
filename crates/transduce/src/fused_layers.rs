//! The switch of the fused kernels ([`crate::layer_norm_kernel`],
//! [`crate::attention_kernel`], and the trainer's loss kernel): on by default; off, they run
//! as burn's primitives, to compare (`transduce bench --no-fused-layers`).

use std::sync::atomic::{AtomicBool, Ordering};

use burn::backend::DispatchDevice;
use burn::tensor::Device;
use burn_cubecl::cubecl::ir::{ElemType, FloatKind, UIntKind};
use burn_cubecl::cubecl::prelude::InputScalar;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the fused kernels on or off for the whole process.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the fused kernels are on ([`set_enabled`]).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether the fused kernels run on `device`: they are on, and it is a cubecl device (wgpu,
/// CUDA; an autodiff device counts by its inner one).
pub fn applies(device: &Device) -> bool {
    enabled()
        && matches!(
            device.clone().inner().as_dispatch(),
            DispatchDevice::Cube(_)
        )
}

/// A `u32` kernel argument.
pub fn u32_arg(v: usize) -> InputScalar {
    InputScalar::new(v as u32, ElemType::UInt(UIntKind::U32))
}

/// cubecl's element type of the float `dtype` (f32, f16 or bf16): what a kernel generic
/// over its activations' type is compiled for.
pub fn float_elem(dtype: burn::tensor::DType) -> ElemType {
    use burn::tensor::DType;
    match dtype {
        DType::F16 => ElemType::Float(FloatKind::F16),
        DType::BF16 => ElemType::Float(FloatKind::BF16),
        _ => ElemType::Float(FloatKind::F32),
    }
}

/// An `f32` kernel argument.
pub fn f32_arg(v: f64) -> InputScalar {
    InputScalar::new(v as f32, ElemType::Float(FloatKind::F32))
}
