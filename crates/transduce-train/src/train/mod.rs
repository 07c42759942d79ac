//! The training regime of §5: token-bucketed batches, Adam (β1 0.9, β2 0.98, ε 1e-9) with
//! the warm-up schedule, residual/embedding dropout, label smoothing; plus checkpoints,
//! exact resume, validation perplexity and a JSON-lines log.

pub mod adam_kernel;
pub mod census;
pub mod checkpoint;
pub mod device_dropout;
pub mod graph;
pub mod precision;
pub mod rng;
pub mod start;

// The loss, its GPU kernel and the schedule live in the model crate, shared with adaptation
// in the browser.
pub use transduce::train::{TeacherForced, adam, loss, schedule};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use transduce::burn::module::Module;
use transduce::burn::optim::{
    GradientsAccumulator, GradientsParams, ModuleOptimizer, MultiGradientsParams,
};
use transduce::burn::prelude::*;
use transduce::burn::tensor::Transaction;
use transduce::model::token_tensor;
use transduce::task::focus::WordFocus;
use transduce::tokenizer::Tokenizer;
use transduce::{ModelConfig, Precision, Transformer};

use crate::data::batch::{Batch, epoch_order, make_batches};
use crate::data::cache::Pairs;
use crate::data::shape::{self, Shapes};
use crate::error::{CliError, Result, io};
use checkpoint::TrainState;
use precision::LossScale;
use schedule::Noam;

/// Settings of a training run; defaults are the paper's (§5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainOptions {
    /// Source (and target) tokens per batch, padding included (§5.1: ~25,000).
    pub max_tokens: usize,
    /// Batches whose gradients are summed before one optimizer step.
    pub accum: usize,
    /// warmup_steps of §5.3.
    pub warmup: u64,
    /// Constant factor on the §5.3 learning rate (1.0 = the paper).
    pub lr_factor: f64,
    /// Stop after this many optimizer steps.
    pub max_steps: Option<u64>,
    /// Stop after this many epochs.
    pub max_epochs: Option<u64>,
    /// Stop after this much training time (minutes, across resumes).
    pub max_minutes: Option<f64>,
    /// Checkpoint every this many minutes (§5.2: 10).
    pub checkpoint_minutes: Option<f64>,
    /// Checkpoint every this many steps.
    pub checkpoint_steps: Option<u64>,
    /// Checkpoints kept (averaging needs the last 5 or 20, §6.1).
    pub keep: usize,
    /// Validate every this many steps (0: only at checkpoints).
    pub valid_every: u64,
    /// Seed of initialization, data order and dropout.
    pub seed: u64,
    /// The type activations are computed in ([`precision`]); weights and Adam stay f32.
    #[serde(default)]
    pub precision: Precision,
    /// Batch shapes: exact (as long as each batch's longest pair) or padded to a few shape
    /// classes, so that a GPU tunes and compiles for a handful of shapes.
    #[serde(default)]
    pub shapes: Shapes,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            max_tokens: 25_000,
            accum: 1,
            warmup: 4000,
            lr_factor: 1.0,
            max_steps: None,
            max_epochs: None,
            max_minutes: None,
            checkpoint_minutes: Some(10.0),
            checkpoint_steps: None,
            keep: 20,
            valid_every: 0,
            seed: 1,
            precision: Precision::F32,
            shapes: Shapes::Exact,
        }
    }
}

/// `run.json`: everything needed to rebuild the model of a run directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    pub model: ModelConfig,
    pub options: TrainOptions,
    /// Prepared data directory the run trains on.
    pub data: PathBuf,
    /// The weights the run started from (`train --init`: continued training or
    /// fine-tuning); none for a run from random weights (§5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<PathBuf>,
}

pub const RUN_FILE: &str = "run.json";
/// Steps between reads of the training loss (`train --log-every`).
pub const LOG_EVERY: usize = 10;
pub const METRICS_FILE: &str = "metrics.jsonl";

impl RunConfig {
    pub fn read(run_dir: &Path) -> Result<RunConfig> {
        let path = run_dir.join(RUN_FILE);
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        serde_json::from_str(&text).map_err(|e| CliError::Format {
            path,
            message: e.to_string(),
        })
    }

    pub fn write(&self, run_dir: &Path) -> Result<()> {
        std::fs::create_dir_all(run_dir).map_err(io(run_dir))?;
        let json = serde_json::to_string_pretty(self).expect("run config serializes");
        crate::fsutil::write_atomic(&run_dir.join(RUN_FILE), json.as_bytes())
    }
}

/// The word-focus rule a model needs (from its vocabulary), `None` for other models.
pub fn focus_rule(config: &ModelConfig, tokenizer: &Tokenizer) -> Result<Option<WordFocus>> {
    if !config.word_focus {
        return Ok(None);
    }
    WordFocus::from_vocab(&tokenizer.id_strings(config.vocab_size))
        .map(Some)
        .ok_or_else(|| {
            CliError::Usage(
                "word focus needs a parsing vocabulary (one with the XX slot token): \
                 prepare the data with --task parse"
                    .into(),
            )
        })
}

/// Training pairs with the word-focus rule their model needs, if any.
#[derive(Clone, Copy)]
pub struct Examples<'a> {
    pub pairs: &'a Pairs,
    pub focus: Option<&'a WordFocus>,
    /// `Some(max_tokens)`: each batch padded to its shape class under this budget
    /// ([`crate::data::shape`]).
    pub classes: Option<usize>,
}

impl Examples<'_> {
    /// The padded shape a batch trains in, if batches are shaped by class.
    fn shape(&self, batch: &Batch) -> Option<(usize, usize)> {
        let pairs = self.pairs;
        self.classes.map(|budget| {
            shape::batch_shape(
                |i| pairs.src[i].len(),
                |i| pairs.tgt[i].len(),
                batch,
                budget,
            )
        })
    }
}

/// One batch on the device: source, decoder inputs (BOS + target), outputs (target + EOS)
/// and, for word-focus models, the focus of every decoder input.
pub struct BatchTensors {
    pub src: Tensor<2, Int>,
    pub tgt_in: Tensor<2, Int>,
    pub tgt_out: Tensor<2, Int>,
    pub focus: Option<Tensor<2, Int>>,
}

impl BatchTensors {
    /// The teacher-forced logits of the batch.
    pub fn logits(self, model: &Transformer) -> (Tensor<3>, Tensor<2, Int>) {
        (
            model.forward_focused(self.src, self.tgt_in, self.focus),
            self.tgt_out,
        )
    }
}

/// The tensors of a batch; `focus` for word-focus models; `shape`: padded to these rows
/// and length ([`shape::pad_to_shape`]).
pub fn batch_tensors(
    pairs: &Pairs,
    batch: &Batch,
    focus: Option<&WordFocus>,
    shape: Option<(usize, usize)>,
    device: &Device,
) -> Result<BatchTensors> {
    let forced = teacher_forced(pairs, batch);
    let (src, tgt_in, tgt_out) = match shape {
        Some(shape) => shape::pad_to_shape(forced, shape),
        None => forced,
    };
    Ok(BatchTensors {
        focus: focus.map(|rule| rule.tensor(&src, &tgt_in, device)),
        src: token_tensor(&src, device)?,
        tgt_in: token_tensor(&tgt_in, device)?,
        tgt_out: token_tensor(&tgt_out, device)?,
    })
}

/// The token ids a batch trains on ([`transduce::train::teacher_forced`], shared with
/// adaptation in the browser).
pub fn teacher_forced(pairs: &Pairs, batch: &Batch) -> TeacherForced {
    transduce::train::teacher_forced(
        batch
            .iter()
            .map(|&i| (&pairs.src[i][..], &pairs.tgt[i][..])),
    )
}

/// Target tokens (EOS included) of a batch: what the loss is averaged over.
fn target_tokens(pairs: &Pairs, batch: &Batch) -> usize {
    batch.iter().map(|&i| pairs.tgt[i].len() + 1).sum()
}

/// The error of a failed read of device values.
fn read_failed(e: impl std::fmt::Debug) -> CliError {
    CliError::Usage(format!("device read failed: {e:?}"))
}

/// A vector's values, read back to the host (one blocking read).
fn values(t: Tensor<1>) -> Result<Vec<f64>> {
    census::note_read();
    t.into_data().try_into_vec_as::<f64>().map_err(read_failed)
}

/// The first value of each vector, read back together in one transaction (one blocking
/// read however many there are).
pub fn read_scalars(tensors: Vec<Tensor<1>>) -> Result<Vec<f64>> {
    if tensors.is_empty() {
        return Ok(Vec::new());
    }
    census::note_read();
    // A transaction reads tensors of one kind: autodiff-wrapped and plain ones (a loss
    // computed on the inner backend) cannot be mixed, so all are unwrapped.
    let transaction = tensors.into_iter().fold(Transaction::default(), |t, x| {
        t.register(x.inner().slice(0..1))
    });
    let data = transaction.try_execute().map_err(read_failed)?;
    data.into_iter()
        .map(|d| {
            d.try_into_vec_as::<f64>()
                .map(|v| v[0])
                .map_err(read_failed)
        })
        .collect()
}

/// Mean NLL per target wordpiece over a data set, without dropout or smoothing: the
/// perplexity the paper reports (Table 3) is its exponential.
pub fn evaluate_nll(
    model: &Transformer,
    pairs: &Pairs,
    focus: Option<&WordFocus>,
    max_tokens: usize,
    shapes: Shapes,
) -> Result<f64> {
    let device = model.device();
    let src_lens: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
    let tgt_lens: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
    let examples = Examples {
        pairs,
        focus,
        classes: shapes.classes(max_tokens),
    };
    let (mut sums, mut tokens) = (Vec::new(), 0usize);
    for batch in shapes.batches(&src_lens, &tgt_lens, max_tokens) {
        let (logits, tgt_out) =
            batch_tensors(pairs, &batch, focus, examples.shape(&batch), &device)?.logits(model);
        sums.push(loss::label_smoothed(logits, tgt_out, 0.0).nll);
        tokens += target_tokens(pairs, &batch);
    }
    // Every batch's sum in one read.
    let total: f64 = read_scalars(sums)?.iter().sum();
    Ok(total / tokens.max(1) as f64)
}

/// log p(target | source) of every pair (natural log, EOS included), in the pairs' order,
/// batched by length as [`evaluate_nll`] batches them: what `transduce score` writes.
pub fn sentence_log_probs(
    model: &Transformer,
    pairs: &Pairs,
    focus: Option<&WordFocus>,
    max_tokens: usize,
) -> Result<Vec<f64>> {
    let device = model.device();
    let src_lens: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
    let tgt_lens: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
    let mut out = vec![0.0; pairs.len()];
    for batch in make_batches(&src_lens, &tgt_lens, max_tokens) {
        let (logits, tgt_out) = batch_tensors(pairs, &batch, focus, None, &device)?.logits(model);
        let sums = values(loss::row_log_probs(logits, tgt_out))?;
        for (&i, sum) in batch.iter().zip(sums) {
            out[i] = sum;
        }
    }
    Ok(out)
}

/// The gradients of one optimizer step: summed over batches on one device, or, from
/// several devices, one set per device for burn's `step_multi` to add up.
enum Grads {
    One(GradientsParams),
    Multi(MultiGradientsParams),
}

/// What one step's forward and backward passes give.
struct StepGradients {
    pub grads: Grads,
    /// The step's loss, on the main device and not yet read ([`read_scalars`] reads many
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
    /// Adds another device's share, brought to `device`.
    fn add(self, other: StepLoss, device: &Device) -> StepLoss {
        StepLoss {
            smoothed: self.smoothed + other.smoothed.to_device(device),
            nll: self.nll + other.nll.to_device(device),
        }
    }
}

/// Forward and backward passes of one step. The loss is summed over `group` and divided
/// by its target tokens, so the update is the same whether the batches run one after
/// another (`--accum`) or side by side on several devices (`--devices`): batch j goes to
/// device j mod N, each device in its own thread with its own copy of the model, as the
/// paper's 8 GPUs each took a share of every batch (§5.2). With a `loss_scale` (half
/// precision, [`precision`]) the loss is scaled before the backward pass and the gradients
/// unscaled and checked after it.
fn gradients(
    model: &Transformer,
    work: &StepWork<'_>,
    loss_scale: Option<f64>,
) -> Result<StepGradients> {
    let &StepWork {
        devices,
        group,
        examples,
        group_tokens,
        epsilon,
        seed: step_seed,
    } = work;
    // Dropout masks depend on (seed, step, device) only: resuming reproduces them.
    let pass = |model: &Transformer, device: &Device, batches: &[&Batch], seed: u64| {
        device.seed(seed);
        let mut accumulator = GradientsAccumulator::<Transformer>::new();
        let mut sums: Option<StepLoss> = None;
        for batch in batches {
            let (logits, tgt_out) = batch_tensors(
                examples.pairs,
                batch,
                examples.focus,
                examples.shape(batch),
                device,
            )?
            .logits(model);
            let batch_sums = loss::label_smoothed(logits, tgt_out, epsilon);
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
                Some(s) => s.add(batch_loss, device),
                None => batch_loss,
            });
        }
        let sums = sums.ok_or_else(|| CliError::Usage("a training step with no batch".into()))?;
        let grads = accumulator.grads();
        let (grads, finite) = match loss_scale {
            Some(scale) => precision::unscale(grads, model, 1.0 / scale)?,
            None => (grads, true),
        };
        Ok::<_, CliError>((grads, sums, finite))
    };
    if devices.len() == 1 {
        let (grads, loss, finite) = pass(model, &devices[0], group, step_seed)?;
        return Ok(StepGradients {
            grads: Grads::One(grads),
            loss,
            finite,
        });
    }
    let shares: Vec<Vec<&Batch>> = (0..devices.len())
        .map(|d| {
            group
                .iter()
                .skip(d)
                .step_by(devices.len())
                .copied()
                .collect()
        })
        .collect();
    let replicas: Vec<Transformer> = devices
        .iter()
        .enumerate()
        .map(|(d, device)| match d {
            0 => model.clone(),
            _ => model.clone().fork(device),
        })
        .collect();
    let results = std::thread::scope(|scope| {
        let workers: Vec<_> = replicas
            .into_iter()
            .zip(devices)
            .zip(&shares)
            .enumerate()
            .map(|(d, ((replica, device), share))| {
                let pass = &pass;
                scope.spawn(move || pass(&replica, device, share, step_seed.wrapping_add(d as u64)))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join().unwrap_or_else(|_| {
                    Err(CliError::Usage("a training device's thread failed".into()))
                })
            })
            .collect::<Vec<_>>()
    });
    let mut multi = MultiGradientsParams::default();
    let (mut loss, mut all_finite) = (None::<StepLoss>, true);
    for (result, device) in results.into_iter().zip(devices) {
        let (grads, sums, finite) = result?;
        multi.grads.push((grads, device.clone()));
        loss = Some(match loss {
            Some(l) => l.add(sums, &devices[0]),
            None => sums,
        });
        all_finite &= finite;
    }
    Ok(StepGradients {
        grads: Grads::Multi(multi),
        loss: loss.ok_or_else(|| CliError::Usage("a training step with no batch".into()))?,
        finite: all_finite,
    })
}

/// The work of one optimizer step: its batches, where they run and what they need.
#[derive(Clone, Copy)]
pub struct StepWork<'a> {
    /// Training devices (autodiff), the first the main one.
    pub devices: &'a [Device],
    /// The step's batches: `accum` per device.
    pub group: &'a [&'a Batch],
    pub examples: Examples<'a>,
    /// Target tokens of the whole group: the loss is averaged over them.
    pub group_tokens: usize,
    /// Label smoothing (§5.4).
    pub epsilon: f64,
    /// Dropout's seed for this step ([`rng::step_seed`]).
    pub seed: u64,
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
    let model = match (finite, grads) {
        (false, _) => model,
        (true, Grads::One(grads)) => optimizer.step(lr, model, grads),
        // burn updates each parameter on one of the devices; the model comes back to the
        // main device for the next step, validation and checkpoints.
        (true, Grads::Multi(grads)) => optimizer
            .step_multi(lr, model, grads)
            .fork(&work.devices[0]),
    };
    if let Some(scale) = loss_scale.as_mut() {
        scale.update(precision, finite);
    }
    Ok((model, loss))
}

/// What `train` reports when it stops.
#[derive(Clone, Debug)]
pub struct Summary {
    pub state: TrainState,
    pub last_checkpoint: Option<PathBuf>,
    pub valid_nll: Option<f64>,
}

/// Everything a run needs besides its folder.
pub struct Trainer<'a> {
    pub run_dir: &'a Path,
    pub config: RunConfig,
    pub train: &'a Pairs,
    pub valid: Option<&'a Pairs>,
    /// The word-focus rule, for models with `word_focus` ([`focus_rule`]).
    pub focus: Option<WordFocus>,
    /// Training devices; the first holds the model between steps, validates and saves.
    /// With several, each step is data-parallel over `accum × devices.len()` batches.
    pub devices: Vec<Device>,
    /// Continue from the newest checkpoint.
    pub resume: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Read the losses back every this many steps, all in one transaction (and before
    /// every validation, checkpoint and stop).
    pub log_every: usize,
    /// Steps captured as graphs and replayed where the run allows it ([`graph`]).
    pub graph: bool,
}

/// How a run takes its optimizer steps.
enum Stepper {
    /// burn's Adam over eager steps ([`optimizer_step`]).
    Eager(ModuleOptimizer),
    /// Captured and replayed steps with the device-scalar Adam.
    Graph(Box<graph::GraphTrainer>),
}

impl Stepper {
    /// Adam's state as a checkpoint stores it (the same format either way).
    fn optimizer_bytes(&self, run_dir: &Path) -> Result<Vec<u8>> {
        match self {
            Stepper::Eager(optimizer) => checkpoint::optimizer_bytes(optimizer, run_dir),
            Stepper::Graph(trainer) => trainer.adam.to_record_bytes(),
        }
    }
}

/// Why a run's steps cannot be captured as graphs, if they cannot.
/// `--accum` is captured (each batch's gradients, then the update); `--devices` is not: its
/// devices exchange gradients through the host every step.
fn graph_refusal(model: &Transformer, device: &Device, devices: usize) -> Option<String> {
    if devices > 1 {
        return Some(
            "--devices exchanges gradients between devices through the host every step; graphs run on one device"
                .into(),
        );
    }
    graph::uncapturable(model, graph::is_cpu(device))
}

/// A step whose loss is still on the device: its `metrics.jsonl` record waits for it.
struct PendingStep {
    record: serde_json::Value,
    loss: StepLoss,
    tokens: usize,
    /// A graph step's loss scale after it, on the device: scale, clean steps, skipped
    /// steps (an eager step's is known on the host and already in `record`).
    scale: Option<[Tensor<1>; 3]>,
}

/// Steps not yet logged. Reading each step's loss as it comes would make the host wait
/// for the device every step; read together, the host runs up to `log_every` steps ahead.
#[derive(Default)]
struct PendingSteps(Vec<PendingStep>);

impl PendingSteps {
    fn push(&mut self, step: PendingStep) {
        self.0.push(step);
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    /// Reads every pending loss in one transaction and appends the steps' records. A
    /// graph step's loss scale comes back in the same read, into its record and into
    /// `loss_scale` (what a checkpoint saves).
    fn flush(
        &mut self,
        bar: &ProgressBar,
        metrics: &mut std::fs::File,
        metrics_path: &Path,
        loss_scale: &mut Option<LossScale>,
    ) -> Result<()> {
        let steps = std::mem::take(&mut self.0);
        let mut tensors = Vec::new();
        for step in &steps {
            tensors.extend([step.loss.smoothed.clone(), step.loss.nll.clone()]);
            tensors.extend(step.scale.iter().flatten().cloned());
        }
        let values = read_scalars(tensors)?;
        let mut values = values.into_iter();
        let mut lines = String::new();
        for step in steps {
            let mut next = || values.next().unwrap_or(f64::NAN);
            let (loss, nll) = (next(), next());
            let ppl = (nll / step.tokens as f64).exp();
            let mut record = step.record;
            if step.scale.is_some() {
                let (scale, clean, skipped) = (next(), next(), next());
                let state = LossScale {
                    scale,
                    clean_steps: clean as u64,
                    skipped: skipped as u64,
                };
                record["loss_scale"] = state.scale.into();
                record["skipped_steps"] = state.skipped.into();
                *loss_scale = Some(state);
            }
            record["loss"] = loss.into();
            record["ppl"] = ppl.into();
            bar.set_position(record["step"].as_u64().unwrap_or(0));
            bar.set_message(format!(
                "loss {loss:.3} ppl {ppl:.2} lr {:.2e} {:.0} tok/s epoch {}",
                record["lr"].as_f64().unwrap_or(0.0),
                record["tokens_per_sec"].as_f64().unwrap_or(0.0),
                record["epoch"]
            ));
            lines.push_str(&record.to_string());
            lines.push('\n');
        }
        metrics
            .write_all(lines.as_bytes())
            .map_err(io(metrics_path))
    }
}

impl Trainer<'_> {
    /// Trains until a stop condition; checkpoints on the way and at the end.
    pub fn run(self) -> Result<Summary> {
        let mut watch = start::StartWatch::begin();
        let options = &self.config.options;
        precision::check(options.precision, &self.devices)?;
        let devices: Vec<Device> = self.devices.iter().map(|d| d.clone().autodiff()).collect();
        let device = devices
            .first()
            .cloned()
            .ok_or_else(|| CliError::Usage("no training device".into()))?;
        self.config.write(self.run_dir)?;

        let (model, optimizer, mut state) = match (
            self.resume,
            checkpoint::list(self.run_dir)?.pop(),
        ) {
            (true, Some((_, latest))) => {
                let state = checkpoint::read_state(&latest)?;
                let model = checkpoint::load_model(&latest, &self.config.model, &device)?;
                let optimizer = checkpoint::load_optimizer(&latest, adam())?;
                eprintln!("resuming from {} (step {})", latest.display(), state.step);
                (model, optimizer, state)
            }
            (true, None) => {
                return Err(CliError::Usage(format!(
                    "--resume: no checkpoint in {}",
                    self.run_dir.join("checkpoints").display()
                )));
            }
            (false, _) => {
                if !checkpoint::list(self.run_dir)?.is_empty() {
                    return Err(CliError::Usage(format!(
                        "{} already holds checkpoints: pass --resume to continue it, or choose a new --out",
                        self.run_dir.display()
                    )));
                }
                device.seed(options.seed);
                let model = match &self.config.init {
                    Some(weights) => {
                        eprintln!("starting from the weights in {}", weights.display());
                        checkpoint::load_weights_file(weights, &self.config.model, &device)?
                    }
                    None => Transformer::new(&self.config.model, &device)?,
                };
                (model, adam(), TrainState::default())
            }
        };
        let model = model.with_precision(options.precision);
        if state.loss_scale.is_none() {
            state.loss_scale = LossScale::initial(options.precision);
        }
        let mut stepper = match self.graph {
            false => Stepper::Eager(optimizer),
            true => match graph_refusal(&model, &device, devices.len()) {
                Some(why) => {
                    eprintln!("graph: eager steps: {why}");
                    Stepper::Eager(optimizer)
                }
                None => {
                    // The state restored (or empty), in the one checkpoint format.
                    let bytes = checkpoint::optimizer_bytes(&optimizer, self.run_dir)?;
                    let mut adam = graph::DeviceAdam::from_record_bytes(bytes, &device, 1024)?;
                    if let Some(scale) = &state.loss_scale {
                        adam = adam.with_loss_scale(scale, options.precision);
                    }
                    Stepper::Graph(Box::new(
                        graph::GraphTrainer::new(&device, adam, self.config.model.label_smoothing)
                            .with_seed(options.seed),
                    ))
                }
            },
        };

        let src_lens: Vec<usize> = self.train.src.iter().map(Vec::len).collect();
        let tgt_lens: Vec<usize> = self.train.tgt.iter().map(Vec::len).collect();
        let batches = options
            .shapes
            .batches(&src_lens, &tgt_lens, options.max_tokens);
        let classes = options.shapes.classes(options.max_tokens);
        eprintln!(
            "batches ({:?} shapes): {}",
            options.shapes,
            shape::Padding::of(&batches, &src_lens, &tgt_lens, classes)
        );
        let noam = Noam {
            d_model: self.config.model.d_model,
            warmup: options.warmup,
            factor: options.lr_factor,
        };
        let epsilon = self.config.model.label_smoothing;
        let metrics_path = self.run_dir.join(METRICS_FILE);
        let mut metrics = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&metrics_path)
            .map_err(io(&metrics_path))?;

        let mut model = model;
        let bar = if self.progress {
            let bar = match options.max_steps {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::no_length(),
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] step {pos}/{len} eta {eta} {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_position(state.step);
            bar
        } else {
            ProgressBar::hidden()
        };

        let started = Instant::now();
        let base_elapsed = state.elapsed_secs;
        let mut last_checkpoint_time = Instant::now();
        let mut last_checkpoint = None;
        let mut valid_nll = None;
        let mut window = (Instant::now(), 0u64);
        let mut order = epoch_order(batches.len(), options.seed, state.epoch);
        let mut pending = PendingSteps::default();
        let log_every = self.log_every.max(1);
        watch.loaded();

        loop {
            let elapsed = base_elapsed + started.elapsed().as_secs_f64();
            let stop = options.max_steps.is_some_and(|n| state.step >= n)
                || options.max_epochs.is_some_and(|n| state.epoch >= n)
                || options.max_minutes.is_some_and(|m| elapsed >= m * 60.0);
            if stop {
                break;
            }
            if state.cursor >= batches.len() {
                state.epoch += 1;
                state.cursor = 0;
                order = epoch_order(batches.len(), options.seed, state.epoch);
                continue;
            }

            // One optimizer step over `accum` batches per device.
            let group: Vec<&Batch> = order[state.cursor..]
                .iter()
                .take(options.accum.max(1) * devices.len())
                .map(|&b| &batches[b])
                .collect();
            let group_tokens: usize = group.iter().map(|b| target_tokens(self.train, b)).sum();
            let lr = noam.lr(state.step + 1);
            let work = StepWork {
                devices: &devices,
                group: &group,
                examples: Examples {
                    pairs: self.train,
                    focus: self.focus.as_ref(),
                    classes,
                },
                group_tokens,
                epsilon,
                seed: rng::step_seed(options.seed, state.step),
            };
            let (next, loss, scale) = match &mut stepper {
                Stepper::Eager(optimizer) => {
                    let (next, loss) = optimizer_step(
                        model,
                        optimizer,
                        &work,
                        lr,
                        options.precision,
                        &mut state.loss_scale,
                    )?;
                    (next, loss, None)
                }
                Stepper::Graph(trainer) => {
                    let forced: Vec<TeacherForced> = group
                        .iter()
                        .map(|&batch| {
                            let forced = teacher_forced(self.train, batch);
                            match work.examples.shape(batch) {
                                Some(shape) => shape::pad_to_shape(forced, shape),
                                None => forced,
                            }
                        })
                        .collect();
                    let (next, sums) =
                        trainer.step_group(model, &forced, group_tokens, state.step + 1, &|t| {
                            noam.lr(t)
                        })?;
                    // `[loss, nll]`, then the loss scale's state in half precision: the
                    // reads take each tensor's first value.
                    let scale = state
                        .loss_scale
                        .is_some()
                        .then(|| [2, 3, 4].map(|i| sums.clone().slice(i..i + 1)));
                    let loss = StepLoss {
                        nll: sums.clone().slice(1..2),
                        smoothed: sums,
                    };
                    (next, loss, scale)
                }
            };
            model = next;
            watch.step();
            state.step += 1;
            state.cursor += group.len();
            state.tokens += group_tokens as u64;
            window.1 += group_tokens as u64;
            let tokens_per_sec = window.1 as f64 / window.0.elapsed().as_secs_f64().max(1e-9);
            if window.0.elapsed().as_secs_f64() > 30.0 {
                window = (Instant::now(), 0);
            }
            let mut record = serde_json::json!({
                "step": state.step, "epoch": state.epoch, "lr": lr, "tokens": state.tokens,
                "tokens_per_sec": tokens_per_sec,
                "elapsed_secs": base_elapsed + started.elapsed().as_secs_f64(),
            });
            if let Some(scale) = &state.loss_scale {
                record["loss_scale"] = scale.scale.into();
                record["skipped_steps"] = scale.skipped.into();
            }
            pending.push(PendingStep {
                record,
                loss,
                tokens: group_tokens,
                scale,
            });

            let validate_now = options.valid_every > 0 && state.step % options.valid_every == 0;
            let checkpoint_now = options
                .checkpoint_steps
                .is_some_and(|n| state.step % n == 0)
                || options
                    .checkpoint_minutes
                    .is_some_and(|m| last_checkpoint_time.elapsed().as_secs_f64() >= m * 60.0);
            if pending.len() >= log_every || validate_now || checkpoint_now {
                pending.flush(&bar, &mut metrics, &metrics_path, &mut state.loss_scale)?;
            }
            if validate_now || checkpoint_now {
                valid_nll = self.validate(&model, &bar, &mut metrics, &metrics_path, &state)?;
            }
            if checkpoint_now {
                state.elapsed_secs = base_elapsed + started.elapsed().as_secs_f64();
                last_checkpoint = Some(self.save(&model, &stepper, &state)?);
                last_checkpoint_time = Instant::now();
            }
        }
        pending.flush(&bar, &mut metrics, &metrics_path, &mut state.loss_scale)?;
        let start_report = watch.report();
        state.elapsed_secs = base_elapsed + started.elapsed().as_secs_f64();
        let already_saved = last_checkpoint
            .as_ref()
            .is_some_and(|p: &PathBuf| p.ends_with(format!("step-{:08}", state.step)));
        if !already_saved {
            valid_nll = self.validate(&model, &bar, &mut metrics, &metrics_path, &state)?;
            last_checkpoint = Some(self.save(&model, &stepper, &state)?);
        }
        bar.finish_and_clear();
        if let Stepper::Graph(trainer) = &stepper {
            let graph::GraphCounts {
                eager,
                captured,
                replayed,
            } = trainer.counts;
            match &trainer.fallback {
                Some(why) => eprintln!("graph: {eager} eager steps: {why}"),
                None if options.accum > 1 => eprintln!(
                    "graph: {captured} graphs captured (each batch shape's gradients, and the update), {replayed} runs replayed, {eager} eager ({} batches and an update a step)",
                    options.accum
                ),
                None => eprintln!(
                    "graph: {captured} shapes captured, {replayed} steps replayed, {eager} eager"
                ),
            }
        }
        eprintln!("start: {start_report}");
        Ok(Summary {
            state,
            last_checkpoint,
            valid_nll,
        })
    }

    fn save(&self, model: &Transformer, stepper: &Stepper, state: &TrainState) -> Result<PathBuf> {
        checkpoint::save(
            self.run_dir,
            model,
            &stepper.optimizer_bytes(self.run_dir)?,
            state,
            self.config.options.keep,
        )
    }

    fn validate(
        &self,
        model: &Transformer,
        bar: &ProgressBar,
        metrics: &mut std::fs::File,
        metrics_path: &Path,
        state: &TrainState,
    ) -> Result<Option<f64>> {
        let Some(valid) = self.valid else {
            return Ok(None);
        };
        let nll = evaluate_nll(
            &model.valid(),
            valid,
            self.focus.as_ref(),
            self.config.options.max_tokens,
            self.config.options.shapes,
        )?;
        bar.println(format!(
            "step {}: validation loss {nll:.4}, perplexity {:.3}",
            state.step,
            nll.exp()
        ));
        let record =
            serde_json::json!({"step": state.step, "valid_nll": nll, "valid_ppl": nll.exp()});
        writeln!(metrics, "{record}").map_err(io(metrics_path))?;
        Ok(Some(nll))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transduce::bundle::{WeightDtype, load_weights, save_weights};

    /// A dropout-free tiny model: its config and initial weights, made on the CPU.
    pub(super) fn tiny_start(seed: u64) -> (ModelConfig, Vec<u8>) {
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
    pub(super) fn reversal_pairs(seed: u64, lengths: impl Iterator<Item = usize>) -> Pairs {
        let mut pairs = Pairs::default();
        let mut r = rng::Rng::new(seed);
        for len in lengths {
            let s: Vec<u32> = (0..len).map(|_| 4 + r.below(40) as u32).collect();
            let t: Vec<u32> = s.iter().rev().copied().collect();
            pairs.push(s, t);
        }
        pairs
    }

    /// Losses of `steps` optimizer steps on `group` from the same initial weights, on one
    /// device or data-parallel over several.
    pub(super) fn losses(
        start: &(ModelConfig, Vec<u8>),
        devices: &[Device],
        pairs: &Pairs,
        group: &[&Batch],
        steps: u64,
    ) -> Vec<f64> {
        losses_in(start, devices, pairs, group, steps, Precision::F32)
    }

    /// [`losses`] computed in `precision`, with `train`'s loss scaling.
    pub(super) fn losses_in(
        start: &(ModelConfig, Vec<u8>),
        devices: &[Device],
        pairs: &Pairs,
        group: &[&Batch],
        steps: u64,
        precision: Precision,
    ) -> Vec<f64> {
        losses_shaped(start, devices, pairs, group, steps, precision, None)
    }

    /// [`losses_in`] with each batch padded to its shape class under `classes` tokens.
    pub(super) fn losses_shaped(
        start: &(ModelConfig, Vec<u8>),
        devices: &[Device],
        pairs: &Pairs,
        group: &[&Batch],
        steps: u64,
        precision: Precision,
        classes: Option<usize>,
    ) -> Vec<f64> {
        let scale = LossScale::initial(precision);
        let (losses, skipped): (Vec<f64>, Vec<u64>) = losses_scaled(
            start, devices, pairs, group, steps, precision, classes, scale,
        )
        .into_iter()
        .unzip();
        assert!(skipped.iter().all(|&s| s == 0), "no step may be skipped");
        losses
    }

    /// [`losses_shaped`] from the loss scale `scale`: each step's loss, and the steps
    /// skipped so far after it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn losses_scaled(
        (config, weights): &(ModelConfig, Vec<u8>),
        devices: &[Device],
        pairs: &Pairs,
        group: &[&Batch],
        steps: u64,
        precision: Precision,
        classes: Option<usize>,
        mut scale: Option<LossScale>,
    ) -> Vec<(f64, u64)> {
        let devices: Vec<Device> = devices.iter().map(|d| d.clone().autodiff()).collect();
        let mut model = load_weights(config, weights, &devices[0])
            .unwrap()
            .with_precision(precision);
        let mut optimizer = adam();
        let tokens = group.iter().map(|b| target_tokens(pairs, b)).sum();
        let mut losses = Vec::new();
        let mut skipped = Vec::new();
        for step in 0..steps {
            let work = StepWork {
                devices: &devices,
                group,
                examples: Examples {
                    pairs,
                    focus: None,
                    classes,
                },
                group_tokens: tokens,
                epsilon: 0.1,
                seed: step,
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
        let cpu = [Device::flex()];
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
                devices: std::slice::from_ref(&device),
                group: &[&batch],
                examples: Examples {
                    pairs: &pairs,
                    focus: None,
                    classes: None,
                },
                group_tokens: target_tokens(&pairs, &batch),
                epsilon: 0.1,
                seed: step,
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

    /// Held by every wgpu test of this crate and every test that takes a census: kernel
    /// launches are counted process-wide through one hook, so a test that counts them must
    /// not see another test's kernels, nor have its hook replaced by another census.
    pub(super) fn gpu_lock() -> std::sync::MutexGuard<'static, ()> {
        static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
        GPU.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The wgpu device, or `None` (with the reason printed) where there is no adapter.
    pub(super) fn wgpu_device(test: &str) -> Option<Device> {
        // Initialized once per process and shared: a second initialization fails with
        // "already initialized" (also when another test opened the adapter through the
        // CLI's path), which used to skip the wgpu tests of a full run.
        static DEVICE: std::sync::OnceLock<std::result::Result<Device, String>> =
            std::sync::OnceLock::new();
        let device = DEVICE.get_or_init(|| {
            // Tuning kept where the CLI keeps it, not in cubecl's default `target/environment`.
            crate::gpu_cache::install(crate::backend::Backend::Wgpu);
            let init = || Device::wgpu_options().init();
            match std::panic::catch_unwind(init) {
                Ok(Ok(device)) => Ok(device),
                // Another test of this process opened the default adapter first.
                Ok(Err(e)) if format!("{e:?}").contains("already initialized") => {
                    Ok(Device::wgpu(DeviceKind::DefaultDevice))
                }
                Ok(Err(e)) => Err(format!("{e:?}")),
                Err(_) => Err("initialization panicked".into()),
            }
        });
        match device {
            Ok(device) => Some(device.clone()),
            Err(why) => {
                println!("SKIP: {test}: no wgpu adapter ({why}); install mesa-vulkan-drivers");
                None
            }
        }
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
        let reference = losses(&start, std::slice::from_ref(&wgpu), &pairs, &[&batch], 6);
        assert!(reference[5] < reference[0], "{reference:?}");
        for (precision, tolerance) in [(Precision::F16, 0.01), (Precision::Bf16, 0.03)] {
            if !wgpu.supports_dtype(precision.dtype()) {
                println!(
                    "SKIP: {} on this adapter: no {0} arithmetic",
                    precision.name()
                );
                continue;
            }
            let half = losses_in(
                &start,
                std::slice::from_ref(&wgpu),
                &pairs,
                &[&batch],
                6,
                precision,
            );
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
        let a = losses(&start, &[Device::flex()], &pairs, &[&batch], 4);
        let b = losses(&start, &[wgpu], &pairs, &[&batch], 4);
        for (step, (x, y)) in a.iter().zip(&b).enumerate() {
            assert!(
                (x - y).abs() / x.abs() < 1e-3,
                "step {step}: cpu {x} vs wgpu {y}"
            );
        }
        // Training moved: the losses are not all the same number.
        assert!(a[3] < a[0], "{a:?}");
    }

    /// Data parallelism changes where gradients are computed, not the update: two wgpu
    /// devices (two queues on lavapipe's one adapter when there is no GPU), one batch each,
    /// train like one device accumulating both batches.
    #[test]
    fn data_parallel_equals_accumulation() {
        let _gpu = gpu_lock();
        let devices = match crate::backend::wgpu_devices(&[0, 0]) {
            Ok(devices) => devices,
            Err(e) => {
                println!("SKIP: data_parallel_equals_accumulation: {e}");
                return;
            }
        };
        let start = tiny_start(5);
        let pairs = reversal_pairs(9, (0..12).map(|n| 6 + n % 4));
        let (a, b): (Batch, Batch) = ((0..6).collect(), (6..12).collect());
        // Losses, not weights: Adam turns gradients that are rounding noise (the key
        // projection's bias, to which softmax is blind) into full-size steps of either sign.
        let one = losses(&start, &devices[..1], &pairs, &[&a, &b], 4);
        let two = losses(&start, &devices, &pairs, &[&a, &b], 4);
        assert!(one[3] < one[0], "training moved: {one:?}");
        for (step, (x, y)) in one.iter().zip(&two).enumerate() {
            assert!(
                (x - y).abs() / x < 1e-4,
                "step {step}: one device {x}, two {y}"
            );
        }
    }
}
