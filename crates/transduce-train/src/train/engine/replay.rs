//! The training step (§5.3) captured once per batch shape and replayed.
//!
//! A GPU step is hundreds of small kernels, each costing the host fusion tracing, autodiff
//! bookkeeping and a launch (docs/BENCHMARKS.md: the step is host-bound). Captured as a
//! graph, a step is replayed with one call: one graph launch on CUDA, a pre-resolved
//! re-encoding of the recorded dispatches on wgpu. A replay reads and writes exactly the
//! buffers of the capture, so everything that changes from step to step lives in device
//! buffers that are updated in place:
//! - the batch: written into the class's input buffers before each replay;
//! - the parameters and Adam's moments: written back into their own buffers at the end of
//!   the step ([`DeviceAdam`]);
//! - the step count, and with it the learning rate, and Adam's time, and with it the bias
//!   corrections: device counters indexing device tables, so a replay with no host value
//!   changed still advances them;
//! - half precision's loss scale: the step scales the loss by it, checks the gradients, skips
//!   Adam's update on the device where one is not finite, and halves or doubles the scale
//!   in place ([`DeviceAdam::with_loss_scale`]); the host learns the scale when it reads
//!   the losses;
//! - dropout's masks: drawn on the device from the step counter ([`transduce_kernels::dropout`]).
//!
//! On a backend without graphs (the CPU) the same step runs eagerly, kernel for kernel the
//! same arithmetic, which is what the tests compare the replays with.

use std::collections::HashMap;
use std::rc::Rc;

use transduce::Transformer;
use transduce::burn::backend::{Backend as _, Dispatch, DispatchGraph};
use transduce::burn::module::ParamId;
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::dropout::with_device_masks;
use transduce::model::token_tensor;
use transduce::ops::is_cpu;
use transduce::tokenizer::PAD;
use transduce::train::{TeacherForced, loss};

use super::adam::DeviceAdam;
use super::gradient_buffer::Exchange;
use crate::error::{Error, Result};
use crate::train::observe::census;
use transduce_kernels::dropout::step_masks;
use transduce_kernels::launches::count_launches;

/// One batch shape's input buffers: source, decoder input, decoder output.
pub(super) struct Inputs {
    pub(super) src: Tensor<2, Int>,
    pub(super) tgt_in: Tensor<2, Int>,
    pub(super) tgt_out: Tensor<2, Int>,
}

impl Inputs {
    pub(super) fn new(forced: &TeacherForced, device: &Device) -> Result<Self> {
        let TeacherForced {
            sources: src,
            inputs: tgt_in,
            outputs: tgt_out,
        } = forced;
        Ok(Inputs {
            src: token_tensor(src, device)?,
            tgt_in: token_tensor(tgt_in, device)?,
            tgt_out: token_tensor(tgt_out, device)?,
        })
    }

    /// Writes a batch of the same shape into these buffers (in place: nothing else holds
    /// them between steps).
    pub(super) fn write(&mut self, forced: &TeacherForced, device: &Device) -> Result<()> {
        let fresh = Inputs::new(forced, device)?;
        for (buffer, fresh) in [
            (&mut self.src, fresh.src),
            (&mut self.tgt_in, fresh.tgt_in),
            (&mut self.tgt_out, fresh.tgt_out),
        ] {
            let [rows, len] = buffer.dims();
            if fresh.dims() != [rows, len] {
                return Err(Error::Usage(format!(
                    "graph step: a batch of shape {:?} written into a class of shape {:?}",
                    fresh.dims(),
                    [rows, len]
                )));
            }
            buffer.inplace(|old| old.slice_assign([0..rows, 0..len], fresh));
        }
        Ok(())
    }
}

/// The step itself, eager: forward, label-smoothed loss over the batch's target tokens
/// (counted on the device: a host count would be frozen into a graph), backward, Adam.
/// Returns the model and `[loss, nll]`, followed under a loss scale by the scale's state
/// after the step, `[scale, clean steps, skipped steps]`.
///
/// With `masks` (a GPU, the run's seed) dropout draws its masks on the device from the
/// optimizer's step counter ([`transduce_kernels::dropout`]), so a replay draws new ones.
pub(super) fn run(
    model: Transformer,
    adam: &mut DeviceAdam,
    inputs: &Inputs,
    epsilon: f64,
    masks: Option<u64>,
) -> (Transformer, Tensor<1>) {
    let forward = || model.forward_focused(inputs.src.clone(), inputs.tgt_in.clone(), None);
    let logits = match masks {
        Some(seed) if model.config().dropout > 0.0 => {
            with_device_masks(Rc::new(step_masks(adam.steps_taken(), seed)), forward)
        }
        _ => forward(),
    };
    let sums = loss::label_smoothed(logits, inputs.tgt_out.clone(), epsilon, model.fused());
    let tokens = inputs
        .tgt_out
        .clone()
        .not_equal_elem(PAD as i64)
        .float()
        .sum()
        .inner();
    let loss = sums.smoothed.div(tokens.autodiff());
    // Half precision: the scale read from the device, so a replay uses the current one.
    let scaled = match adam.loss_scale() {
        Some(scale) => loss.clone().mul(scale.autodiff()),
        None => loss.clone(),
    };
    let grads = GradientsParams::from_grads(scaled.backward(), &model);
    let mut sums = vec![loss.detach().inner(), sums.nll.inner()];
    let model = adam.step(model, grads);
    sums.extend(adam.scale_state());
    (model, Tensor::cat(sums, 0))
}

/// Why `model`'s step cannot be captured, if it cannot.
/// On the CPU (`cpu`) dropout draws its masks on the host (no graphs there either).
pub fn uncapturable(model: &Transformer, cpu: bool) -> Option<String> {
    let config = model.config();
    if config.dropout > 0.0 && cpu {
        return Some(format!(
            "dropout {} draws its masks on the host on the CPU backend",
            config.dropout
        ));
    }
    if config.word_focus {
        return Some("word-focus models take a per-batch focus input; graphs do not yet".into());
    }
    None
}

/// What a class does next.
pub(super) enum Mode {
    /// Eager steps taken so far (the pool fills and fusion settles before a capture).
    Warming(usize),
    /// Captured.
    Replaying(Box<Replay>),
    /// Not capturable: every step eager.
    Eager,
}

/// A captured step.
pub(super) struct Replay {
    pub(super) graph: DispatchGraph,
    /// Where each replay leaves `[loss, nll]`.
    pub(super) sums: Tensor<1>,
    /// Kernels the capture recorded.
    pub(super) kernels: u64,
}

pub(super) struct Class {
    pub(super) inputs: Inputs,
    /// The whole step's (one batch a step).
    pub(super) mode: Mode,
    /// One batch's forward and backward in an accumulated step (`--accum`).
    pub(super) batch_mode: Mode,
}

/// How the step of a [`GraphTrainer`] ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphCounts {
    pub eager: u64,
    pub captured: u64,
    pub replayed: u64,
}

/// Training steps over batches of a few fixed shapes, each shape captured as a graph after
/// [`GraphTrainer::WARMUP`] eager steps and replayed from then on.
pub struct GraphTrainer {
    /// The autodiff device the model trains on.
    pub(super) device: Device,
    pub adam: DeviceAdam,
    pub(super) epsilon: f64,
    pub(super) classes: HashMap<[usize; 3], Class>,
    /// Never capture (to compare replays with the same steps run eagerly).
    pub(super) eager_only: bool,
    /// A CPU device: no graphs, and dropout masks from the host.
    pub(super) cpu: bool,
    /// The run's seed, for dropout masks drawn on the device.
    pub(super) seed: u64,
    /// Why steps run eagerly, once said.
    pub fallback: Option<String>,
    pub counts: GraphCounts,
    /// `--accum`: each parameter's gradients summed over the step's batches, flattened.
    pub(super) accumulated: HashMap<ParamId, Tensor<1>>,
    /// `--accum`: `[target tokens of the step, 1 on its first batch, the batch's index]`,
    /// written before each batch's run.
    pub(super) flags: Tensor<1>,
    /// `--accum`: the update's graph (shared by every shape).
    pub(super) update_mode: Mode,
    /// A rank's exchange of gradient sums with the other ranks ([`super::ranks`]), made
    /// on its first step.
    pub(super) exchange: Option<Exchange>,
    /// A rank's pack of its gradient sums into the exchange's buffer, as a graph.
    pub(super) pack_mode: Mode,
}

impl GraphTrainer {
    /// Eager steps of a shape before it is captured: the first runs fusion's tuning and
    /// takes other paths than later ones; by the third every buffer the step allocates is
    /// in the pool the capture draws from.
    pub const WARMUP: usize = 3;

    pub fn new(device: &Device, adam: DeviceAdam, epsilon: f64) -> Self {
        let cpu = is_cpu(device);
        GraphTrainer {
            fallback: cpu.then(|| "the CPU backend captures no graphs".to_string()),
            cpu,
            seed: 0,
            eager_only: false,
            device: device.clone(),
            adam,
            epsilon,
            classes: HashMap::new(),
            counts: GraphCounts::default(),
            accumulated: HashMap::new(),
            flags: Tensor::zeros([3], &device.clone().inner()),
            update_mode: match cpu {
                true => Mode::Eager,
                false => Mode::Warming(0),
            },
            exchange: None,
            pack_mode: match cpu {
                true => Mode::Eager,
                false => Mode::Warming(0),
            },
        }
    }

    /// Dropout masks on the device drawn for the run seeded `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same steps, never captured.
    pub fn eager(device: &Device, adam: DeviceAdam, epsilon: f64) -> Self {
        GraphTrainer {
            eager_only: true,
            ..Self::new(device, adam, epsilon)
        }
    }

    /// One optimizer step on `forced` (every row padded to the batch's shape), step number
    /// `step` (1-based) of schedule `lr`. Returns the model and `[loss, nll]` on the device.
    pub fn step(
        &mut self,
        model: Transformer,
        forced: &TeacherForced,
        step: u64,
        lr: &dyn Fn(u64) -> f64,
    ) -> Result<(Transformer, Tensor<1>)> {
        self.check_capturable(&model);
        self.adam.prepare(step, lr)?;
        let shape = self.class_for(forced)?;
        let inner = self.device.clone().inner();
        // Dropout masks from the device where there are kernels (the CPU draws its own).
        let (epsilon, masks) = (self.epsilon, (!self.cpu).then_some(self.seed));
        let class = self.classes.get_mut(&shape).expect("the class was made");
        let adam = &mut self.adam;
        let replays = self.counts.replayed;
        let driven = drive(
            &mut class.mode,
            &inner,
            &mut self.counts,
            !self.eager_only,
            &format!("the step of shape {shape:?}"),
            model,
            &mut |model| run(model, adam, &class.inputs, epsilon, masks),
        )?;
        match driven {
            // A replay's own output copied: the run keeps the losses for many steps.
            Driven::Ran(model, sums) if self.counts.replayed > replays => {
                Ok((model, sums.mul_scalar(1.0)))
            }
            Driven::Ran(model, sums) => Ok((model, sums)),
            Driven::Refused(model, why) => {
                self.fallback = Some(why);
                self.step(model, forced, step, lr)
            }
            Driven::NoGraphs(model, sums, why) => {
                self.no_graphs(why);
                Ok((model, sums))
            }
        }
    }

    /// Notes once why steps cannot be captured, if they cannot.
    pub(super) fn check_capturable(&mut self, model: &Transformer) {
        if self.fallback.is_none()
            && let Some(why) = uncapturable(model, self.cpu)
        {
            self.fallback = Some(why);
        }
        if self.fallback.is_some() {
            for mode in [&mut self.update_mode, &mut self.pack_mode] {
                if matches!(mode, Mode::Warming(_)) {
                    *mode = Mode::Eager;
                }
            }
        }
    }

    /// The class of `forced`'s shape, its input buffers holding `forced`.
    pub(super) fn class_for(&mut self, forced: &TeacherForced) -> Result<[usize; 3]> {
        let width = |rows: &[Vec<u32>]| rows.iter().map(Vec::len).max().unwrap_or(0);
        let shape = [
            forced.sources.len(),
            width(&forced.sources),
            width(&forced.inputs),
        ];
        match self.classes.get_mut(&shape) {
            Some(class) => class.inputs.write(forced, &self.device)?,
            None => {
                let mode = || match self.fallback {
                    Some(_) => Mode::Eager,
                    None => Mode::Warming(0),
                };
                let class = Class {
                    inputs: Inputs::new(forced, &self.device)?,
                    mode: mode(),
                    batch_mode: mode(),
                };
                self.classes.insert(shape, class);
            }
        }
        Ok(shape)
    }

    /// The backend captures no graphs: every class eager from now on.
    pub(super) fn no_graphs(&mut self, why: String) {
        self.fallback = Some(why);
        let modes = self
            .classes
            .values_mut()
            .flat_map(|class| [&mut class.mode, &mut class.batch_mode])
            .chain([&mut self.update_mode, &mut self.pack_mode]);
        for mode in modes {
            if matches!(mode, Mode::Warming(_)) {
                *mode = Mode::Eager;
            }
        }
    }
}

/// What [`drive`] did with a step.
pub(super) enum Driven {
    /// It ran: eagerly, recorded after its last warm-up run, or replayed.
    Ran(Transformer, Tensor<1>),
    /// Nothing ran: the backend refused to prepare a capture (the mode is now eager).
    Refused(Transformer, String),
    /// It ran eagerly, and the backend captures no graphs.
    NoGraphs(Transformer, Tensor<1>, String),
}

/// Runs `run` as `mode` says: eagerly while warming up (the last warm-up run prepared, and
/// recorded at once on the same buffers: a recording does not run, so it costs no
/// optimizer step, and the next run is the first replay), replayed once captured (`capture`
/// false: never). `what` names the step in errors.
pub(super) fn drive(
    mode: &mut Mode,
    inner: &Device,
    counts: &mut GraphCounts,
    capture: bool,
    what: &str,
    model: Transformer,
    run: &mut dyn FnMut(Transformer) -> (Transformer, Tensor<1>),
) -> Result<Driven> {
    match mode {
        Mode::Replaying(replay) => {
            let Replay {
                graph,
                sums,
                kernels,
            } = &**replay;
            // SAFETY: every buffer the capture touched is held: the inputs by the class,
            // the parameters by `model`, the moments, counters, tables and accumulators by
            // the trainer, the outputs by the replay; all on this thread's stream.
            unsafe { Dispatch::graph_replay(inner.as_dispatch(), graph) }.map_err(|e| {
                Error::Usage(format!(
                    "graph step: replaying {what} failed: {e:?}; the last checkpoint is intact: resume it with --eager"
                ))
            })?;
            counts.replayed += 1;
            census::note_replay(*kernels);
            // The graph's own output, which its next replay overwrites: a caller keeping it
            // longer copies it.
            Ok(Driven::Ran(model, sums.clone()))
        }
        Mode::Warming(done) if *done + 1 == GraphTrainer::WARMUP && capture => {
            if let Err(e) = Dispatch::graph_prepare(inner.as_dispatch()) {
                *mode = Mode::Eager;
                return Ok(Driven::Refused(
                    model,
                    format!("graph capture unavailable: {e:?}"),
                ));
            }
            let (model, sums) = run(model);
            counts.eager += 1;
            if let Err(e) = Dispatch::graph_start_capture(inner.as_dispatch()) {
                // A backend without graphs (the CPU). Closing the prepared window leaves
                // the stream as it was.
                let _ = Dispatch::graph_stop_capture(inner.as_dispatch());
                *mode = Mode::Eager;
                let why = format!("this backend captures no graphs ({e:?})");
                return Ok(Driven::NoGraphs(model, sums, why));
            }
            let ((model, recorded, graph), kernels) = count_launches(|| {
                let (model, recorded) = run(model);
                // Fusion launches its queued kernels here, into the recording.
                let graph = Dispatch::graph_stop_capture(inner.as_dispatch());
                (model, recorded, graph)
            });
            let graph = graph.map_err(|e| {
                Error::Usage(format!(
                    "graph step: capturing {what} failed: {e:?}; the last checkpoint is intact: resume it with --eager"
                ))
            })?;
            counts.captured += 1;
            *mode = Mode::Replaying(Box::new(Replay {
                graph,
                sums: recorded,
                kernels,
            }));
            Ok(Driven::Ran(model, sums))
        }
        mode => {
            let (model, sums) = run(model);
            counts.eager += 1;
            if let Mode::Warming(done) = mode {
                *done += 1;
            }
            Ok(Driven::Ran(model, sums))
        }
    }
}
