//! `transduce bench kernels`: each family of fused training kernels ([`transduce_kernels`])
//! against its unfused oracle on one representative shape of a preset, time and launches
//! per call (the role of llm.c's `dev/cuda`). The oracle is the path the model takes without
//! the kernels (`--no-fused-layers`): burn's primitives, through the same model functions.
//!
//! A call is what one site of a training step runs:
//! - attention: a decoder self-attention (causal mask) over all heads, forward and backward;
//! - layer norm: one norm over `[rows, length, d_model]`, forward and backward;
//! - loss: the label-smoothed cross-entropy (§5.4) over `[rows, length, vocabulary]` logits
//!   and its gradient;
//! - dropout: a mask over `[rows, length, d_model]` and its product (§5.4);
//! - Adam: one update of every parameter of the preset (§5.3), with the finite check and
//!   the loss scale of half-precision steps.
//!
//! The first three include the seed of their backward (a sum of the output), the same
//! launches either way. Launches are counted over one call after two warm-up calls (compiled
//! and tuned), the device drained before and after, so queued work lands in its own count.

use std::rc::Rc;
use std::time::{Duration, Instant};

use transduce::burn::module::{Module, ModuleVisitor, Param};
use transduce::burn::nn::LayerNormConfig;
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{Distribution, TensorData};
use transduce::dropout::{Dropout, with_device_masks};
use transduce::ops::{self, NORM_EPSILON};
use transduce::train::loss::label_smoothed;
use transduce::{ModelConfig, Precision, Transformer};
use transduce_kernels::attention::reference::attention_heads;
use transduce_kernels::dropout::step_masks;
use transduce_kernels::launches::count_launches;

use transduce_train::error::Result;
use transduce_train::train::engine::adam::DeviceAdam;
use transduce_train::train::engine::loss_scale::LossScale;

/// The shape the families run on: `rows` sequences of `length` positions of `config`.
pub struct Shape {
    pub rows: usize,
    pub length: usize,
    /// Timed calls per row of the table.
    pub calls: usize,
}

/// One row of the table.
pub struct Row {
    pub family: &'static str,
    /// "fused" or "unfused".
    pub variant: &'static str,
    /// The step's precision (Adam's own state is f32 in every one).
    pub precision: Precision,
    /// Mean time of a call, the device drained at the end.
    pub ms: f64,
    pub launches: u64,
}

/// Runs every family, fused and unfused, in each of `precisions` the device has (one line
/// on stderr for each it lacks).
pub fn run(
    config: &ModelConfig,
    device: &Device,
    shape: &Shape,
    precisions: &[Precision],
) -> Result<Vec<Row>> {
    let ad = device.clone().autodiff();
    ad.seed(1);
    let mut rows = Vec::new();
    for &precision in precisions {
        if !device.supports_dtype(precision.dtype()) {
            eprintln!(
                "kernels: {}: the device has no {0}, skipped",
                precision.name()
            );
            continue;
        }
        for fused in [true, false] {
            let variant = if fused { "fused" } else { "unfused" };
            let row = |family, (ms, launches)| Row {
                family,
                variant,
                precision,
                ms,
                launches,
            };
            rows.push(row(
                "attention",
                attention(config, &ad, shape, precision, fused),
            ));
            rows.push(row(
                "layer norm",
                layer_norm(config, &ad, shape, precision, fused),
            ));
            rows.push(row("loss", loss(config, &ad, shape, precision, fused)));
            rows.push(row(
                "dropout",
                dropout(config, &ad, shape, precision, fused),
            ));
            rows.push(row("adam", adam(config, &ad, shape, precision, fused)?));
        }
    }
    Ok(rows)
}

/// The table, one line a row.
pub fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<11} {:<8} {:<6} {:>10} {:>9}\n",
        "family", "variant", "dtype", "ms/call", "launches"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<11} {:<8} {:<6} {:>10.3} {:>9}\n",
            r.family,
            r.variant,
            r.precision.name(),
            r.ms,
            r.launches
        ));
    }
    out
}

/// Times `call` (its outputs kept until the device is drained, so no queued work is
/// dropped unrun): two warm-up calls, one counted, then `calls` timed.
fn measure(device: &Device, calls: usize, mut call: impl FnMut() -> Vec<Tensor<1>>) -> (f64, u64) {
    for _ in 0..2 {
        let kept = call();
        device.sync().ok();
        drop(kept);
    }
    let (_, launches) = count_launches(|| {
        let kept = call();
        device.sync().ok();
        drop(kept);
    });
    let start = Instant::now();
    let kept: Vec<Vec<Tensor<1>>> = (0..calls.max(1)).map(|_| call()).collect();
    device.sync().ok();
    let ms = start.elapsed().as_secs_f64() * 1e3 / calls.max(1) as f64;
    drop(kept);
    (ms, launches)
}

/// A leaf of `dims` in the precision's type, tracked, values in about [−1, 1].
fn leaf<const D: usize>(dims: [usize; D], precision: Precision, device: &Device) -> Tensor<D> {
    Tensor::<D>::random(dims, Distribution::Uniform(-1.0, 1.0), device)
        .cast(precision.dtype())
        .require_grad()
}

fn flat<const D: usize>(t: Tensor<D>) -> Tensor<1> {
    let n = t.shape().num_elements();
    t.reshape([n])
}

fn attention(
    config: &ModelConfig,
    ad: &Device,
    shape: &Shape,
    precision: Precision,
    fused: bool,
) -> (f64, u64) {
    let (b, t, h) = (shape.rows, shape.length, config.n_heads);
    let q = leaf([b, t, h * config.d_k], precision, ad);
    let k = leaf([b, t, h * config.d_k], precision, ad);
    let v = leaf([b, t, h * config.d_v], precision, ad);
    let blocked = transduce::constants::causal_mask(t, ad);
    measure(ad, shape.calls, || {
        let context = if fused {
            ops::fused_attention(&q, &k, &v, Some(&blocked), h, true)
                .expect("the fused attention applies on a cubecl device")
                .0
        } else {
            attention_heads(&q, &k, &v, Some(blocked.clone()), h).0
        };
        let grads = context.sum().backward();
        [&q, &k, &v]
            .map(|x| flat(x.grad(&grads).expect("a gradient")))
            .to_vec()
    })
}

fn layer_norm(
    config: &ModelConfig,
    ad: &Device,
    shape: &Shape,
    precision: Precision,
    fused: bool,
) -> (f64, u64) {
    let d = config.d_model;
    let norm = LayerNormConfig::new(d).with_epsilon(NORM_EPSILON).init(ad);
    let x = leaf([shape.rows, shape.length, d], precision, ad);
    measure(ad, shape.calls, || {
        let grads = ops::layer_norm(&norm, x.clone(), fused).sum().backward();
        let beta = norm.beta.as_ref().expect("a norm with β");
        vec![
            flat(x.grad(&grads).expect("dx")),
            norm.gamma.val().grad(&grads).expect("dγ"),
            beta.val().grad(&grads).expect("dβ"),
        ]
    })
}

fn loss(
    config: &ModelConfig,
    ad: &Device,
    shape: &Shape,
    precision: Precision,
    fused: bool,
) -> (f64, u64) {
    let (b, t, v) = (shape.rows, shape.length, config.vocab_size);
    let logits = leaf([b, t, v], precision, ad);
    // Ids past PAD (0) and the other specials, spread over the vocabulary.
    let ids: Vec<i32> = (0..b * t)
        .map(|i| (4 + i * 7919 % (v - 4)) as i32)
        .collect();
    let targets = Tensor::<2, Int>::from_data(TensorData::new(ids, [b, t]), ad);
    measure(ad, shape.calls, || {
        let sums = label_smoothed(logits.clone(), targets.clone(), 0.1, fused);
        let grads = sums.smoothed.backward();
        vec![
            flat(logits.grad(&grads).expect("a gradient")),
            sums.nll.inner(),
        ]
    })
}

fn dropout(
    config: &ModelConfig,
    ad: &Device,
    shape: &Shape,
    precision: Precision,
    fused: bool,
) -> (f64, u64) {
    let x = leaf([shape.rows, shape.length, config.d_model], precision, ad);
    let dropout = Dropout::new(config.dropout.max(0.1));
    // The step count the device masks read (a replay reads it from Adam's counter).
    let step = Tensor::<1>::from_floats([1.0], &ad.clone().inner());
    measure(ad, shape.calls, || {
        let y = match fused {
            true => with_device_masks(Rc::new(step_masks(step.clone(), 1)), || {
                dropout.forward(x.clone())
            }),
            false => dropout.forward(x.clone()),
        };
        vec![flat(y)]
    })
}

/// A gradient for every parameter of `model` (its values / 1000), on the inner device.
fn gradients(model: &Transformer) -> GradientsParams {
    struct Fill(GradientsParams);
    impl ModuleVisitor for Fill {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let grad = param.val().inner().mul_scalar(1e-3);
            self.0.register::<D>(param.id, grad);
        }
    }
    let mut fill = Fill(GradientsParams::new());
    model.visit(&mut fill);
    fill.0
}

/// Adam over every parameter of the preset, as a replayed step updates: the device Adam,
/// by its group kernels or by tensor operations. Each call's gradients are made (and the
/// device drained) before it, outside its time and count.
fn adam(
    config: &ModelConfig,
    ad: &Device,
    shape: &Shape,
    precision: Precision,
    fused: bool,
) -> Result<(f64, u64)> {
    let mut model = Transformer::new(config, ad)?;
    let mut adam = DeviceAdam::new(ad, 0, 64).with_fused(fused);
    if let Some(scale) = LossScale::initial(precision) {
        adam = adam.with_loss_scale(&scale, precision);
    }
    let lr = |_: u64| 1e-4;
    let (mut launches, mut time) = (0, Duration::ZERO);
    let calls = shape.calls.max(1);
    for step in 1..=(2 + 1 + calls) as u64 {
        let grads = gradients(&model);
        adam.prepare(step, &lr)?;
        ad.sync().ok();
        let start = Instant::now();
        let (next, counted) = count_launches(|| {
            let next = adam.step(model, grads);
            ad.sync().ok();
            next
        });
        model = next;
        match step {
            1 | 2 => {}
            3 => launches = counted,
            _ => time += start.elapsed(),
        }
    }
    Ok((time.as_secs_f64() * 1e3 / calls as f64, launches))
}
