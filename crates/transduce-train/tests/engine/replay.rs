//! The replayed steps checked against the same steps run eagerly.

use std::ops::Range;
use std::path::Path;

use transduce::burn::prelude::*;
use transduce::train::TeacherForced;
use transduce::{Precision, Transformer};

use crate::training::{gpu_lock, losses, losses_scaled, reversal_pairs, tiny_start, wgpu_device};
use transduce::bundle::load_weights;
use transduce_kernels::dropout::step_masks;
use transduce_train::data::batch::Batch;
use transduce_train::data::cache::Pairs;
use transduce_train::data::shape::pad_to_shape;
use transduce_train::train::batches::{target_tokens, teacher_forced};
use transduce_train::train::engine::adam::DeviceAdam;
use transduce_train::train::engine::loss_scale::LossScale;
use transduce_train::train::engine::replay::{GraphCounts, GraphTrainer, uncapturable};
use transduce_train::train::observe::census::{Census, StepCensus};
use transduce_train::train::read::read_scalars;

/// Batches of two shapes, alternating, each padded to its shape.
fn batches() -> Vec<(Batch, (usize, usize))> {
    let short: Batch = (0..4).collect();
    let long: Batch = (4..7).collect();
    vec![(short, (4, 6)), (long, (4, 9))]
}

/// [`batches`] of `pairs` as one step's group, each padded to its shape, and the group's
/// target tokens.
pub fn padded_group(pairs: &Pairs) -> (Vec<TeacherForced>, usize) {
    let shapes = batches();
    let forced = shapes
        .iter()
        .map(|(batch, shape)| pad_to_shape(teacher_forced(pairs, batch), *shape))
        .collect();
    let tokens = shapes.iter().map(|(b, _)| target_tokens(pairs, b)).sum();
    (forced, tokens)
}

fn lr(step: u64) -> f64 {
    1e-3 * (step as f64).powf(-0.25)
}

/// Losses and the final output projection's weights after `steps` steps of `trainer`.
fn train(
    start: &(transduce::ModelConfig, Vec<u8>),
    device: &Device,
    steps: u64,
    capture: bool,
    fused: bool,
) -> (Vec<f64>, Vec<f32>, GraphCounts, StepCensus) {
    let device = device.clone().autodiff();
    let (config, weights) = start;
    let mut model = load_weights(config, weights, &device).unwrap();
    let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
    let adam = DeviceAdam::new(&device, 0, 8);
    let adam = adam.with_fused(fused);
    let mut trainer = if capture {
        GraphTrainer::new(&device, adam, 0.1)
    } else {
        GraphTrainer::eager(&device, adam, 0.1)
    };
    let shapes = batches();
    let mut sums = Vec::new();
    let mut census = None;
    for step in 1..=steps {
        if step == steps - 9 {
            census = Some(Census::start());
        }
        let (batch, shape) = &shapes[(step as usize) % shapes.len()];
        let forced = pad_to_shape(teacher_forced(&pairs, batch), *shape);
        let (next, out) = trainer.step(model, &forced, step, &lr).unwrap();
        model = next;
        sums.push(out);
    }
    let census = census
        .map(|c| c.finish(10))
        .expect("a census of the last steps");
    let values = read_scalars(sums).unwrap();
    let weights = model.encoder.layers[0].ffn.fc1.weight.val().into_data();
    (
        values,
        weights.try_to_vec::<f32>().expect("f32 weights"),
        trainer.counts,
        census,
    )
}

/// Replayed steps train exactly as the same steps run eagerly: 24 steps over two batch
/// shapes (so two graphs, interleaved) from the same start give the same losses and
/// the same weights, bit for bit. Each graph replays the same batch every time, so no
/// input changes between its replays; the learning rate (a new value every step) and
/// Adam's bias corrections still advance, from the device counter, and with an 8-step
/// schedule table the run crosses two refills of it. The last 10 steps issue a
/// handful of launches each (the replay, the batch's three writes, the loss's copy)
/// where the eager steps issue hundreds. Adam runs as the fused in-place kernel; a third
/// run checks it against the same update as tensor operations.
#[test]
fn replayed_steps_equal_eager_steps_on_wgpu() {
    let _gpu = gpu_lock();
    let Some(device) = wgpu_device("replayed_steps_equal_eager_steps_on_wgpu") else {
        return;
    };
    const STEPS: u64 = 24;
    let start = tiny_start(5);
    let (eager, eager_w, counts, eager_census) = train(&start, &device, STEPS, false, true);
    assert_eq!(counts.replayed, 0);
    let (replayed, replayed_w, counts, census) = train(&start, &device, STEPS, true, true);
    assert_eq!(counts.captured, 2, "{counts:?}");
    assert_eq!(
        counts.replayed,
        STEPS - 2 * GraphTrainer::WARMUP as u64,
        "{counts:?}"
    );
    assert_eq!(eager, replayed);
    assert_eq!(eager_w, replayed_w);
    assert!(eager[23] < eager[1], "the loss falls: {eager:?}");
    println!("eager: {eager_census}\nreplayed: {census}");
    assert!(census.launches <= 10.0, "{census:?}");
    assert!(eager_census.launches > 200.0, "{eager_census}");
    assert!(census.kernels > eager_census.launches / 2.0, "{census}");

    // The fused in-place Adam kernel against its oracle, burn's formulas as tensor
    // operations, eager on the same device: the kernel computes the same operations
    // in the same order, but the compiler may contract a product and a sum into one
    // rounding (and the operations' path rounds each), hence 1e-5, not bits.
    let (by_operations, ..) = train(&start, &device, STEPS, false, false);
    for (step, (a, b)) in eager.iter().zip(&by_operations).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs(),
            "step {step}: {eager:?} vs {by_operations:?}"
        );
    }
}

/// `--accum` under graphs: each step sums the gradients of two batches of two shapes
/// on the device, then updates. 8 steps from the same start:
/// - replayed (each shape's gradients and the update captured after 3 eager runs, so
///   the last 5 steps are 3 replays each) equal the same runs eagerly, bit for bit;
/// - both give the losses of the eager trainer's accumulation (burn's
///   `GradientsAccumulator` and `Adam`, each batch padded only to its own length) to
///   1e-5 relative: the same sums, with padding's zeros in other places.
#[test]
fn accumulated_replays_equal_eager_accumulation_on_wgpu() {
    let _gpu = gpu_lock();
    let Some(device) = wgpu_device("accumulated_replays_equal_eager_accumulation_on_wgpu") else {
        return;
    };
    const STEPS: u64 = 8;
    let start = tiny_start(8);
    let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
    let shapes = batches();
    let (forced, tokens) = padded_group(&pairs);
    let run = |capture: bool| {
        let ad = device.clone().autodiff();
        let (config, weights) = &start;
        let mut model = load_weights(config, weights, &ad).unwrap();
        let adam = DeviceAdam::new(&ad, 0, 8);
        let mut trainer = if capture {
            GraphTrainer::new(&ad, adam, 0.1)
        } else {
            GraphTrainer::eager(&ad, adam, 0.1)
        };
        let mut sums = Vec::new();
        for step in 1..=STEPS {
            let out;
            (model, out) = trainer
                .step_group(model, &forced, tokens, step, &|_| 1e-3)
                .unwrap();
            sums.push(out);
        }
        let weights = model.decoder.layers[0].ffn.fc2.weight.val().into_data();
        (
            read_scalars(sums).unwrap(),
            weights.try_to_vec::<f32>().unwrap(),
            trainer.counts,
        )
    };
    let (eager, eager_w, counts) = run(false);
    assert_eq!(counts.replayed, 0);
    let (replayed, replayed_w, counts) = run(true);
    assert_eq!(counts.captured, 3, "{counts:?}");
    assert_eq!(counts.replayed, 3 * (STEPS - 3), "{counts:?}");
    assert_eq!(eager, replayed);
    assert_eq!(eager_w, replayed_w);
    let group: Vec<&Batch> = shapes.iter().map(|(batch, _)| batch).collect();
    let burns = losses(&start, &device, &pairs, &group, STEPS);
    let worst = replayed
        .iter()
        .zip(&burns)
        .map(|(a, b)| (a - b).abs() / b.abs())
        .fold(0f64, f64::max);
    println!("replayed against burn's accumulation: at most {worst:.1e} relative");
    for (step, (a, b)) in replayed.iter().zip(&burns).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs(),
            "step {step}: {replayed:?} vs {burns:?}"
        );
    }
    assert!(replayed[7] < replayed[0], "the loss falls: {replayed:?}");
}

/// Every value of each step's sums (`[loss, nll, scale, clean, skipped]` in half
/// precision), in one read.
fn read_all(sums: Vec<Tensor<1>>) -> Vec<Vec<f32>> {
    let width = sums[0].dims()[0];
    let values = Tensor::cat(sums, 0)
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    values.chunks(width).map(<[f32]>::to_vec).collect()
}

/// Half precision under graphs (f16, which lavapipe has): the loss scale, the check of
/// the gradients and the skip of an overflowing step all happen on the device.
///
/// Started at a scale of 2²⁰, which overflows f16's backward pass, and doubling after 3
/// clean steps, 24 steps over two batch shapes skip steps both while warming up and
/// while replaying. Against three oracles:
/// - the same steps run eagerly give the replays' losses, scale states and weights, bit
///   for bit;
/// - the scale's state after every step is what the host's [`LossScale`] computes from
///   the same sequence of skips (halving, doubling, counts);
/// - Adam's time is the number of steps not skipped.
///
/// Then, with the real doubling interval, one shape: the steps skip where burn's `Adam`
/// under the trainer's host-side skip (`optimizer_step`) skips, and the losses agree to
/// 2·10⁻³ relative: the two paths scale the loss and unscale the gradients in other
/// kernels, and f16 rounds at 2⁻¹¹ ≈ 4.9·10⁻⁴ (measured: at most 9.4·10⁻⁵ over the 12 steps).
#[test]
fn half_precision_skips_overflowing_steps_on_the_device() {
    let _gpu = gpu_lock();
    let Some(gpu) = wgpu_device("half_precision_skips_overflowing_steps_on_the_device") else {
        return;
    };
    if !gpu.supports_dtype(Precision::F16.dtype()) {
        transduce_testing::skip(format_args!(
            "half_precision_skips_overflowing_steps_on_the_device: no f16"
        ));
        return;
    }
    let device = gpu.clone().autodiff();
    let (config, weights) = tiny_start(6);
    let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
    let start = LossScale {
        scale: 1_048_576.0,
        clean_steps: 0,
        skipped: 0,
    };
    const STEPS: u64 = 24;
    let run = |capture: bool| {
        let mut model = load_weights(&config, &weights, &device)
            .unwrap()
            .with_precision(Precision::F16);
        let adam = DeviceAdam::new(&device, 0, 8)
            .with_loss_scale(&start, Precision::F16)
            .growing_every(3);
        let mut trainer = match capture {
            true => GraphTrainer::new(&device, adam, 0.1),
            false => GraphTrainer::eager(&device, adam, 0.1),
        };
        // Two shapes alternating, and every fifth step a third, whose warm-up steps
        // run eagerly between the others' replays.
        let mut shapes = batches();
        shapes.push(((0..4).collect(), (4, 7)));
        let mut sums = Vec::new();
        for step in 1..=STEPS {
            let class = if step % 5 == 0 { 2 } else { step as usize % 2 };
            let (batch, shape) = &shapes[class];
            let forced = pad_to_shape(teacher_forced(&pairs, batch), *shape);
            let out;
            (model, out) = trainer.step(model, &forced, step, &lr).unwrap();
            sums.push(out);
        }
        let weights = model.encoder.layers[0].ffn.fc1.weight.val().into_data();
        (read_all(sums), weights, trainer.counts, trainer.adam.time())
    };
    let (eager, eager_w, _, eager_time) = run(false);
    let (replayed, replayed_w, counts, time) = run(true);
    assert_eq!(counts.captured, 3, "{counts:?}");
    assert_eq!(eager, replayed);
    assert_eq!(eager_w, replayed_w);

    let mut host = start.clone();
    let mut skipped_replaying = 0;
    for (step, values) in replayed.iter().enumerate() {
        let finite = values[4] as u64 == host.skipped;
        host.update_growing(Precision::F16, finite, 3);
        let device_state = (values[2] as f64, values[3] as u64, values[4] as u64);
        assert_eq!(
            device_state,
            (host.scale, host.clean_steps, host.skipped),
            "step {}: {replayed:?}",
            step + 1
        );
        if !finite && step >= 2 * GraphTrainer::WARMUP {
            skipped_replaying += 1;
        }
    }
    assert!(host.skipped >= 2 && skipped_replaying >= 1, "{replayed:?}");
    assert_eq!(
        (time, eager_time),
        (STEPS - host.skipped, STEPS - host.skipped)
    );
    assert!(replayed.iter().all(|v| v[0].is_finite()), "{replayed:?}");

    // Against burn's Adam with the host's skip, one batch shape, no padding, at the
    // helper's learning rate of 10⁻³.
    let batch: Batch = (0..4).collect();
    let forced = teacher_forced(&pairs, &batch);
    let mut model = load_weights(&config, &weights, &device)
        .unwrap()
        .with_precision(Precision::F16);
    let adam_state = DeviceAdam::new(&device, 0, 8).with_loss_scale(&start, Precision::F16);
    let mut trainer = GraphTrainer::new(&device, adam_state, 0.1);
    let mut sums = Vec::new();
    for step in 1..=12 {
        let out;
        (model, out) = trainer.step(model, &forced, step, &|_| 1e-3).unwrap();
        sums.push(out);
    }
    let ours = read_all(sums);
    let burns = losses_scaled(
        &(config.clone(), weights.clone()),
        &gpu,
        &pairs,
        &[&batch],
        12,
        Precision::F16,
        None,
        Some(start.clone()),
    );
    assert!(burns[11].1 >= 2, "the start overflows: {burns:?}");
    for (step, (ours, (loss, skipped))) in ours.iter().zip(&burns).enumerate() {
        assert_eq!(ours[4] as u64, *skipped, "step {}: {ours:?}", step + 1);
        let relative = (ours[0] as f64 - loss).abs() / loss;
        println!("step {}: relative gap {relative:.1e}", step + 1);
        assert!(relative < 2e-3, "step {}: {} vs {loss}", step + 1, ours[0]);
    }
}

/// On the CPU (no graphs: every step eager) the device-scalar Adam trains as burn's
/// Adam: 8 steps from the same start give the losses of the trainer's `optimizer_step`
/// with burn's `Adam` to 1e-5 relative (same operations in the same order, the same
/// f32 scalars, since the table holds what burn computes on the host; but a tensor
/// operand where burn passes a scalar takes another of burn-flex's kernels, which
/// rounds differently in the last bit: alone, 3 of the 8 losses differ by about 1e-7; with
/// the binary's other tests running beside it, step 7 once differed by 2.8e-6, 2026-12-02).
#[test]
fn device_adam_is_burns_adam_on_the_cpu() {
    let start = tiny_start(9);
    let pairs = reversal_pairs(2, (0..4).map(|n| 3 + n));
    let batch: Batch = (0..4).collect();
    let burns = losses(&start, &Device::flex(), &pairs, &[&batch], 8);
    let device = Device::flex().autodiff();
    let (config, weights) = &start;
    let mut model = load_weights(config, weights, &device).unwrap();
    let mut trainer = GraphTrainer::new(&device, DeviceAdam::new(&device, 0, 1024), 0.1);
    let forced = teacher_forced(&pairs, &batch);
    let mut sums = Vec::new();
    for step in 1..=8 {
        let out;
        (model, out) = trainer.step(model, &forced, step, &|_| 1e-3).unwrap();
        sums.push(out);
    }
    let ours = read_scalars(sums).unwrap();
    for (step, (a, b)) in ours.iter().zip(&burns).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs(),
            "step {step}: {ours:?} vs {burns:?}"
        );
    }
    assert_ne!(ours[0], ours[7], "the steps train");
    assert_eq!(trainer.counts.replayed, 0);
    let why = trainer.fallback.expect("the CPU says why it runs eagerly");
    assert!(why.contains("captures no graphs"), "{why}");
}

/// The device-scalar Adam's state is burn's record of Adam: read back into itself it
/// continues bit for bit, and burn's `Adam` continues from it (and it from burn's) as
/// the two continue from their own state, to 1e-5 relative (CPU, 3 + 3 steps: the two
/// Adams take different burn-flex kernels, whose last bits differ with the CPU and, through
/// their parallel splits, with the machine's load; 2.8e-6 was seen in the test above).
#[test]
fn device_adam_state_is_burns_record() {
    use transduce::train::adam;
    use transduce_train::train::batches::Examples;
    use transduce_train::train::engine::eager::{StepWork, optimizer_step};
    let (config, weights) = tiny_start(4);
    let pairs = reversal_pairs(6, (0..4).map(|n| 3 + n));
    let batch: Batch = (0..4).collect();
    let forced = teacher_forced(&pairs, &batch);
    let device = Device::flex().autodiff();
    let lr = |t: u64| 1e-3 / (t as f64).sqrt();
    let tokens = forced.outputs.iter().map(Vec::len).sum::<usize>();
    let group = [&batch];
    let work = |step: u64| StepWork {
        device: &device,
        group: &group,
        examples: Examples {
            pairs: &pairs,
            focus: None,
            classes: None,
        },
        group_tokens: tokens,
        epsilon: 0.1,
        seed: step,
        collective: None,
    };
    let device_steps = |mut model: Transformer, adam: DeviceAdam, steps: Range<u64>| {
        let mut trainer = GraphTrainer::new(&device, adam, 0.1);
        let mut sums = Vec::new();
        for step in steps {
            let out;
            (model, out) = trainer.step(model, &forced, step, &lr).unwrap();
            sums.push(out);
        }
        (model, trainer.adam, read_scalars(sums).unwrap())
    };
    let burn_steps = |mut model: Transformer, mut optimizer, steps: Range<u64>| {
        let mut sums = Vec::new();
        for step in steps {
            let loss;
            (model, loss) = optimizer_step(
                model,
                &mut optimizer,
                &work(step),
                lr(step),
                transduce::Precision::F32,
                &mut None,
            )
            .unwrap();
            sums.push(loss.smoothed);
        }
        (model, optimizer, read_scalars(sums).unwrap())
    };
    let start = || load_weights(&config, &weights, &device).unwrap();
    let close = |a: &[f64], b: &[f64]| {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * y.abs(), "{a:?} vs {b:?}");
        }
    };

    let (model, adam_state, _) = device_steps(start(), DeviceAdam::new(&device, 0, 64), 1..4);
    let bytes = adam_state.to_record_bytes().unwrap();
    let (_, _, own) = device_steps(model.clone(), adam_state, 4..7);
    let restored = DeviceAdam::from_record_bytes(bytes.clone(), &device, 64).unwrap();
    let (_, _, reread) = device_steps(model.clone(), restored, 4..7);
    assert_eq!(own, reread, "read back, the state continues bit for bit");
    let burns = adam()
        .from_bytes(transduce::burn::tensor::Bytes::from_bytes_vec(bytes))
        .unwrap();
    let (_, _, by_burn) = burn_steps(model, burns, 4..7);
    close(&by_burn, &own);

    let (model, optimizer, _) = burn_steps(start(), adam(), 1..4);
    let bytes =
        transduce_train::train::checkpoint::optimizer_bytes(&optimizer, Path::new(".")).unwrap();
    let (_, _, burn_own) = burn_steps(model.clone(), optimizer, 4..7);
    let adam_state = DeviceAdam::from_record_bytes(bytes, &device, 64).unwrap();
    let (_, _, by_device) = device_steps(model, adam_state, 4..7);
    close(&by_device, &burn_own);
    assert_ne!(own[0], own[2], "the steps train");
}

/// On the CPU a model with dropout is not captured (its masks come from the host), and
/// says so; on a GPU its masks come from the device and it is.
#[test]
fn dropout_keeps_cpu_steps_eager_and_says_why() {
    let (mut config, _) = tiny_start(1);
    let device = Device::flex().autodiff();
    assert_eq!(
        uncapturable(&Transformer::new(&config, &device).unwrap(), true),
        None
    );
    config.dropout = 0.1;
    let model = Transformer::new(&config, &device).unwrap();
    let why = uncapturable(&model, true).expect("a reason");
    assert!(why.contains("dropout 0.1"), "{why}");
    assert_eq!(uncapturable(&model, false), None);
}

/// Device masks: about `keep` of the elements survive, scaled by 1/keep; the same
/// (seed, step, site) gives the same mask, and another step or site another one.
#[test]
fn device_masks_keep_their_share_and_change_with_step_and_site() {
    let _gpu = gpu_lock();
    let Some(device) = wgpu_device("device_masks_keep_their_share_and_change_with_step_and_site")
    else {
        return;
    };
    let like = Tensor::<1>::zeros([200_000], &device);
    let mask = |step: i32, site: u64| {
        let step = Tensor::<1, Int>::from_data([step], &device).float();
        let masks = step_masks(step, 7);
        masks(like.clone(), site, 0.9)
            .into_data()
            .try_to_vec::<f32>()
            .expect("f32 mask")
    };
    let a = mask(3, 0);
    let scale = (1.0f64 / 0.9) as f32;
    assert!(a.iter().all(|&x| x == 0.0 || x == scale));
    let kept = a.iter().filter(|&&x| x > 0.0).count() as f64 / a.len() as f64;
    assert!((kept - 0.9).abs() < 0.005, "kept {kept}");
    assert_eq!(a, mask(3, 0), "deterministic");
    let differ = |b: Vec<f32>| a.iter().zip(&b).filter(|(x, y)| x != y).count();
    // Independent masks differ in about 2·0.9·0.1 = 18% of the elements.
    for other in [mask(4, 0), mask(3, 1)] {
        let d = differ(other) as f64 / a.len() as f64;
        assert!((d - 0.18).abs() < 0.01, "differ {d}");
    }
}

/// A replayed step with dropout draws new masks every time, with no host value changed
/// between replays: at learning rate 0 on one unchanged batch the weights never move,
/// so only the masks can make the losses differ, and all 8 do. The replays' losses are
/// the eager steps', bit for bit (the same device masks).
#[test]
fn replayed_steps_with_dropout_draw_new_masks() {
    let _gpu = gpu_lock();
    let Some(device) = wgpu_device("replayed_steps_with_dropout_draw_new_masks") else {
        return;
    };
    let (mut config, weights) = tiny_start(8);
    config.dropout = 0.1;
    let pairs = reversal_pairs(1, (0..4).map(|n| 4 + n % 2));
    let forced = pad_to_shape(teacher_forced(&pairs, &(0..4).collect()), (4, 6));
    let device = device.autodiff();
    let losses = |capture: bool| {
        let mut model = load_weights(&config, &weights, &device).unwrap();
        let adam = DeviceAdam::new(&device, 0, 64);
        let trainer = if capture {
            GraphTrainer::new(&device, adam, 0.1)
        } else {
            GraphTrainer::eager(&device, adam, 0.1)
        };
        let mut trainer = trainer.with_seed(11);
        let mut sums = Vec::new();
        for step in 1..=8 {
            let out;
            (model, out) = trainer.step(model, &forced, step, &|_| 0.0).unwrap();
            sums.push(out);
        }
        (read_scalars(sums).unwrap(), trainer.counts)
    };
    let (eager, _) = losses(false);
    let (replayed, counts) = losses(true);
    assert_eq!(
        counts.replayed,
        8 - GraphTrainer::WARMUP as u64,
        "{counts:?}"
    );
    assert_eq!(eager, replayed);
    let mut distinct = replayed.clone();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    assert_eq!(distinct.len(), 8, "a new mask every step: {replayed:?}");
}
