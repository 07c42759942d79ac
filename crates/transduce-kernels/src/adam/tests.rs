//! Adam's group kernels against their oracle ([`super::reference`], burn's tensor
//! operations): the update, the finite check and the accumulation, as each training
//! precision uses them.
//!
//! Parameters, moments and gradients are f32 in every precision (mixed precision keeps f32
//! weights and Adam state), so the kernels read and write f32 only. What a precision changes
//! is what reaches them: f32 steps pass three scalars; f16 steps scale the loss (here by
//! 1024), so their gradients arrive scaled, rounded through f16 by the backward's cast, and
//! the update unscales them (five scalars, the last `ok`); bf16 steps keep a scale of 1 but
//! still pass `ok`, and their gradients are rounded through bf16.

use burn::backend::Dispatch;
use burn::tensor::{Device, FloatDType, Tensor};

use super::{AdamKernel, GROUP, reference};
use crate::testing::{assert_close, gpu_lock, wgpu_device};

/// A training precision as Adam sees it: the type its gradients are rounded through and
/// its loss scale (`None`: three scalars, no `ok`).
#[derive(Clone, Copy, Debug)]
struct Precision {
    name: &'static str,
    dtype: FloatDType,
    scale: Option<f32>,
}

const PRECISIONS: [Precision; 3] = [
    Precision {
        name: "f32",
        dtype: FloatDType::F32,
        scale: None,
    },
    Precision {
        name: "f16",
        dtype: FloatDType::F16,
        scale: Some(1024.0),
    },
    Precision {
        name: "bf16",
        dtype: FloatDType::BF16,
        scale: Some(1.0),
    },
];

/// The precisions the device can round through, each skipped one said.
fn precisions(device: &Device, test: &str) -> Vec<Precision> {
    PRECISIONS
        .into_iter()
        .filter(|p| {
            let ok = device.supports_dtype(p.dtype);
            if !ok {
                transduce_testing::skip_part(format_args!(
                    "{test} in {}: the adapter has no {}",
                    p.name, p.name
                ));
            }
            ok
        })
        .collect()
}

/// Lengths of a group's parameters: uneven, one longer than a workgroup, one of a single
/// element.
const LENGTHS: [usize; GROUP] = [37, 1027, 1, 300];

/// The inputs: [`crate::testing::values`] in [−1, 1], period 1009.
fn values(n: usize, shift: usize) -> Vec<f32> {
    crate::testing::values(n, shift, 1009, 1.0)
}

fn tensor(values: &[f32], device: &Device) -> Tensor<1> {
    Tensor::<1>::from_floats(values, device)
}

fn floats(t: Tensor<1>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

/// Slot `k`'s gradient as a step in `precision` hands it to Adam: scaled by the loss
/// scale and rounded through the precision's type.
fn gradient(k: usize, precision: Precision, device: &Device) -> Tensor<1> {
    let g = tensor(&values(LENGTHS[k], 10 + k), device).mul_scalar(0.1);
    g.mul_scalar(precision.scale.unwrap_or(1.0))
        .cast(precision.dtype)
        .cast(FloatDType::F32)
}

/// `[lr, combined bias correction, scaled ε]` of Adam's third update (the trainer's
/// `corrections_at`), then under a loss scale `[1/scale, ok]`.
fn scalars(precision: Precision, ok: bool, device: &Device) -> Tensor<1> {
    let t = 3;
    let correction2 = (1.0 - super::BETA_2.powi(t)).sqrt();
    let combined = correction2 / (1.0 - super::BETA_1.powi(t));
    let mut s = vec![1e-3, combined as f32, (super::EPSILON * correction2) as f32];
    if let Some(scale) = precision.scale {
        s.extend([1.0 / scale, ok as u8 as f32]);
    }
    tensor(&s, device)
}

/// One group's `(param, grad, first, second)` per slot.
fn group(precision: Precision, device: &Device) -> Vec<[Tensor<1>; 4]> {
    (0..GROUP)
        .map(|k| {
            let n = LENGTHS[k];
            let v = values(n, 20 + k);
            let second: Vec<f32> = v.iter().map(|x| x * x * 1e-3).collect();
            [
                tensor(&values(n, k), device),
                gradient(k, precision, device),
                tensor(&v, device).mul_scalar(0.01),
                tensor(&second, device),
            ]
        })
        .collect()
}

/// The kernel's update of the first `count` slots of `slots`: each slot's new parameter,
/// first and second moment.
fn kernel_update(
    slots: &[[Tensor<1>; 4]],
    scalars: &Tensor<1>,
    count: usize,
) -> Vec<[Vec<f32>; 3]> {
    let a: Vec<_> = slots
        .iter()
        .flat_map(|s| s.iter().map(|t| t.clone().into_dispatch()))
        .collect();
    let mut a = a.into_iter();
    let mut n = || a.next().unwrap();
    let out = <Dispatch as AdamKernel>::adam_group_in_place(
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        n(),
        scalars.clone().into_dispatch(),
        count,
    );
    [out.0, out.1, out.2, out.3]
        .into_iter()
        .map(|(p, m, v)| [p, m, v].map(|t| floats(Tensor::from_dispatch(t))))
        .collect()
}

/// The group update gives the oracle's parameters and moments in each precision's form (to
/// f32 rounding: the same formulas in the same order), uses its scalars, leaves the slots
/// past `count` as they were, and on a step that is not `ok` writes nothing at all.
#[test]
fn adam_group_is_the_oracle_in_every_precision() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("adam_group_is_the_oracle_in_every_precision") else {
        return;
    };
    for precision in precisions(&device, "adam_group_is_the_oracle_in_every_precision") {
        for count in [GROUP, GROUP - 1] {
            let slots = group(precision, &device);
            let scalars = scalars(precision, true, &device);
            let got = kernel_update(&slots, &scalars, count);
            for (k, [p, g, m, v]) in slots.iter().enumerate() {
                let what = |name: &str| format!("{} count {count} slot {k} {name}", precision.name);
                let before = [p, m, v].map(|t| floats(t.clone()));
                if k >= count {
                    assert_eq!(got[k], before, "{}", what("past count: untouched"));
                    continue;
                }
                let (p2, m2, v2) =
                    reference::update(p.clone(), g.clone(), m.clone(), v.clone(), &scalars);
                assert_close(&what("param"), &got[k][0], &floats(p2), 1e-6);
                assert_close(&what("first"), &got[k][1], &floats(m2), 1e-6);
                assert_close(&what("second"), &got[k][2], &floats(v2), 1e-6);
                assert_ne!(got[k][0], before[0], "{}", what("param moved"));
            }
        }
        // A skipped step (`ok` 0) writes nothing, in the kernel and in the oracle.
        if precision.scale.is_some() {
            let slots = group(precision, &device);
            let scalars = scalars(precision, false, &device);
            let got = kernel_update(&slots, &scalars, GROUP);
            for (k, [p, g, m, v]) in slots.iter().enumerate() {
                let before = [p, m, v].map(|t| floats(t.clone()));
                assert_eq!(got[k], before, "{} skipped slot {k}", precision.name);
                let (p2, m2, v2) =
                    reference::update(p.clone(), g.clone(), m.clone(), v.clone(), &scalars);
                assert_eq!([p2, m2, v2].map(floats), before, "oracle skipped slot {k}");
            }
        }
    }
}

/// The finite check agrees with the oracle: 1 when every gradient of the used slots is
/// finite, 0 for an inf (what an f16 overflow becomes), a NaN, or an f16 overflow itself;
/// a slot past `count` is not read.
#[test]
fn finite_check_is_the_oracle() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("finite_check_is_the_oracle") else {
        return;
    };
    let half = device.supports_dtype(FloatDType::F16);
    if !half {
        transduce_testing::skip_part(format_args!(
            "finite_check_is_the_oracle, its f16 overflow case: no f16"
        ));
    }
    // (case, slot spoiled, its value, count, ok)
    let mut cases = vec![
        ("finite", None, 0.0, GROUP, true),
        ("inf", Some(2), f32::INFINITY, GROUP, false),
        ("nan", Some(0), f32::NAN, GROUP, false),
        ("past count", Some(3), f32::INFINITY, GROUP - 1, true),
    ];
    if half {
        cases.push(("f16 overflow", Some(1), 1.0e5, GROUP, false));
    }
    let precision = PRECISIONS[0];
    for (case, slot, value, count, ok) in cases {
        let grads: Vec<Tensor<1>> = (0..GROUP)
            .map(|k| {
                let g = gradient(k, precision, &device);
                if slot != Some(k) {
                    return g;
                }
                let n = LENGTHS[k];
                let mut spoiled = tensor(&[value], &device);
                if case == "f16 overflow" {
                    spoiled = spoiled.cast(FloatDType::F16).cast(FloatDType::F32);
                }
                g.slice_assign(n - 1..n, spoiled)
            })
            .collect();
        let mut g = grads.iter().map(|g| g.clone().into_dispatch());
        let mut n = || g.next().unwrap();
        let flag = <Dispatch as AdamKernel>::finite_group(
            n(),
            n(),
            n(),
            n(),
            Tensor::<1>::ones([1], &device).into_dispatch(),
            count,
        );
        let got = floats(Tensor::from_dispatch(flag));
        let want = floats(reference::all_finite(&grads[..count]));
        assert_eq!(got, want, "{case}: kernel against the oracle");
        assert_eq!(got, vec![ok as u8 as f32], "{case}");
    }
}

/// The accumulation of `--accum`: the first batch's gradients taken as they are (whatever
/// the accumulators held), later ones added, exactly the oracle's sums (one f32 addition
/// each), in each precision's form; a slot past `count` untouched.
#[test]
fn accumulation_is_the_oracle_in_every_precision() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("accumulation_is_the_oracle_in_every_precision") else {
        return;
    };
    for precision in precisions(&device, "accumulation_is_the_oracle_in_every_precision") {
        let count = GROUP - 1;
        // Stale sums of an earlier step: the first batch must overwrite them.
        let mut sums: Vec<Tensor<1>> = (0..GROUP)
            .map(|k| tensor(&values(LENGTHS[k], 30 + k), &device))
            .collect();
        let mut want = sums.clone();
        for batch in 0..3 {
            let first = batch == 0;
            let grads: Vec<Tensor<1>> = (0..GROUP)
                .map(|k| gradient(k, precision, &device).mul_scalar(1.0 + batch as f64))
                .collect();
            let flags = tensor(&[100.0, first as u8 as f32, batch as f32], &device);
            let mut args = sums
                .iter()
                .zip(&grads)
                .flat_map(|(a, g)| [a.clone().into_dispatch(), g.clone().into_dispatch()]);
            let mut n = || args.next().unwrap();
            let out = <Dispatch as AdamKernel>::accumulate_group(
                n(),
                n(),
                n(),
                n(),
                n(),
                n(),
                n(),
                n(),
                flags.into_dispatch(),
                count,
            );
            sums = [out.0, out.1, out.2, out.3]
                .into_iter()
                .map(Tensor::from_dispatch)
                .collect();
            for (want, grad) in want.iter_mut().zip(&grads).take(count) {
                *want = reference::accumulate(want.clone(), grad.clone(), first);
            }
            for (k, (got, want)) in sums.iter().zip(&want).enumerate() {
                assert_eq!(
                    floats(got.clone()),
                    floats(want.clone()),
                    "{} batch {batch} slot {k}",
                    precision.name
                );
            }
        }
    }
}
