//! The loss kernel against its oracle ([`super::reference`]) in f32, f16 and bf16: the
//! sums and the gradient `p − q`.

use burn::tensor::{Device, FloatDType, Int, Tensor, TensorData};

use super::{reference, smoothed_cross_entropy};
use crate::testing::{assert_close, gpu_lock, wgpu_device};

/// The padding id of the tests' targets.
const PAD: u32 = 0;

fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    let n = t.shape().num_elements();
    t.reshape([n])
        .into_data()
        .convert::<f32>()
        .try_to_vec::<f32>()
        .unwrap()
}

/// `[sums: smoothed, nll; then p − q]` of the kernel (`fused`) or the oracle on `[rows, v]`
/// logits in `dtype`.
fn run(fused: bool, v: usize, dtype: FloatDType, epsilon: f64, device: &Device) -> Vec<Vec<f32>> {
    let rows = 6;
    // Multiples of 1/8 in [−8, 8): f16 and bf16 hold them exactly, so every type's kernel
    // reads the f32 run's values.
    let values: Vec<f32> = (0..rows * v)
        .map(|i| ((i * 37 % 128) as f32 - 64.0) / 8.0)
        .collect();
    let logits = Tensor::<1>::from_floats(values.as_slice(), device)
        .reshape([rows, v])
        .cast(dtype);
    // Row 2 is padding; the others' targets reach both ends of the vocabulary.
    let ids = [3, 1, PAD as i32, v as i32 - 1, 2, 5];
    let targets = Tensor::<2, Int>::from_data(TensorData::new(ids.to_vec(), [rows, 1]), device);
    let (smoothed, nll, grad) = match fused {
        true => smoothed_cross_entropy(&logits, &targets, epsilon, true, PAD),
        false => reference::smoothed_cross_entropy(&logits, &targets, epsilon, true, PAD),
    };
    vec![
        floats(Tensor::cat(vec![smoothed, nll], 0)),
        floats(grad.expect("tracked")),
    ]
}

/// In every type the device has, the kernel's sums are the oracle's to 10⁻⁵ and its
/// `p − q` to 10⁻⁶ of the largest, with and without smoothing, vocabularies that are not
/// multiples of the kernel's 256 threads; half-precision logits (values the type holds
/// exactly) give the f32 kernel's results bit for bit, since the kernel computes in f32.
#[test]
fn loss_kernel_is_the_oracle_in_every_type() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("loss_kernel_is_the_oracle_in_every_type") else {
        return;
    };
    for v in [37, 1001] {
        for epsilon in [0.0, 0.1] {
            let f32_run = run(true, v, FloatDType::F32, epsilon, &device);
            for (name, dtype) in [
                ("f32", FloatDType::F32),
                ("f16", FloatDType::F16),
                ("bf16", FloatDType::BF16),
            ] {
                if !device.supports_dtype(dtype) {
                    transduce_testing::skip_part(format_args!(
                        "the loss kernel in {name}: the adapter has no {name}"
                    ));
                    continue;
                }
                let what = |part: &str| format!("{name} v {v} ε {epsilon} {part}");
                let fused = run(true, v, dtype, epsilon, &device);
                let oracle = run(false, v, dtype, epsilon, &device);
                assert_close(&what("sums"), &fused[0], &oracle[0], 1e-5);
                assert_close(&what("p − q"), &fused[1], &oracle[1], 1e-6);
                assert!(
                    fused[1][2 * v..3 * v].iter().all(|&g| g == 0.0),
                    "{}",
                    what("PAD row")
                );
                assert_eq!(fused, f32_run, "{}", what("against the f32 kernel"));
            }
        }
    }
}
