//! The fused norm against burn's `LayerNorm` (the unfused path): forward and backward, in
//! f32, f16 and bf16, and what each launches.

use burn::nn::{LayerNorm, LayerNormConfig};
use burn::tensor::{DType, Device, FloatDType, Tensor};

use super::try_layer_norm;
use crate::testing::{assert_close, count_launches, gpu_lock, wgpu_device};

/// The model's norms' ε (burn's default: `transduce::layers::NORM_EPSILON`).
const EPSILON: f64 = 1e-5;

/// The inputs: [`crate::testing::values`] in [−2, 2], period 1009.
fn values(n: usize, shift: usize) -> Vec<f32> {
    crate::testing::values(n, shift, 1009, 2.0)
}

/// A norm with γ and β of its own (not the ones and zeros of a fresh norm).
fn norm(d: usize, device: &Device) -> LayerNorm {
    let mut norm = LayerNormConfig::new(d).with_epsilon(EPSILON).init(device);
    let tracked = |t: Tensor<1>| {
        if device.is_autodiff() {
            t.require_grad()
        } else {
            t
        }
    };
    let gamma = Tensor::<1>::from_floats(values(d, 1).as_slice(), device).add_scalar(2.5);
    let beta = Tensor::<1>::from_floats(values(d, 2).as_slice(), device);
    norm.gamma = norm.gamma.map(|_| tracked(gamma));
    norm.beta = norm.beta.map(|b| b.map(|_| tracked(beta)));
    norm
}

struct Grads {
    y: Vec<f32>,
    x: Vec<f32>,
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// The norm's output and the gradients of Σ y·w for the f32 leaf x (cast to `dtype`),
/// γ and β, the norm applied by `apply`.
fn run_with(
    dims: [usize; 3],
    dtype: FloatDType,
    device: &Device,
    apply: impl Fn(&LayerNorm, &Tensor<3>) -> Tensor<3>,
) -> Grads {
    let [b, t, d] = dims;
    let norm = norm(d, device);
    let x = Tensor::<1>::from_floats(values(b * t * d, 3).as_slice(), device)
        .reshape([b, t, d])
        .require_grad();
    let w = Tensor::<1>::from_floats(values(b * t * d, 4).as_slice(), device)
        .reshape([b, t, d])
        .cast(dtype);
    let y = apply(&norm, &x.clone().cast(dtype));
    assert_eq!(y.dtype(), DType::from(dtype));
    let grads = (y.clone() * w).sum().backward();
    let vec = |t: Tensor<1>| t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap();
    Grads {
        y: vec(y.reshape([b * t * d])),
        x: vec(x.grad(&grads).unwrap().reshape([b * t * d])),
        gamma: vec(norm.gamma.val().grad(&grads).unwrap()),
        beta: vec(norm.beta.as_ref().unwrap().val().grad(&grads).unwrap()),
    }
}

/// [`run_with`] in f32, fused or burn's.
fn run(fused: bool, dims: [usize; 3], device: &Device) -> Grads {
    run_with(dims, FloatDType::F32, device, |norm, x| match fused {
        true => try_layer_norm(norm, x, EPSILON).expect("fused path applies"),
        false => norm.forward(x.clone()),
    })
}

/// The fused forward and backward give burn's norm's output and gradients (x, γ, β) to
/// rounding, at widths that fill the 32 lanes of a row unevenly and row counts that
/// leave a workgroup's 8 rows part-empty.
#[test]
fn fused_norm_is_burns_norm_forward_and_backward() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("fused_norm_is_burns_norm_forward_and_backward") else {
        return;
    };
    let device = device.autodiff();
    for dims in [[2, 5, 40], [3, 7, 256], [1, 1, 7]] {
        let (fused, burn) = (run(true, dims, &device), run(false, dims, &device));
        let what = |name: &str| format!("{dims:?} {name}");
        assert_close(&what("y"), &fused.y, &burn.y, 1e-5);
        assert_close(&what("dx"), &fused.x, &burn.x, 1e-4);
        assert_close(&what("dγ"), &fused.gamma, &burn.gamma, 1e-5);
        assert_close(&what("dβ"), &fused.beta, &burn.beta, 1e-5);
    }
    // Inference (no autodiff) takes the same kernel.
    let inner = device.clone().inner();
    let x = Tensor::<1>::from_floats(values(3 * 40, 5).as_slice(), &inner).reshape([1, 3, 40]);
    let norm = norm(40, &inner);
    let fused = try_layer_norm(&norm, &x, EPSILON).unwrap();
    let vec = |t: Tensor<3>| t.reshape([120]).into_data().try_to_vec::<f32>().unwrap();
    assert_close("inference", &vec(fused), &vec(norm.forward(x)), 1e-5);
}

/// The half-precision types, each with its name, and the tolerance (× the largest value)
/// of a result rounded to it against f32's: a few units of its last place (f16 keeps 11
/// significant bits, bf16 8).
const HALVES: [(&str, FloatDType, f32); 2] = [
    ("f16", FloatDType::F16, 2e-3),
    ("bf16", FloatDType::BF16, 1.6e-2),
];

/// [`run_with`] in `dtype` through the kernel reading and writing it (`direct`), or
/// through the f32 kernel between casts.
fn run_half(direct: bool, dims: [usize; 3], dtype: FloatDType, device: &Device) -> Grads {
    let epsilon = EPSILON;
    run_with(dims, dtype, device, |norm, half| {
        let fused = |x: &Tensor<3>| try_layer_norm(norm, x, epsilon).expect("fused path applies");
        match direct {
            true => fused(half),
            false => fused(&half.clone().cast(FloatDType::F32)).cast(dtype),
        }
    })
}

/// In half precision the kernel reads and writes f16 or bf16 and computes in f32: the same
/// bits as the f32 kernel between casts (the casts' rounding is the kernel's, and every
/// intermediate value is the same f32), forward and backward.
#[test]
fn fused_norm_in_half_precision_is_the_f32_kernel_between_casts() {
    let _serial = gpu_lock();
    let test = "fused_norm_in_half_precision_is_the_f32_kernel_between_casts";
    let Some(device) = wgpu_device(test) else {
        return;
    };
    let device = device.autodiff();
    for (name, dtype, _) in HALVES {
        if !device.supports_dtype(dtype) {
            transduce_testing::skip_part(format_args!(
                "{test} in {name}: the adapter has no {name}"
            ));
            continue;
        }
        for dims in [[2, 5, 40], [1, 1, 7]] {
            let (direct, around) = (
                run_half(true, dims, dtype, &device),
                run_half(false, dims, dtype, &device),
            );
            assert_eq!(direct.y, around.y, "{name} {dims:?} y");
            assert_eq!(direct.x, around.x, "{name} {dims:?} dx");
            assert_eq!(direct.gamma, around.gamma, "{name} {dims:?} dγ");
            assert_eq!(direct.beta, around.beta, "{name} {dims:?} dβ");
        }
    }
}

/// In half precision the fused norm is the unfused path (`transduce::ops::layer_norm`
/// without the kernel: burn's norm on the input cast to f32, the output cast back) to the
/// type's rounding: the output and the gradients of x, γ and β.
#[test]
fn fused_norm_in_half_precision_is_burns_norm_in_f32() {
    let _serial = gpu_lock();
    let test = "fused_norm_in_half_precision_is_burns_norm_in_f32";
    let Some(device) = wgpu_device(test) else {
        return;
    };
    let device = device.autodiff();
    for (name, dtype, tolerance) in HALVES {
        if !device.supports_dtype(dtype) {
            transduce_testing::skip_part(format_args!(
                "{test} in {name}: the adapter has no {name}"
            ));
            continue;
        }
        for dims in [[2, 5, 40], [3, 7, 256]] {
            let fused = run_half(true, dims, dtype, &device);
            let burn = run_with(dims, dtype, &device, |norm, x| {
                norm.forward(x.clone().cast(FloatDType::F32)).cast(dtype)
            });
            let what = |part: &str| format!("{name} {dims:?} {part}");
            assert_close(&what("y"), &fused.y, &burn.y, tolerance);
            assert_close(&what("dx"), &fused.x, &burn.x, 2.0 * tolerance);
            assert_close(&what("dγ"), &fused.gamma, &burn.gamma, tolerance);
            assert_close(&what("dβ"), &fused.beta, &burn.beta, tolerance);
        }
    }
}

/// What a norm's forward and backward launch, fused and as burn's primitives.
#[test]
fn fused_norm_launches_a_few_kernels() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("fused_norm_launches_a_few_kernels") else {
        return;
    };
    let device = device.autodiff();
    let launches = |fused: bool| {
        run(fused, [2, 9, 64], &device); // compiled and tuned: not counted
        count_launches(|| {
            run(fused, [2, 9, 64], &device);
        })
        .1
    };
    let (fused, burn) = (launches(true), launches(false));
    println!("norm forward + backward (+ the test's own reads): fused {fused}, burn's {burn}");
    // Both runs launch the test's own kernels (the norm's γ and β, Σ y·w, the seed
    // gradient): the difference is the norm's. Measured on lavapipe: 13 against 34.
    assert!(fused + 15 <= burn, "fused {fused}, burn's {burn}");
}
