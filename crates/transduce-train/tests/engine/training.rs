//! The eager step's tests, and the helpers the replay tests share with them: a tiny model,
//! reversal pairs, the losses of a few steps, the GPU lock and the wgpu device.

use transduce::bundle::{WeightDtype, load_weights, save_weights};
use transduce::burn::prelude::*;
use transduce::{ModelConfig, Precision, Transformer};

use transduce::train::adam;
use transduce_train::data::batch::Batch;
use transduce_train::data::cache::Pairs;
use transduce_train::data::shape::Shapes;
use transduce_train::distributed::COLLECTIVE_TIMEOUT;
use transduce_train::distributed::Collective;
use transduce_train::distributed::tcp::TcpWorld;
use transduce_train::rng;
use transduce_train::train::batches::{Examples, target_tokens};
use transduce_train::train::engine::eager::{StepWork, optimizer_step};
use transduce_train::train::engine::loss_scale::LossScale;
use transduce_train::train::observe::census;
use transduce_train::train::read::read_scalars;
use transduce_train::train::run::validate::evaluate_nll;

/// A dropout-free tiny model: its config and initial weights, made on the CPU.
pub fn tiny_start(seed: u64) -> (ModelConfig, Vec<u8>) {
    let config = ModelConfig {
        dropout: 0.0,
        ..ModelConfig::tiny().with_vocab(48)
    };
    let cpu = Device::flex();
    cpu.seed(seed);
    let model = Transformer::new(&config, &cpu).unwrap();
    (
        config.clone(),
        save_weights(&model, WeightDtype::F32).unwrap(),
    )
}

/// Pairs whose target reverses the source, one per source length.
pub fn reversal_pairs(seed: u64, lengths: impl Iterator<Item = usize>) -> Pairs {
    let mut pairs = Pairs::default();
    let mut r = rng::Rng::new(seed);
    for len in lengths {
        let s: Vec<u32> = (0..len).map(|_| 4 + r.below(40) as u32).collect();
        let t: Vec<u32> = s.iter().rev().copied().collect();
        pairs.push(s, t);
    }
    pairs
}

/// Losses of `steps` optimizer steps on `group` from the same initial weights.
pub fn losses(
    start: &(ModelConfig, Vec<u8>),
    device: &Device,
    pairs: &Pairs,
    group: &[&Batch],
    steps: u64,
) -> Vec<f64> {
    losses_in(start, device, pairs, group, steps, Precision::F32)
}

/// [`losses`] computed in `precision`, with `train`'s loss scaling.
pub fn losses_in(
    start: &(ModelConfig, Vec<u8>),
    device: &Device,
    pairs: &Pairs,
    group: &[&Batch],
    steps: u64,
    precision: Precision,
) -> Vec<f64> {
    losses_shaped(start, device, pairs, group, steps, precision, None)
}

/// [`losses_in`] with each batch padded to its shape class under `classes` tokens.
pub fn losses_shaped(
    start: &(ModelConfig, Vec<u8>),
    device: &Device,
    pairs: &Pairs,
    group: &[&Batch],
    steps: u64,
    precision: Precision,
    classes: Option<usize>,
) -> Vec<f64> {
    let scale = LossScale::initial(precision);
    let (losses, skipped): (Vec<f64>, Vec<u64>) = losses_scaled(
        start, device, pairs, group, steps, precision, classes, scale,
    )
    .into_iter()
    .unzip();
    assert!(skipped.iter().all(|&s| s == 0), "no step may be skipped");
    losses
}

/// [`losses_shaped`] from the loss scale `scale`: each step's loss, and the steps
/// skipped so far after it.
#[allow(clippy::too_many_arguments)]
pub fn losses_scaled(
    start: &(ModelConfig, Vec<u8>),
    device: &Device,
    pairs: &Pairs,
    group: &[&Batch],
    steps: u64,
    precision: Precision,
    classes: Option<usize>,
    scale: Option<LossScale>,
) -> Vec<(f64, u64)> {
    let run = (precision, classes, scale);
    rank_losses(start, device, None, pairs, group, steps, run)
}

/// [`losses_scaled`] as one rank of `collective`'s job (none: a single process), which
/// takes its share of `group` and sums gradients with the other ranks.
fn rank_losses(
    (config, weights): &(ModelConfig, Vec<u8>),
    device: &Device,
    collective: Option<&dyn Collective>,
    pairs: &Pairs,
    group: &[&Batch],
    steps: u64,
    (precision, classes, mut scale): (Precision, Option<usize>, Option<LossScale>),
) -> Vec<(f64, u64)> {
    let device = device.clone().autodiff();
    let mut model = load_weights(config, weights, &device)
        .unwrap()
        .with_precision(precision);
    let mut optimizer = adam();
    let tokens = group.iter().map(|b| target_tokens(pairs, b)).sum();
    let mut losses = Vec::new();
    let mut skipped = Vec::new();
    for step in 0..steps {
        let work = StepWork {
            device: &device,
            group,
            examples: Examples {
                pairs,
                focus: None,
                classes,
            },
            group_tokens: tokens,
            epsilon: 0.1,
            seed: step,
            collective,
        };
        let (next, loss) =
            optimizer_step(model, &mut optimizer, &work, 1e-3, precision, &mut scale).unwrap();
        model = next;
        losses.push(loss.smoothed);
        skipped.push(scale.as_ref().map_or(0, |s| s.skipped));
    }
    let losses = read_scalars(losses).unwrap();
    losses.into_iter().zip(skipped).collect()
}

/// Padding a batch to its shape class (longer rows, extra rows without targets)
/// changes no loss and no update: on the CPU backend, 6 steps from the same start give
/// the same losses to 1e-5 relative (the padded sums add zeros, in another order).
#[test]
fn shape_classes_train_like_exact_batches() {
    let start = tiny_start(7);
    let pairs = reversal_pairs(4, (0..10).map(|n| 3 + n % 5));
    let batch: Batch = (0..10).collect();
    let cpu = Device::flex();
    let exact = losses(&start, &cpu, &pairs, &[&batch], 6);
    // 256 tokens: the class of length 8 has 32 rows, so 22 are padding.
    let shape = Examples {
        pairs: &pairs,
        focus: None,
        classes: Some(256),
    }
    .shape(&batch);
    assert_eq!(shape, Some((32, 8)));
    let padded = losses_shaped(
        &start,
        &cpu,
        &pairs,
        &[&batch],
        6,
        Precision::F32,
        Some(256),
    );
    assert!(exact[5] < exact[0], "{exact:?}");
    for (step, (x, y)) in exact.iter().zip(&padded).enumerate() {
        assert!(
            (x - y).abs() / x.abs() < 1e-5,
            "step {step}: exact {x} vs padded {y}"
        );
    }
}

/// An f32 step reads nothing back from the device: the loss stays there until the
/// trainer reads many steps' losses in one transaction (counted by the census, on the
/// CPU backend, where every read is as real as on a GPU).
#[test]
fn f32_steps_read_nothing_until_the_losses_are_read_together() {
    // A census replaces the process's one launch hook: not beside another test's.
    let _gpu = gpu_lock();
    let (config, weights) = tiny_start(3);
    let pairs = reversal_pairs(2, std::iter::repeat_n(6, 8));
    let batch: Batch = (0..8).collect();
    let device = Device::flex().autodiff();
    let mut model = load_weights(&config, &weights, &device).unwrap();
    let mut optimizer = adam();
    let census = census::Census::start();
    let mut losses = Vec::new();
    for step in 0..4 {
        let work = StepWork {
            device: &device,
            group: &[&batch],
            examples: Examples {
                pairs: &pairs,
                focus: None,
                classes: None,
            },
            group_tokens: target_tokens(&pairs, &batch),
            epsilon: 0.1,
            seed: step,
            collective: None,
        };
        let (next, loss) = optimizer_step(
            model,
            &mut optimizer,
            &work,
            1e-3,
            Precision::F32,
            &mut None,
        )
        .unwrap();
        model = next;
        losses.push(loss.smoothed);
        losses.push(loss.nll);
    }
    let values = read_scalars(losses).unwrap();
    let counted = census.finish(4);
    assert_eq!(values.len(), 8);
    assert!(
        values.iter().all(|v| v.is_finite() && *v > 0.0),
        "{values:?}"
    );
    // One read in four steps, and it was the transaction.
    assert_eq!(counted.reads, 0.25, "{counted}");
}

/// Validation in shape classes gives the validation loss of exact batches (the
/// padded positions and rows add nothing), read back in one transaction.
#[test]
fn validation_in_shape_classes_matches_exact_batches() {
    // A census replaces the process's one launch hook: not beside another test's.
    let _gpu = gpu_lock();
    let (config, weights) = tiny_start(8);
    let model = load_weights(&config, &weights, &Device::flex()).unwrap();
    let pairs = reversal_pairs(6, (0..40).map(|n| 2 + n % 11));
    let exact = evaluate_nll(&model, &pairs, None, 128, Shapes::Exact).unwrap();
    let census = census::Census::start();
    let classed = evaluate_nll(&model, &pairs, None, 128, Shapes::Classes).unwrap();
    assert_eq!(census.finish(1).reads, 1.0);
    assert!(exact > 0.0 && exact.is_finite(), "{exact}");
    assert!(
        (exact - classed).abs() / exact < 1e-5,
        "{exact} vs {classed}"
    );
}

/// Held by every wgpu test of this crate and every test that takes a census (one launch
/// hook per process).
pub use transduce_kernels::testing::gpu_lock;

/// The wgpu device, or `None` (with the reason printed) where there is no adapter; its
/// tuning kept where the CLI keeps it, not in cubecl's default `target/environment`.
pub fn wgpu_device(test: &str) -> Option<Device> {
    transduce_kernels::testing::wgpu_device_after(test, || {
        transduce_train::backend::cache::install(transduce_train::backend::cache::GpuApi::Wgpu);
    })
}

/// Mixed precision (f16 activations over f32 weights, loss scaled by 2¹⁶; and bf16
/// where the adapter has it) trains like f32 on the same start and batches: the
/// losses of 6 steps stay within 1% of f32's (f16 keeps 11 significant bits, ≈ 5·10⁻⁴
/// relative per rounding; bf16 8 bits, so 3%), and none is skipped.
#[test]
fn half_precision_tracks_f32_on_wgpu() {
    let _gpu = gpu_lock();
    let Some(wgpu) = wgpu_device("half_precision_tracks_f32_on_wgpu") else {
        return;
    };
    let start = tiny_start(11);
    let pairs = reversal_pairs(3, std::iter::repeat_n(8, 16));
    let batch: Batch = (0..16).collect();
    let reference = losses(&start, &wgpu, &pairs, &[&batch], 6);
    assert!(reference[5] < reference[0], "{reference:?}");
    for (precision, tolerance) in [(Precision::F16, 0.01), (Precision::Bf16, 0.03)] {
        if !wgpu.supports_dtype(precision.dtype()) {
            transduce_testing::skip_part(format_args!(
                "{} on this adapter: no {0} arithmetic",
                precision.name()
            ));
            continue;
        }
        let half = losses_in(&start, &wgpu, &pairs, &[&batch], 6, precision);
        for (step, (x, y)) in reference.iter().zip(&half).enumerate() {
            assert!(
                (x - y).abs() / x.abs() < tolerance,
                "step {step}: f32 {x} vs {} {y} ({half:?})",
                precision.name()
            );
        }
    }
}

/// The wgpu backend (Vulkan/Metal/DX12; lavapipe's software Vulkan on a machine
/// without a GPU) trains like the CPU backend: same start, same batches, losses agree to
/// 1e-3 relative (f32 kernels reduce in different orders, so bitwise equality is not
/// expected).
#[test]
fn wgpu_and_cpu_training_agree() {
    let _gpu = gpu_lock();
    let Some(wgpu) = wgpu_device("wgpu_and_cpu_training_agree") else {
        return;
    };
    let start = tiny_start(11);
    let pairs = reversal_pairs(3, std::iter::repeat_n(8, 16));
    let batch: Batch = (0..16).collect();
    let a = losses(&start, &Device::flex(), &pairs, &[&batch], 4);
    let b = losses(&start, &wgpu, &pairs, &[&batch], 4);
    for (step, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() / x.abs() < 1e-3,
            "step {step}: cpu {x} vs wgpu {y}"
        );
    }
    // Training moved: the losses are not all the same number.
    assert!(a[3] < a[0], "{a:?}");
}

/// Data parallelism changes where gradients are computed, not the update: two ranks
/// (threads here, joined over TCP as `train --nproc-per-node 2` joins processes), one
/// batch each, train bit for bit like one process accumulating both batches.
#[test]
fn two_ranks_train_like_accumulation() {
    let start = tiny_start(5);
    let pairs = reversal_pairs(9, (0..12).map(|n| 6 + n % 4));
    let (a, b): (Batch, Batch) = ((0..6).collect(), (6..12).collect());
    let group = [&a, &b];
    let f32_run = || (Precision::F32, None, None);
    let one = rank_losses(&start, &Device::flex(), None, &pairs, &group, 4, f32_run());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let ranks: Vec<Vec<(f64, u64)>> = std::thread::scope(|scope| {
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                let (start, pairs, group) = (&start, &pairs, &group);
                scope.spawn(move || {
                    let world =
                        TcpWorld::join(rank, 2, "127.0.0.1", port, COLLECTIVE_TIMEOUT).unwrap();
                    let device = Device::flex();
                    rank_losses(start, &device, Some(&world), pairs, group, 4, f32_run())
                })
            })
            .collect();
        ranks.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(one[3].0 < one[0].0, "training moved: {one:?}");
    assert_eq!(ranks[0], one);
    assert_eq!(ranks[1], one);
}
