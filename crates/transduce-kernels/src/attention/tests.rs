//! The fused attention against burn's primitives ([`super::reference`]): forward and
//! backward, in f32, f16 and bf16, and what each launches.

use burn::tensor::{Bool, Device, FloatDType, Tensor, TensorData};

use super::reference::attention_heads;
use super::try_attention;
use crate::testing::{count_launches, gpu_lock, wgpu_device};

/// The primitives' values to 2·10⁻⁵ of the largest.
fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    crate::testing::assert_close(what, got, want, 2e-5);
}

/// The inputs: [`crate::testing::values`] in [−1, 1], period 513.
fn values(n: usize, shift: usize) -> Vec<f32> {
    crate::testing::values(n, shift, 513, 1.0)
}

fn leaf(dims: [usize; 3], shift: usize, device: &Device) -> Tensor<3> {
    let n = dims.iter().product();
    Tensor::<1>::from_floats(values(n, shift).as_slice(), device)
        .reshape(dims)
        .require_grad()
}

/// A tensor's values as f32, whatever its type.
fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    let n = t.shape().num_elements();
    t.reshape([n])
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap()
}

struct Case {
    batch: usize,
    queries: usize,
    keys: usize,
    heads: usize,
    dk: usize,
    dv: usize,
    mask: Option<Vec<Vec<bool>>>,
    /// The mask's dims, `[batch or 1, 1, queries or 1, keys]`.
    mask_dims: [usize; 4],
}

struct Outcome {
    context: Vec<f32>,
    weights: Vec<f32>,
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
}

/// The context, the weights and the gradients of Σ context·w for the f32 leaves q, k and
/// v, computed in `dtype` (the leaves cast to it): fused, or through burn's primitives
/// (split heads, `scaled_dot_product`, merge).
/// How [`run`] attends.
#[derive(Clone, Copy, PartialEq)]
enum How {
    /// The fused kernels, in the inputs' type.
    Fused,
    /// The fused kernels in f32, the inputs cast up and the context cast back.
    FusedInF32,
    /// burn's primitives.
    Primitives,
}

fn run(case: &Case, how: How, dtype: FloatDType, device: &Device) -> Outcome {
    let (b, tq, tk, h) = (case.batch, case.queries, case.keys, case.heads);
    let q = leaf([b, tq, h * case.dk], 1, device);
    let k = leaf([b, tk, h * case.dk], 2, device);
    let v = leaf([b, tk, h * case.dv], 3, device);
    let w = Tensor::<1>::from_floats(values(b * tq * h * case.dv, 4).as_slice(), device)
        .reshape([b, tq, h * case.dv])
        .cast(dtype);
    let (qc, kc, vc) = (
        q.clone().cast(dtype),
        k.clone().cast(dtype),
        v.clone().cast(dtype),
    );
    let blocked = case.mask.as_ref().map(|rows| {
        let flat: Vec<bool> = rows.iter().flatten().copied().collect();
        Tensor::<4, Bool>::from_data(TensorData::new(flat, case.mask_dims), device)
    });
    let (context, weights) = if how == How::Fused {
        try_attention(&qc, &kc, &vc, blocked.as_ref(), h).expect("fused path applies")
    } else if how == How::FusedInF32 {
        let up = |t: &Tensor<3>| t.clone().cast(FloatDType::F32);
        let (context, weights) = try_attention(&up(&qc), &up(&kc), &up(&vc), blocked.as_ref(), h)
            .expect("fused path applies");
        (context.cast(dtype), weights)
    } else {
        attention_heads(&qc, &kc, &vc, blocked, h)
    };
    let grads = (context.clone() * w).sum().backward();
    Outcome {
        context: floats(context),
        weights: floats(weights),
        dq: floats(q.grad(&grads).unwrap()),
        dk: floats(k.grad(&grads).unwrap()),
        dv: floats(v.grad(&grads).unwrap()),
    }
}

fn cases() -> Vec<Case> {
    let causal =
        |t: usize| -> Vec<Vec<bool>> { (0..t).map(|i| (0..t).map(|j| j > i).collect()).collect() };
    vec![
        // Encoder self-attention: padding masks per batch entry.
        Case {
            batch: 2,
            queries: 5,
            keys: 5,
            heads: 2,
            dk: 8,
            dv: 8,
            mask: Some(vec![vec![false; 5], vec![false, false, false, true, true]]),
            mask_dims: [2, 1, 1, 5],
        },
        // Decoder self-attention: causal, more keys than a workgroup's 64 threads.
        Case {
            batch: 1,
            queries: 70,
            keys: 70,
            heads: 3,
            dk: 4,
            dv: 4,
            mask: Some(causal(70)),
            mask_dims: [1, 1, 70, 70],
        },
        // Cross-attention without a mask; d_v ≠ d_k.
        Case {
            batch: 2,
            queries: 3,
            keys: 6,
            heads: 2,
            dk: 8,
            dv: 12,
            mask: None,
            mask_dims: [1, 1, 1, 6],
        },
        // A query whose keys are all blocked (uniform weights, no score gradient).
        Case {
            batch: 1,
            queries: 2,
            keys: 3,
            heads: 1,
            dk: 4,
            dv: 4,
            mask: Some(vec![vec![true, true, true], vec![false, true, false]]),
            mask_dims: [1, 1, 2, 3],
        },
    ]
}

/// The fused forward and backward give the primitives' context, weights and
/// gradients for q, k and v to rounding: padding, causal and no masks, d_v ≠ d_k, rows
/// longer than a workgroup, a fully blocked row.
#[test]
fn fused_attention_is_the_primitives_forward_and_backward() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("fused_attention_is_the_primitives_forward_and_backward") else {
        return;
    };
    let device = device.autodiff();
    for (n, case) in cases().iter().enumerate() {
        let fused = run(case, How::Fused, FloatDType::F32, &device);
        let burn = run(case, How::Primitives, FloatDType::F32, &device);
        let what = |name: &str| format!("case {n} {name}");
        assert_close(&what("context"), &fused.context, &burn.context);
        assert_close(&what("weights"), &fused.weights, &burn.weights);
        assert_close(&what("dq"), &fused.dq, &burn.dq);
        assert_close(&what("dk"), &fused.dk, &burn.dk);
        assert_close(&what("dv"), &fused.dv, &burn.dv);
    }
}

/// What an attention's forward and backward launch, fused and as primitives.
#[test]
fn fused_attention_launches_a_few_kernels() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("fused_attention_launches_a_few_kernels") else {
        return;
    };
    let device = device.autodiff();
    let case = &cases()[0];
    let launches = |fused: bool| {
        let how = if fused { How::Fused } else { How::Primitives };
        run(case, how, FloatDType::F32, &device); // compiled and tuned: not counted
        count_launches(|| {
            run(case, how, FloatDType::F32, &device);
        })
        .1
    };
    let (fused, burn) = (launches(true), launches(false));
    println!("attention forward + backward (+ the test's own): fused {fused}, burn's {burn}");
    assert!(fused + 10 <= burn, "fused {fused}, burn's {burn}");
}

/// In half precision the fused kernels read and write f16 or bf16 and compute in f32: the
/// context and the gradients are the f32 primitives' (inputs the type holds exactly) to
/// the type's rounding (`tolerance` × the largest), the weights (f32 either way) to f32's;
/// and they are the f32 kernels between casts, bit for bit.
fn half_precision_is_the_f32_primitives(test: &str, name: &str, dtype: FloatDType, tolerance: f32) {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device(test) else {
        return;
    };
    if !device.supports_dtype(dtype) {
        transduce_testing::skip(format_args!("{test}: the adapter has no {name}"));
        return;
    }
    let device = device.autodiff();
    for (n, case) in cases().iter().enumerate() {
        let half = run(case, How::Fused, dtype, &device);
        let burn = run(case, How::Primitives, FloatDType::F32, &device);
        // Reading and writing the half type is the f32 kernels between casts, bit for
        // bit: the same f32 values inside, the same roundings at the edges.
        let around = run(case, How::FusedInF32, dtype, &device);
        for (part, a, b) in [
            ("context", &half.context, &around.context),
            ("weights", &half.weights, &around.weights),
            ("dq", &half.dq, &around.dq),
            ("dk", &half.dk, &around.dk),
            ("dv", &half.dv, &around.dv),
        ] {
            assert_eq!(
                a, b,
                "{name} case {n} {part}: kernels against f32 between casts"
            );
        }
        let what = |part: &str| format!("{name} case {n} {part}");
        let half_close = |what: &str, got: &[f32], want: &[f32]| {
            crate::testing::assert_close(what, got, want, tolerance)
        };
        half_close(&what("context"), &half.context, &burn.context);
        assert_close(&what("weights"), &half.weights, &burn.weights);
        half_close(&what("dq"), &half.dq, &burn.dq);
        half_close(&what("dk"), &half.dk, &burn.dk);
        half_close(&what("dv"), &half.dv, &burn.dv);
    }
}

#[test]
fn fused_attention_in_f16_is_the_f32_primitives_to_f16_rounding() {
    half_precision_is_the_f32_primitives(
        "fused_attention_in_f16_is_the_f32_primitives_to_f16_rounding",
        "f16",
        FloatDType::F16,
        2e-3,
    );
}

/// bf16 keeps 8 significant bits to f16's 11: eight times the tolerance.
#[test]
fn fused_attention_in_bf16_is_the_f32_primitives_to_bf16_rounding() {
    half_precision_is_the_f32_primitives(
        "fused_attention_in_bf16_is_the_f32_primitives_to_bf16_rounding",
        "bf16",
        FloatDType::BF16,
        1.6e-2,
    );
}
