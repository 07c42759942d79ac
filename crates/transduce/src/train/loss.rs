//! Label-smoothed cross-entropy (§5.4, ε_ls = 0.1 in the paper).

use std::mem::MaybeUninit;

use crate::host::rows::exp;
use crate::tokenizer::PAD;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{FloatDType, IndexingUpdateOp};

/// Sums over the non-PAD target positions of a batch.
pub struct LossSums {
    /// Σ cross-entropy against the smoothed distribution: what is minimized. Its
    /// gradient reaches the logits when they are tracked.
    pub smoothed: Tensor<1>,
    /// Σ −log p(target): for perplexity (a value only, no gradient).
    pub nll: Tensor<1>,
}

/// Cross-entropy of `logits` `[b, t, v]` against `targets` `[b, t]` with the target
/// distribution q(y) = 1 − ε and q(k) = ε / (v − 1) for every other k, so that
/// `loss = −(1 − ε − ε/(v−1)) · log p(y) − ε/(v−1) · Σ_k log p(k)`. PAD targets count zero.
///
/// Computed fused, as PyTorch's `cross_entropy` is: one softmax over the vocabulary gives
/// both the value and the gradient `∂loss/∂logits = p − q`, so no log-softmax graph over
/// the `[b·t, v]` logits is recorded and differentiated op by op (that graph, for an
/// 8,000-word vocabulary, costs more passes over memory than the softmax itself). The
/// gradient enters autodiff through `Σ (p − q) · logits` with `p − q` a constant, whose
/// gradient is exactly `p − q`; its value is swapped for the loss's own.
///
/// On the CPU backend the softmax, the sums and `p − q` are one pass per row over the
/// logits in host memory (a vectorizable exp, all cores); on wgpu and CUDA one kernel per
/// row where `fused` allows it (the model's [`crate::Transformer::fused`]: see
/// [`crate::ops::fused`]); elsewhere the same formulas as tensor operations on the device.
pub fn label_smoothed(
    logits: Tensor<3>,
    targets: Tensor<2, Int>,
    epsilon: f64,
    fused: bool,
) -> LossSums {
    let tracked = logits.is_require_grad() || logits.is_tracked();
    let device = logits.device();
    let fused = crate::ops::fused(fused, &device);
    // The softmax over the vocabulary and the sums need f32. The fused kernel reads
    // half-precision logits (mixed-precision training) as they are and computes in f32;
    // elsewhere they are cast up first. Either way the gradient, f32, flows back through a
    // cast, so that under a loss scale it is scaled before it is rounded.
    let logits = if fused {
        logits
    } else {
        logits.cast(FloatDType::F32)
    };
    let [b, t, v] = logits.dims();
    let n = b * t;
    let logits = logits.reshape([n, v]);
    let targets = targets.reshape([n, 1]).without_autodiff();
    let host = crate::ops::is_flex(&device)
        .then(|| on_host(&logits, &targets, epsilon, tracked))
        .flatten();
    let (smoothed, nll, grad) = match host {
        Some((smoothed, nll, grad)) => {
            let value = |x: f64| Tensor::<1>::from_floats([x as f32], &device);
            let grad = grad.map(|g| Tensor::<2>::from_data(TensorData::new(g, [n, v]), &device));
            (value(smoothed), value(nll), grad)
        }
        #[cfg(not(target_arch = "wasm32"))]
        None if fused => on_device_fused(&logits, &targets, epsilon, tracked),
        None => on_device(&logits, &targets, epsilon, tracked),
    };
    match grad {
        None => LossSums { smoothed, nll },
        Some(grad) => {
            let surrogate = (logits.cast(FloatDType::F32) * grad).sum();
            let smoothed = surrogate.clone() - surrogate.detach() + smoothed;
            LossSums { smoothed, nll }
        }
    }
}

/// log p(target) of each row of a batch: Σ over the row's non-PAD positions of the
/// log-softmax of `logits` `[b, t, v]` at `targets` `[b, t]`. No smoothing, no gradient.
pub fn row_log_probs(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<1> {
    let logits = logits.cast(FloatDType::F32).without_autodiff();
    let [b, t, _] = logits.dims();
    let targets = targets.without_autodiff();
    let keep = targets.clone().not_equal_elem(PAD as i64).float();
    let picked = log_softmax(logits, 2)
        .gather(2, targets.unsqueeze_dim::<3>(2))
        .reshape([b, t]);
    (picked * keep).sum_dim(1).reshape([b])
}

/// [`on_device`] as one kernel ([`transduce_kernels::loss`]): a workgroup per row.
#[cfg(not(target_arch = "wasm32"))]
fn on_device_fused(
    logits: &Tensor<2>,
    targets: &Tensor<2, Int>,
    epsilon: f64,
    tracked: bool,
) -> (Tensor<1>, Tensor<1>, Option<Tensor<2>>) {
    transduce_kernels::loss::smoothed_cross_entropy(logits, targets, epsilon, tracked, PAD)
}

/// The loss sums and, when `tracked`, `(p − q)` (zero on PAD rows) as tensor operations.
fn on_device(
    logits: &Tensor<2>,
    targets: &Tensor<2, Int>,
    epsilon: f64,
    tracked: bool,
) -> (Tensor<1>, Tensor<1>, Option<Tensor<2>>) {
    let [n, v] = logits.dims();
    let z = logits.clone().without_autodiff();
    let keep = targets.clone().not_equal_elem(PAD as i64).float();
    let p = softmax(z.clone(), 1);
    // log Σ_k e^{z_k} = max z − log max p: max p ≥ 1/v never underflows, so −log p(y)
    // stays finite however confident the model is.
    let log_norm = z.clone().max_dim(1) - p.clone().max_dim(1).log();
    let nll = (log_norm.clone() - z.clone().gather(1, targets.clone())) * keep.clone();
    let spread = epsilon / (v as f64 - 1.0);
    // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
    let uniform = (log_norm.mul_scalar(v as f64) - z.sum_dim(1)) * keep.clone();
    let smoothed = nll.clone().mul_scalar(1.0 - epsilon - spread) + uniform.mul_scalar(spread);
    let grad = tracked.then(|| {
        // p − q on the kept rows: q = spread everywhere plus 1 − ε − spread at the target.
        let at_target = Tensor::<2>::full([n, 1], -(1.0 - epsilon - spread), &p.device());
        p.sub_scalar(spread)
            .scatter(1, targets.clone(), at_target, IndexingUpdateOp::Add)
            * keep
    });
    (smoothed.sum(), nll.sum(), grad)
}

/// The loss sums and, when `tracked`, `p − q` computed in host memory; `None` when the
/// logits are not f32.
fn on_host(
    logits: &Tensor<2>,
    targets: &Tensor<2, Int>,
    epsilon: f64,
    tracked: bool,
) -> Option<(f64, f64, Option<Vec<f32>>)> {
    let [n, v] = logits.dims();
    let z = logits.clone().without_autodiff().into_data();
    let z = z.as_slice::<f32>().ok()?;
    let targets = targets.clone().into_data().try_into_vec_as::<i64>().ok()?;
    let spread = epsilon / (v as f64 - 1.0);
    let rows = Rows {
        v,
        spread: spread as f32,
        on_target: 1.0 - epsilon - spread,
    };
    let mut per_row = vec![(0.0, 0.0); n];
    let mut grad: Vec<f32> = Vec::with_capacity(if tracked { n * v } else { 0 });
    let threads = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .min(n.max(1));
    let chunk = n.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let mut grad_chunks = grad.spare_capacity_mut().chunks_mut(chunk * v);
        if threads == 1 {
            // One core (the browser's worker has no threads to spawn): in this thread.
            rows.run(z, &targets, &mut per_row, grad_chunks.next());
            return;
        }
        for (i, out) in per_row.chunks_mut(chunk).enumerate() {
            let (z, targets) = (&z[i * chunk * v..], &targets[i * chunk..]);
            let grad = grad_chunks.next();
            let rows = &rows;
            scope.spawn(move || rows.run(z, targets, out, grad));
        }
    });
    if tracked {
        // SAFETY: the threads above wrote every one of the n · v elements (`Rows::run`
        // writes each row of its chunk, PAD rows included).
        unsafe { grad.set_len(n * v) };
    }
    // Summed in row order, so the result does not depend on the number of threads.
    let (smoothed, nll) = per_row
        .iter()
        .fold((0.0, 0.0), |(s, l), (rs, rl)| (s + rs, l + rl));
    Some((smoothed, nll, tracked.then_some(grad)))
}

/// The per-row work of [`on_host`].
struct Rows {
    v: usize,
    /// q(k) for k ≠ y: ε / (v − 1).
    spread: f32,
    /// q(y) − q(k): 1 − ε − ε / (v − 1).
    on_target: f64,
}

impl Rows {
    /// (smoothed, nll) of each row of `out.len()` rows into `out`; p − q into `grad`.
    fn run(
        &self,
        z: &[f32],
        targets: &[i64],
        out: &mut [(f64, f64)],
        mut grad: Option<&mut [MaybeUninit<f32>]>,
    ) {
        let v = self.v;
        for (r, out) in out.iter_mut().enumerate() {
            let row = &z[r * v..(r + 1) * v];
            let g = grad.as_deref_mut().map(|g| &mut g[r * v..(r + 1) * v]);
            let y = targets[r];
            if y == PAD as i64 {
                *out = (0.0, 0.0);
                if let Some(g) = g {
                    g.iter_mut().for_each(|x| {
                        x.write(0.0);
                    });
                }
                continue;
            }
            let (max, total) = max_and_sum(row);
            let sum_exp = sum_exp(row, max);
            // log Σ e^z = max + log Σ e^(z − max), the latter ≥ log 1: never underflows.
            let log_norm = max as f64 + (sum_exp as f64).ln();
            let nll = log_norm - row[y as usize] as f64;
            // −Σ_k log p(k) = v · log Σ e^z − Σ_k z_k
            let uniform = v as f64 * log_norm - total;
            let spread = self.spread as f64;
            *out = (self.on_target * nll + spread * uniform, nll);
            if let Some(g) = g {
                let scale = 1.0 / sum_exp;
                for (g, &x) in g.iter_mut().zip(row) {
                    g.write(exp(x - max) * scale - self.spread);
                }
                let at = &mut g[y as usize];
                // SAFETY: written by the loop above.
                let p_y = unsafe { at.assume_init() };
                at.write((p_y as f64 - self.on_target) as f32);
            }
        }
    }
}

/// Lanes for the reductions: independent accumulators the compiler can keep in one
/// vector register.
const LANES: usize = 16;

/// max z and Σ z (lanes in f32, their total in f64: it enters `v · log Σ e^z − Σ z`).
fn max_and_sum(row: &[f32]) -> (f32, f64) {
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut sum = [0.0f32; LANES];
    let (chunks, rest) = row.as_chunks::<LANES>();
    for c in chunks {
        for i in 0..LANES {
            max[i] = max[i].max(c[i]);
            sum[i] += c[i];
        }
    }
    let mut m = max.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let mut s: f64 = sum.iter().map(|&x| x as f64).sum();
    for &x in rest {
        m = m.max(x);
        s += x as f64;
    }
    (m, s)
}

/// Σ e^(z − max).
fn sum_exp(row: &[f32], max: f32) -> f32 {
    let mut sum = [0.0f32; LANES];
    let (chunks, rest) = row.as_chunks::<LANES>();
    for c in chunks {
        for i in 0..LANES {
            sum[i] += exp(c[i] - max);
        }
    }
    sum.iter().sum::<f32>() + rest.iter().map(|&x| exp(x - max)).sum::<f32>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::activation::log_softmax;

    fn scalar(t: Tensor<1>) -> f64 {
        t.into_data().try_into_vec_as::<f64>().unwrap()[0]
    }

    /// The three implementations, each a device and whether fused kernels are allowed: in
    /// host memory (the CPU backend), and on a cubecl device (wgpu, where there is an
    /// adapter) as tensor operations (fused kernels off) and as one kernel.
    fn paths() -> Vec<(Device, bool)> {
        let mut paths = vec![(Device::flex(), true)];
        if let Some(gpu) = transduce_kernels::testing::wgpu_device("loss on wgpu") {
            paths.extend([(gpu.clone(), false), (gpu, true)]);
        }
        paths
    }

    #[test]
    fn hand_computed_value() {
        // p = softmax(logits) = [0.25, 0.5, 0.25]; target 1; ε = 0.1 → q = [0.05, 0.9, 0.05]
        // CE = −(0.9·ln 0.5 + 0.05·ln 0.25 + 0.05·ln 0.25) = 0.9·0.693147 + 0.1·1.386294
        //    = 0.762462; NLL = ln 2 = 0.693147. A PAD target (id 0) in position 2 adds nothing.
        for (device, fused) in paths() {
            let logits = Tensor::<1>::from_floats(
                [0.25f32.ln(), 0.5f32.ln(), 0.25f32.ln(), 3.0, 1.0, -2.0],
                &device,
            )
            .reshape([1, 2, 3]);
            let targets = Tensor::<2, Int>::from_data([[1i32, PAD as i32]], &device);
            let sums = label_smoothed(logits.clone(), targets.clone(), 0.1, fused);
            assert!(
                (scalar(sums.smoothed) - 0.762_462).abs() < 1e-5,
                "{device:?} fused {fused}"
            );
            assert!((scalar(sums.nll) - std::f64::consts::LN_2).abs() < 1e-5);
            let plain = label_smoothed(logits, targets, 0.0, fused);
            assert!((scalar(plain.smoothed) - std::f64::consts::LN_2).abs() < 1e-5);
        }
    }

    /// The loss written op by op from its definition, differentiated by autodiff.
    fn reference(logits: Tensor<3>, targets: Tensor<2, Int>, epsilon: f64) -> Tensor<1> {
        let [b, t, v] = logits.dims();
        let n = b * t;
        let log_p = log_softmax(logits.reshape([n, v]), 1);
        let targets = targets.reshape([n, 1]);
        let keep = targets.clone().not_equal_elem(PAD as i64).float();
        let spread = epsilon / (v as f64 - 1.0);
        let q = Tensor::<2>::full([n, v], spread, &log_p.device()).scatter(
            1,
            targets,
            Tensor::full([n, 1], 1.0 - epsilon - spread, &log_p.device()),
            IndexingUpdateOp::Add,
        );
        (log_p * q * keep).sum().neg()
    }

    /// The fused loss has the value and the gradient of the definition, PAD rows included,
    /// on every implementation; the vocabularies (37, 1,001) are not multiples of the host
    /// path's lanes nor of the GPU kernel's 256 threads.
    #[test]
    fn gradient_matches_the_definition() {
        for v in [37, 1001] {
            gradient_matches_the_definition_at(v);
        }
    }

    fn gradient_matches_the_definition_at(v: usize) {
        let (b, t) = (2, 3);
        let values: Vec<f32> = (0..b * t * v)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.4)
            .collect();
        for (device, fused) in paths().into_iter().map(|(d, f)| (d.autodiff(), f)) {
            let targets = Tensor::<2, Int>::from_data([[3i32, 1, PAD as i32], [36, 2, 5]], &device);
            for epsilon in [0.0, 0.1] {
                let leaf = || {
                    Tensor::<1>::from_floats(values.as_slice(), &device)
                        .reshape([b, t, v])
                        .require_grad()
                };
                let (x, y) = (leaf(), leaf());
                let loss = label_smoothed(x.clone(), targets.clone(), epsilon, fused).smoothed;
                let expected = reference(y.clone(), targets.clone(), epsilon);
                let (value, expected_value) = (scalar(loss.clone()), scalar(expected.clone()));
                assert!(
                    (value - expected_value).abs() < 1e-5 * expected_value.abs(),
                    "{device:?} fused {fused} v {v} ε {epsilon}: {value} vs {expected_value}"
                );
                let gx = x.grad(&loss.backward()).unwrap().into_data();
                let gy = y.grad(&expected.backward()).unwrap().into_data();
                let (gx, gy) = (
                    gx.try_to_vec::<f32>().unwrap(),
                    gy.try_to_vec::<f32>().unwrap(),
                );
                for (i, (a, e)) in gx.iter().zip(&gy).enumerate() {
                    assert!(
                        (a - e).abs() < 1e-6,
                        "{device:?} fused {fused} v {v} ε {epsilon}, {i}: {a} vs {e}"
                    );
                }
                // The PAD position gets no gradient at all.
                assert!(gx[2 * v..3 * v].iter().all(|&g| g == 0.0));
            }
        }
    }

    /// Half-precision logits go into the kernel as they are (computed in f32 there): the
    /// sums and the gradient (scaled by 1024 as a loss scale would, before it is rounded to
    /// f16) are those of the same logits cast to f32 first, bit for bit.
    #[test]
    fn half_logits_are_read_as_they_are() {
        let Some(gpu) = transduce_kernels::testing::wgpu_device("half logits") else {
            return;
        };
        if !gpu.supports_dtype(FloatDType::F16) {
            transduce_testing::skip(format_args!("half_logits_are_read_as_they_are: no f16"));
            return;
        }
        let _serial = transduce_kernels::testing::gpu_lock();
        let device = gpu.autodiff();
        let (b, t, v) = (2, 3, 300);
        // Multiples of 1/8 in [−8, 8): f16 holds them exactly.
        let values: Vec<f32> = (0..b * t * v)
            .map(|i| ((i * 37 % 128) as f32 - 64.0) / 8.0)
            .collect();
        let targets = Tensor::<2, Int>::from_data([[3i32, 1, PAD as i32], [299, 2, 5]], &device);
        let run = |cast_first: bool| {
            let x = Tensor::<1>::from_floats(values.as_slice(), &device)
                .reshape([b, t, v])
                .require_grad();
            let half = x.clone().cast(FloatDType::F16);
            let logits = if cast_first {
                half.cast(FloatDType::F32)
            } else {
                half
            };
            let sums = label_smoothed(logits, targets.clone(), 0.1, true);
            let values = [sums.smoothed.clone(), sums.nll].map(scalar);
            let grads = sums.smoothed.mul_scalar(1024.0).backward();
            let grad = x.grad(&grads).unwrap().into_data();
            (values, grad.try_to_vec::<f32>().unwrap())
        };
        let (direct, cast) = (run(false), run(true));
        assert_eq!(direct.0, cast.0, "sums");
        assert_eq!(direct.1, cast.1, "gradient");
        assert!(direct.1.iter().any(|&g| g != 0.0), "a gradient flows");
    }

    /// A confident wrong prediction (p(target) ≈ e^-200) has a finite loss of ≈ 200.
    #[test]
    fn confident_mistakes_stay_finite() {
        for (device, fused) in paths() {
            let logits = Tensor::<1>::from_floats([200.0, 0.0, 0.0], &device).reshape([1, 1, 3]);
            let targets = Tensor::<2, Int>::from_data([[2i32]], &device);
            let nll = scalar(label_smoothed(logits, targets, 0.1, fused).nll);
            assert!(
                (nll - 200.0).abs() < 1e-3,
                "{device:?} fused {fused}: {nll}"
            );
        }
    }
}
