//! A training run: the loop of optimizer steps (§5) with its stop conditions, the
//! checkpoints it saves and resumes from ([`checkpoint`]), validation ([`validate`]) and the
//! `metrics.jsonl` records whose losses are read a few steps late ([`pending`]). Each step
//! is taken by the engine ([`crate::train::engine`]): replayed graphs where the run allows
//! them, eager steps otherwise.

pub mod checkpoint;
mod pending;
mod shared_start;
pub mod validate;

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use transduce::Transformer;
use transduce::burn::optim::ModuleOptimizer;
use transduce::burn::prelude::*;
use transduce::ops::is_cpu;
use transduce::task::focus::WordFocus;
use transduce::train::TeacherForced;
use transduce::train::adam;
use transduce::train::schedule::Noam;

use crate::data::batch::{Batch, epoch_order};
use crate::data::cache::Pairs;
use crate::data::shape;
use crate::distributed::{self, Collective};
use crate::error::{Error, Result, io};
use crate::rng;
use crate::train::batches::{Examples, target_tokens, teacher_forced};
use crate::train::config::{METRICS_FILE, RunConfig};
use crate::train::engine::adam::DeviceAdam;
use crate::train::engine::eager::{StepLoss, StepWork, optimizer_step};
use crate::train::engine::loss_scale::{self, LossScale};
use crate::train::engine::replay::{GraphCounts, GraphTrainer, uncapturable};
use crate::train::observe::start_time::StartWatch;
use checkpoint::TrainState;
use pending::{PendingStep, PendingSteps};

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
    /// The word-focus rule, for models with `word_focus` ([`crate::train::config::focus_rule`]).
    pub focus: Option<WordFocus>,
    /// The training device (one per process: several devices are several ranks).
    pub device: Device,
    /// Continue from the newest checkpoint.
    pub resume: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Read the losses back every this many steps, all in one transaction (and before
    /// every validation, checkpoint and stop).
    pub log_every: usize,
    /// Steps captured as graphs and replayed where the run allows it ([`crate::train::engine`]).
    pub graph: bool,
    /// The fused kernels allowed (the default; `--no-fused-layers` turns them off): the
    /// model's norms, attention and loss ([`Transformer::with_fused`]) and the replayed
    /// step's Adam and finite check ([`DeviceAdam::with_fused`]).
    pub fused: bool,
    /// The other ranks of a data-parallel job ([`crate::distributed`]): each step's group
    /// grows to `accum × world` batches, shared out by rank; rank 0 alone validates, logs,
    /// draws progress and saves checkpoints.
    pub collective: Option<&'a dyn Collective>,
}

/// How a run takes its optimizer steps.
enum Stepper {
    /// burn's Adam over eager steps ([`optimizer_step`]).
    Eager(ModuleOptimizer),
    /// Captured and replayed steps with the device-scalar Adam.
    Graph(Box<GraphTrainer>),
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

/// Why a run's steps cannot be captured as graphs, if they cannot. `--accum` is captured
/// (each batch's gradients, then the update), and so are the ranks' steps of a job (their
/// exchange between the two).
fn graph_refusal(model: &Transformer, device: &Device) -> Option<String> {
    uncapturable(model, is_cpu(device))
}

impl Trainer<'_> {
    /// Trains until a stop condition; checkpoints on the way and at the end.
    pub fn run(self) -> Result<Summary> {
        let mut watch = StartWatch::begin();
        let options = &self.config.options;
        loss_scale::check(options.precision, std::slice::from_ref(&self.device))?;
        let device = self.device.clone().autodiff();
        let collective = self.collective;
        let (ranks, lead) = collective.map_or((1, true), |c| (c.world(), c.leads()));
        if lead {
            self.config.write(self.run_dir)?;
        }

        let start = || -> Result<_> {
            Ok(match (self.resume, checkpoint::list(self.run_dir)?.pop()) {
                (true, Some((_, latest))) => {
                    let state = checkpoint::read_state(&latest)?;
                    let model = checkpoint::load_model(&latest, &self.config.model, &device)?;
                    let optimizer = checkpoint::load_optimizer(&latest, adam())?;
                    eprintln!("resuming from {} (step {})", latest.display(), state.step);
                    (model, optimizer, state)
                }
                (true, None) => {
                    return Err(Error::Usage(format!(
                        "--resume: no checkpoint in {}",
                        self.run_dir.join("checkpoints").display()
                    )));
                }
                (false, _) => {
                    if !checkpoint::list(self.run_dir)?.is_empty() {
                        return Err(Error::Usage(format!(
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
            })
        };
        let (model, optimizer, mut state) = match collective {
            // Rank 0 alone reads checkpoints and weights; every rank starts from its bits.
            Some(c) if ranks > 1 => {
                let mine = if lead {
                    start()
                } else {
                    Err(Error::Usage("not read".into()))
                };
                shared_start::broadcast(c, mine, adam(), &self.config.model, &device)?
            }
            _ => start()?,
        };
        let model = model
            .with_precision(options.precision)
            .with_fused(self.fused);
        if state.loss_scale.is_none() {
            state.loss_scale = LossScale::initial(options.precision);
        }
        let mut stepper = match self.graph {
            false => Stepper::Eager(optimizer),
            true => match graph_refusal(&model, &device) {
                Some(why) => {
                    if lead {
                        eprintln!("graph: eager steps: {why}");
                    }
                    Stepper::Eager(optimizer)
                }
                None => {
                    // The state restored (or empty), in the one checkpoint format.
                    let bytes = checkpoint::optimizer_bytes(&optimizer, self.run_dir)?;
                    let mut adam =
                        DeviceAdam::from_record_bytes(bytes, &device, 1024)?.with_fused(self.fused);
                    if let Some(scale) = &state.loss_scale {
                        adam = adam.with_loss_scale(scale, options.precision);
                    }
                    Stepper::Graph(Box::new(
                        GraphTrainer::new(&device, adam, self.config.model.label_smoothing)
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
        if lead {
            eprintln!(
                "batches ({:?} shapes): {}",
                options.shapes,
                shape::Padding::of(&batches, &src_lens, &tgt_lens, classes)
            );
        }
        let noam = Noam {
            d_model: self.config.model.d_model,
            warmup: options.warmup,
            factor: options.lr_factor,
        };
        let epsilon = self.config.model.label_smoothing;
        let metrics_path = self.run_dir.join(METRICS_FILE);
        // Only rank 0 writes the log; the other ranks' pending steps are never read.
        let metrics_file = if lead {
            metrics_path.clone()
        } else {
            PathBuf::from("/dev/null")
        };
        let mut metrics = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&metrics_file)
            .map_err(io(&metrics_file))?;

        let mut model = model;
        let bar = if self.progress && lead {
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
            let mut stop = options.max_steps.is_some_and(|n| state.step >= n)
                || options.max_epochs.is_some_and(|n| state.epoch >= n)
                || options.max_minutes.is_some_and(|m| elapsed >= m * 60.0);
            // Clocks differ between ranks: rank 0's decides a time limit for all.
            if let (Some(c), Some(_)) = (collective, options.max_minutes) {
                stop = distributed::agree(c, stop)?;
            }
            if stop {
                break;
            }
            if state.cursor >= batches.len() {
                state.epoch += 1;
                state.cursor = 0;
                order = epoch_order(batches.len(), options.seed, state.epoch);
                continue;
            }

            // One optimizer step over `accum` batches per rank.
            let group: Vec<&Batch> = order[state.cursor..]
                .iter()
                .take(options.accum.max(1) * ranks)
                .map(|&b| &batches[b])
                .collect();
            let group_tokens: usize = group.iter().map(|b| target_tokens(self.train, b)).sum();
            let lr = noam.lr(state.step + 1);
            let work = StepWork {
                device: &device,
                group: &group,
                examples: Examples {
                    pairs: self.train,
                    focus: self.focus.as_ref(),
                    classes,
                },
                group_tokens,
                epsilon,
                seed: rng::step_seed(options.seed, state.step),
                collective,
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
                    let (step, lr) = (state.step + 1, &|t| noam.lr(t));
                    let (next, sums) = match collective {
                        Some(c) => {
                            trainer.step_ranked(model, &forced, group_tokens, step, lr, c)?
                        }
                        None => trainer.step_group(model, &forced, group_tokens, step, lr)?,
                    };
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
            if lead {
                pending.push(PendingStep {
                    record,
                    loss,
                    tokens: group_tokens,
                    scale,
                });
            }

            let validate_now =
                lead && options.valid_every > 0 && state.step % options.valid_every == 0;
            let checkpoint_now = lead
                && (options
                    .checkpoint_steps
                    .is_some_and(|n| state.step % n == 0)
                    || options
                        .checkpoint_minutes
                        .is_some_and(|m| last_checkpoint_time.elapsed().as_secs_f64() >= m * 60.0));
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
        if !already_saved && lead {
            valid_nll = self.validate(&model, &bar, &mut metrics, &metrics_path, &state)?;
            last_checkpoint = Some(self.save(&model, &stepper, &state)?);
        }
        bar.finish_and_clear();
        if let (Stepper::Graph(trainer), true) = (&stepper, lead) {
            let GraphCounts {
                eager,
                captured,
                replayed,
            } = trainer.counts;
            match &trainer.fallback {
                Some(why) => eprintln!("graph: {eager} eager steps: {why}"),
                None if ranks > 1 => eprintln!(
                    "graph: {captured} graphs captured (each batch shape's gradients, the pack and the update), {replayed} runs replayed, {eager} eager (on each of {ranks} ranks: {} batch{}, the pack, the exchange and an update a step)",
                    options.accum,
                    if options.accum == 1 { "" } else { "es" }
                ),
                None if options.accum > 1 => eprintln!(
                    "graph: {captured} graphs captured (each batch shape's gradients, and the update), {replayed} runs replayed, {eager} eager ({} batches and an update a step)",
                    options.accum
                ),
                None => eprintln!(
                    "graph: {captured} shapes captured, {replayed} steps replayed, {eager} eager"
                ),
            }
        }
        if lead {
            eprintln!("start: {start_report}");
        }
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
}
