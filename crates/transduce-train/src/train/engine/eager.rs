//! The eager optimizer step as `train` takes it without graphs: the forward and backward
//! passes of a group of batches (one after another with `--accum`; a rank's share of them
//! in a data-parallel job), then burn's Adam, with half precision's loss scale kept on the host.

use transduce::Precision;
use transduce::Transformer;
use transduce::burn::optim::{GradientsAccumulator, GradientsParams, ModuleOptimizer};
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::train::loss;

use super::loss_scale::{self, LossScale};
use crate::data::batch::Batch;
use crate::distributed::Collective;
use crate::distributed::reduce::{self, StepSums};
use crate::error::{Error, Result};
use crate::rng;
use crate::train::batches::{Examples, batch_tensors};
use crate::train::read::read_scalars;

/// What one step's forward and backward passes give.
struct StepGradients {
    /// Summed over this process's batches of the step.
    pub grads: GradientsParams,
    /// The step's loss, on the device and not yet read ([`read_scalars`] reads many
    /// steps' at once: a read per step would stop the host from running ahead).
    pub loss: StepLoss,
    /// Every gradient finite: false only in half precision, where the step is skipped.
    pub finite: bool,
}

/// A step's loss sums, one-element vectors on the main device.
#[derive(Clone)]
pub struct StepLoss {
    /// The smoothed loss, summed over the group's batches (per target token).
    pub smoothed: Tensor<1>,
    /// −log p(target) summed over the group's target tokens.
    pub nll: Tensor<1>,
}

impl StepLoss {
    /// Adds another batch's sums.
    fn add(self, other: StepLoss) -> StepLoss {
        StepLoss {
            smoothed: self.smoothed + other.smoothed,
            nll: self.nll + other.nll,
        }
    }
}

/// Forward and backward passes of one step. The loss is summed over `group` and divided
/// by its target tokens, so the update is the same whether the batches run one after
/// another (`--accum`) or side by side on the ranks of a data-parallel job, one process a
/// device: batch j goes to rank j mod N, as the paper's 8 GPUs each took a share of every
/// batch (§5.2). With a `loss_scale` (half
/// precision, [`loss_scale`]) the loss is scaled before the backward pass and the gradients
/// unscaled and checked after it.
fn gradients(
    model: &Transformer,
    work: &StepWork<'_>,
    loss_scale: Option<f64>,
) -> Result<StepGradients> {
    let &StepWork {
        device,
        group,
        examples,
        group_tokens,
        epsilon,
        seed: step_seed,
        collective,
    } = work;
    // Dropout masks depend on (seed, step, the batch's place in the group) only: resuming
    // reproduces them, and so does a batch taken by another device or rank.
    let ranked = collective.is_some();
    let pass = |model: &Transformer, device: &Device, batches: &[(usize, &Batch)]| {
        let mut accumulator = GradientsAccumulator::<Transformer>::new();
        let mut sums: Option<StepLoss> = None;
        for &(j, batch) in batches {
            device.seed(rng::batch_seed(step_seed, j));
            let (logits, tgt_out) = batch_tensors(
                examples.pairs,
                batch,
                examples.focus,
                examples.shape(batch),
                device,
            )?
            .logits(model);
            let batch_sums = loss::label_smoothed(logits, tgt_out, epsilon, model.fused());
            let loss = batch_sums.smoothed.div_scalar(group_tokens as f64);
            let scaled = match loss_scale {
                Some(scale) if scale != 1.0 => loss.clone().mul_scalar(scale),
                _ => loss.clone(),
            };
            let batch_loss = StepLoss {
                smoothed: loss.detach(),
                nll: batch_sums.nll.detach(),
            };
            let grads = GradientsParams::from_grads(scaled.backward(), model);
            accumulator.accumulate(model, grads);
            sums = Some(match sums {
                Some(s) => s.add(batch_loss),
                None => batch_loss,
            });
        }
        // A rank whose share of a short last group is empty adds nothing.
        let sums = match sums {
            Some(sums) => sums,
            None if ranked => StepLoss {
                smoothed: Tensor::zeros([1], device),
                nll: Tensor::zeros([1], device),
            },
            None => return Err(Error::Usage("a training step with no batch".into())),
        };
        let grads = accumulator.grads();
        let (grads, finite) = match loss_scale {
            Some(scale) => loss_scale::unscale(grads, model, 1.0 / scale)?,
            None => (grads, true),
        };
        Ok::<_, Error>((grads, sums, finite))
    };
    let indexed: Vec<(usize, &Batch)> = group.iter().copied().enumerate().collect();
    // A rank of a data-parallel job takes batches j ≡ rank (mod world) of the group.
    let (rank, world) = collective.map_or((0, 1), |c| (c.rank(), c.world()));
    let share: Vec<(usize, &Batch)> = indexed.into_iter().skip(rank).step_by(world).collect();
    let (grads, loss, finite) = pass(model, device, &share)?;
    Ok(StepGradients {
        grads,
        loss,
        finite,
    })
}

/// The work of one optimizer step: its batches, where they run and what they need.
#[derive(Clone, Copy)]
pub struct StepWork<'a> {
    /// The training device (autodiff).
    pub device: &'a Device,
    /// The step's batches: `accum` per rank.
    pub group: &'a [&'a Batch],
    pub examples: Examples<'a>,
    /// Target tokens of the whole group: the loss is averaged over them.
    pub group_tokens: usize,
    /// Label smoothing (§5.4).
    pub epsilon: f64,
    /// Dropout's seed for this step ([`crate::rng::step_seed`]).
    pub seed: u64,
    /// The ranks of a data-parallel job, each taking its share of `group` on its one
    /// device and summing the gradients with the others' ([`crate::distributed`]).
    pub collective: Option<&'a dyn Collective>,
}

/// One optimizer step (§5.3) as `train` takes it: the gradients of `work`, then Adam at
/// `lr`, unless a half-precision step overflowed (then the step is skipped and the loss
/// scale backs off). Nothing is read from the device in f32; the loss comes back unread.
pub fn optimizer_step(
    model: Transformer,
    optimizer: &mut ModuleOptimizer,
    work: &StepWork<'_>,
    lr: f64,
    precision: Precision,
    loss_scale: &mut Option<LossScale>,
) -> Result<(Transformer, StepLoss)> {
    optimizer_step_between(model, optimizer, work, lr, precision, loss_scale, || {})
}

/// [`optimizer_step`], calling `between` after the forward and backward passes are issued
/// and before the optimizer's update is (`bench` syncs there to count each phase's
/// launches).
pub fn optimizer_step_between(
    model: Transformer,
    optimizer: &mut ModuleOptimizer,
    work: &StepWork<'_>,
    lr: f64,
    precision: Precision,
    loss_scale: &mut Option<LossScale>,
    between: impl FnOnce(),
) -> Result<(Transformer, StepLoss)> {
    let StepGradients {
        grads,
        loss,
        finite,
    } = gradients(&model, work, loss_scale.as_ref().map(|s| s.scale))?;
    between();
    let (grads, loss, finite) = match work.collective {
        Some(collective) => all_reduce(collective, &model, grads, loss, finite, work.device)?,
        None => (grads, loss, finite),
    };
    let model = match finite {
        false => model,
        true => optimizer.step(lr, model, grads),
    };
    if let Some(scale) = loss_scale.as_mut() {
        scale.update(precision, finite);
    }
    Ok((model, loss))
}

/// This rank's gradients, loss sums and finite flag summed with the other ranks' (one
/// host all-reduce, [`reduce::all_reduce`]); the loss comes back as device values again.
fn all_reduce(
    collective: &dyn Collective,
    model: &Transformer,
    grads: GradientsParams,
    loss: StepLoss,
    finite: bool,
    device: &Device,
) -> Result<(GradientsParams, StepLoss, bool)> {
    // f32 sums read as f64 and back: exact.
    let sums = read_scalars(vec![loss.smoothed, loss.nll])?;
    let mine = StepSums {
        grads,
        loss: [sums[0] as f32, sums[1] as f32],
        finite,
    };
    let inner = device.clone().inner();
    let sums = reduce::all_reduce(collective, model, mine, &inner)?;
    let value = |v: f32| Tensor::<1>::from_data(TensorData::new(vec![v], [1]), device);
    let loss = StepLoss {
        smoothed: value(sums.loss[0]),
        nll: value(sums.loss[1]),
    };
    Ok((sums.grads, loss, sums.finite))
}
