//! The ranks' replayed steps checked against one process accumulating the same group,
//! and against the same ranks stepping eagerly.

use std::sync::Barrier;

use transduce::bundle::load_weights;
use transduce::burn::prelude::*;
use transduce::train::TeacherForced;

use crate::replay::padded_group;
use crate::training::{gpu_lock, reversal_pairs, tiny_start, wgpu_device};
use transduce_train::distributed::COLLECTIVE_TIMEOUT;
use transduce_train::distributed::Collective;
use transduce_train::distributed::tcp::TcpWorld;
use transduce_train::train::engine::adam::DeviceAdam;
use transduce_train::train::engine::replay::{GraphCounts, GraphTrainer};
use transduce_train::train::observe::census::{Census, StepCensus};
use transduce_train::train::read::read_scalars;

const STEPS: u64 = 10;
/// The last steps, every graph replaying, whose launches are counted.
const COUNTED: u64 = 4;

fn lr(step: u64) -> f64 {
    1e-3 * (step as f64).powf(-0.25)
}

/// What a run gives: each step's `[loss, nll]`, a weight matrix after the last step, the
/// trainer's counts.
type Run = (Vec<f64>, Vec<f32>, GraphCounts);

/// `STEPS` steps over `group` from `start`'s weights on `device`: by one process
/// accumulating the group (`rank` none), or as rank r of the job `world` joins.
fn run(
    start: &(transduce::ModelConfig, Vec<u8>),
    device: &Device,
    group: &[TeacherForced],
    tokens: usize,
    capture: bool,
    rank: Option<(&TcpWorld, &Barrier)>,
) -> (Run, Option<StepCensus>) {
    let device = device.clone().autodiff();
    let (config, weights) = start;
    let mut model = load_weights(config, weights, &device).unwrap();
    let adam = DeviceAdam::new(&device, 0, 8);
    let mut trainer = match capture {
        true => GraphTrainer::new(&device, adam, 0.1),
        false => GraphTrainer::eager(&device, adam, 0.1),
    };
    let mut sums = Vec::new();
    let mut census = None;
    for step in 1..=STEPS {
        // Both ranks between the same two steps when the count starts.
        if let (Some((world, barrier)), true) = (rank, step == STEPS - COUNTED + 1) {
            barrier.wait();
            if world.leads() {
                census = Some(Census::start());
            }
            barrier.wait();
        }
        let out;
        (model, out) = match rank {
            Some((world, _)) => trainer.step_ranked(model, group, tokens, step, &lr, world),
            None => trainer.step_group(model, group, tokens, step, &lr),
        }
        .unwrap();
        sums.push(out);
    }
    if let Some((_, barrier)) = rank {
        barrier.wait();
    }
    let census = census.map(|c| c.finish(COUNTED));
    let weights = model.decoder.layers[0].ffn.fc2.weight.val().into_data();
    let run = (
        read_scalars(sums).unwrap(),
        weights.try_to_vec::<f32>().unwrap(),
        trainer.counts,
    );
    (run, census)
}

/// Two ranks, threads joined over TCP on one wgpu device, each replaying its batch of a
/// two-batch group (two shapes) with dropout drawn on the device:
/// - both train bit for bit like one process accumulating the group (`--accum 2`),
///   replayed: the same losses every step and the same weights;
/// - and like the same two ranks stepping eagerly, never captured;
/// - each rank captures three graphs (its batch's gradients, the pack, the update) and
///   replays them from the fourth step;
/// - a replayed step issues at most 10 launches a rank (the launches of both ranks,
///   counted together, over 2).
#[test]
fn ranks_replay_bit_for_bit_like_one_process_accumulating_on_wgpu() {
    let _gpu = gpu_lock();
    let Some(device) =
        wgpu_device("ranks_replay_bit_for_bit_like_one_process_accumulating_on_wgpu")
    else {
        return;
    };
    let mut start = tiny_start(11);
    // Dropout on: the masks are drawn on the device from each batch's place in the group.
    start.0.dropout = 0.1;
    let pairs = reversal_pairs(5, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
    let (group, tokens) = padded_group(&pairs);

    let ((one, one_w, counts), _) = run(&start, &device, &group, tokens, true, None);
    assert_eq!(counts.captured, 3, "{counts:?}");
    let ranks = |capture: bool| -> Vec<(Run, Option<StepCensus>)> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let barrier = Barrier::new(2);
        std::thread::scope(|scope| {
            let ranks: Vec<_> = (0..2)
                .map(|rank| {
                    let (start, device, group, barrier) = (&start, &device, &group, &barrier);
                    scope.spawn(move || {
                        let world =
                            TcpWorld::join(rank, 2, "127.0.0.1", port, COLLECTIVE_TIMEOUT).unwrap();
                        run(
                            start,
                            device,
                            group,
                            tokens,
                            capture,
                            Some((&world, barrier)),
                        )
                    })
                })
                .collect();
            ranks.into_iter().map(|r| r.join().unwrap()).collect()
        })
    };
    let replayed = ranks(true);
    let eager = ranks(false);
    assert!(one[STEPS as usize - 1] < one[0], "the loss falls: {one:?}");
    for (rank, ((losses, weights, counts), _)) in replayed.iter().enumerate() {
        assert_eq!(losses, &one, "rank {rank}, replayed");
        assert_eq!(weights, &one_w, "rank {rank}, replayed");
        // Its batch's gradients, the pack and the update, each after 3 eager runs.
        assert_eq!(counts.captured, 3, "rank {rank}: {counts:?}");
        assert_eq!(counts.replayed, 3 * (STEPS - 3), "rank {rank}: {counts:?}");
    }
    for (rank, ((losses, weights, counts), _)) in eager.iter().enumerate() {
        assert_eq!(counts.replayed, 0);
        assert_eq!(losses, &one, "rank {rank}, eager");
        assert_eq!(weights, &one_w, "rank {rank}, eager");
    }
    let census = replayed[0].1.as_ref().expect("rank 0 counted");
    let eager_census = eager[0].1.as_ref().expect("rank 0 counted");
    println!("2 ranks replayed: {census}\n2 ranks eager: {eager_census}");
    assert!(census.launches / 2.0 <= 10.0, "{census}");
    assert!(eager_census.launches / 2.0 > 200.0, "{eager_census}");
}
