//! Kernel arguments: scalars passed at launch and the element type a kernel generic over its
//! activations' type is compiled for.

use burn::tensor::DType;
use burn_cubecl::cubecl::ir::{ElemType, FloatKind, UIntKind};
use burn_cubecl::cubecl::prelude::InputScalar;

/// A `u32` kernel argument.
pub fn u32_arg(v: usize) -> InputScalar {
    InputScalar::new(v as u32, ElemType::UInt(UIntKind::U32))
}

/// An `f32` kernel argument.
pub fn f32_arg(v: f64) -> InputScalar {
    InputScalar::new(v as f32, ElemType::Float(FloatKind::F32))
}

/// cubecl's element type of the float `dtype` (f32, f16 or bf16): what a kernel generic
/// over its activations' type is compiled for.
pub fn float_elem(dtype: DType) -> ElemType {
    match dtype {
        DType::F16 => ElemType::Float(FloatKind::F16),
        DType::BF16 => ElemType::Float(FloatKind::BF16),
        _ => ElemType::Float(FloatKind::F32),
    }
}
