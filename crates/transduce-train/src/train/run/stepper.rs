//! How a run takes its optimizer steps (§5.3): burn's Adam over eager steps, or captured
//! and replayed graphs with the device-scalar Adam where the run allows them
//! ([`crate::train::engine`]). Either way a step's loss stays on the device.

use std::path::Path;

use transduce::burn::optim::ModuleOptimizer;
use transduce::burn::prelude::*;
use transduce::ops::is_cpu;
use transduce::train::TeacherForced;
use transduce::train::schedule::Noam;
use transduce::{Precision, Transformer};

use super::checkpoint::{self, TrainState};
use crate::data::shape;
use crate::error::Result;
use crate::train::batches::teacher_forced;
use crate::train::engine::adam::DeviceAdam;
use crate::train::engine::eager::{StepLoss, StepWork, optimizer_step};
use crate::train::engine::loss_scale::LossScale;
use crate::train::engine::replay::{GraphCounts, GraphTrainer, uncapturable};

/// How a run takes its optimizer steps.
pub(super) enum Stepper {
    /// burn's Adam over eager steps ([`optimizer_step`]).
    Eager(ModuleOptimizer),
    /// Captured and replayed steps with the device-scalar Adam.
    Graph(Box<GraphTrainer>),
}

/// One step taken: the model after it, its loss (unread, on the device) and, for a graph
/// step, the loss scale after it (scale, clean steps, skipped steps; an eager step's is on
/// the host already).
pub(super) struct Taken {
    pub model: Transformer,
    pub loss: StepLoss,
    pub scale: Option<[Tensor<1>; 3]>,
}

/// What the choice of a run's stepper reads from the run.
pub(super) struct Choice<'a> {
    /// Graphs asked for (`--graph`, or a GPU backend's default).
    pub graph: bool,
    /// The fused kernels allowed.
    pub fused: bool,
    pub precision: Precision,
    pub seed: u64,
    pub label_smoothing: f64,
    /// Where an eager optimizer's state is staged to hand it over.
    pub run_dir: &'a Path,
    /// Rank 0, which says why steps stay eager.
    pub lead: bool,
}

impl Stepper {
    /// Graph steps where `--graph` asks for them and the model allows capture, else eager
    /// steps (saying why on rank 0). Adam's state, restored or empty, carries over in the
    /// one checkpoint format either way.
    pub fn choose(
        choice: &Choice<'_>,
        model: &Transformer,
        optimizer: ModuleOptimizer,
        state: &TrainState,
        device: &Device,
    ) -> Result<Stepper> {
        if !choice.graph {
            return Ok(Stepper::Eager(optimizer));
        }
        // `--accum` is captured (each batch's gradients, then the update), and so are the
        // ranks' steps of a job (their exchange between the two).
        if let Some(why) = uncapturable(model, is_cpu(device)) {
            if choice.lead {
                eprintln!("graph: eager steps: {why}");
            }
            return Ok(Stepper::Eager(optimizer));
        }
        let bytes = checkpoint::optimizer_bytes(&optimizer, choice.run_dir)?;
        let mut adam = DeviceAdam::from_record_bytes(bytes, device, 1024)?.with_fused(choice.fused);
        if let Some(scale) = &state.loss_scale {
            adam = adam.with_loss_scale(scale, choice.precision);
        }
        Ok(Stepper::Graph(Box::new(
            GraphTrainer::new(device, adam, choice.label_smoothing).with_seed(choice.seed),
        )))
    }

    /// Optimizer step number `step` over `work`'s group, at the learning rate `noam` gives.
    pub fn step(
        &mut self,
        model: Transformer,
        work: &StepWork<'_>,
        step: u64,
        noam: &Noam,
        precision: Precision,
        loss_scale: &mut Option<LossScale>,
    ) -> Result<Taken> {
        match self {
            Stepper::Eager(optimizer) => {
                let (model, loss) =
                    optimizer_step(model, optimizer, work, noam.lr(step), precision, loss_scale)?;
                Ok(Taken {
                    model,
                    loss,
                    scale: None,
                })
            }
            Stepper::Graph(trainer) => {
                let forced: Vec<TeacherForced> = work
                    .group
                    .iter()
                    .map(|&batch| {
                        let forced = teacher_forced(work.examples.pairs, batch);
                        match work.examples.shape(batch) {
                            Some(shape) => shape::pad_to_shape(forced, shape),
                            None => forced,
                        }
                    })
                    .collect();
                let (tokens, lr) = (work.group_tokens, &|t| noam.lr(t));
                let (model, sums) = match work.collective {
                    Some(c) => trainer.step_ranked(model, &forced, tokens, step, lr, c)?,
                    None => trainer.step_group(model, &forced, tokens, step, lr)?,
                };
                // `[loss, nll]`, then the loss scale's state in half precision: the reads
                // take each tensor's first value.
                let scale = loss_scale
                    .is_some()
                    .then(|| [2, 3, 4].map(|i| sums.clone().slice(i..i + 1)));
                let loss = StepLoss {
                    nll: sums.clone().slice(1..2),
                    smoothed: sums,
                };
                Ok(Taken { model, loss, scale })
            }
        }
    }

    /// Adam's state as a checkpoint stores it (the same format either way).
    pub fn optimizer_bytes(&self, run_dir: &Path) -> Result<Vec<u8>> {
        match self {
            Stepper::Eager(optimizer) => checkpoint::optimizer_bytes(optimizer, run_dir),
            Stepper::Graph(trainer) => trainer.adam.to_record_bytes(),
        }
    }

    /// What the graphs did, for the run's last lines: none for eager steps.
    pub fn report(&self, ranks: usize, accum: usize) -> Option<String> {
        let Stepper::Graph(trainer) = self else {
            return None;
        };
        let GraphCounts {
            eager,
            captured,
            replayed,
        } = trainer.counts;
        Some(match &trainer.fallback {
            Some(why) => format!("graph: {eager} eager steps: {why}"),
            None if ranks > 1 => format!(
                "graph: {captured} graphs captured (each batch shape's gradients, the pack and the update), {replayed} runs replayed, {eager} eager (on each of {ranks} ranks: {accum} batch{}, the pack, the exchange and an update a step)",
                if accum == 1 { "" } else { "es" }
            ),
            None if accum > 1 => format!(
                "graph: {captured} graphs captured (each batch shape's gradients, and the update), {replayed} runs replayed, {eager} eager ({accum} batches and an update a step)"
            ),
            None => {
                format!(
                    "graph: {captured} shapes captured, {replayed} steps replayed, {eager} eager"
                )
            }
        })
    }
}
