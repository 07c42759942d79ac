//! A training run: the loop of optimizer steps (§5) with its stop conditions, the
//! checkpoints it saves and resumes from ([`checkpoint`]), validation ([`validate`]) and the
//! `metrics.jsonl` records whose losses are read a few steps late ([`log`], [`pending`]).
//! Each step is taken by the engine ([`crate::train::engine`], through [`stepper`]):
//! replayed graphs where the run allows them, eager steps otherwise.

pub mod checkpoint;
mod log;
mod pending;
mod shared_start;
mod stepper;
pub mod validate;

use std::path::{Path, PathBuf};
use std::time::Instant;

use transduce::Transformer;
use transduce::burn::optim::ModuleOptimizer;
use transduce::burn::prelude::*;
use transduce::task::focus::WordFocus;
use transduce::train::adam;
use transduce::train::schedule::Noam;

use crate::data::batch::{Batch, epoch_order};
use crate::data::cache::Pairs;
use crate::data::shape;
use crate::distributed::{self, Collective};
use crate::error::{Error, Result};
use crate::rng;
use crate::train::batches::{Examples, target_tokens};
use crate::train::config::RunConfig;
use crate::train::engine::eager::StepWork;
use crate::train::engine::loss_scale::{self, LossScale};
use crate::train::observe::start_time::StartWatch;
use checkpoint::TrainState;
use log::RunLog;
use pending::PendingStep;
use stepper::Stepper;

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

/// What a run's steps are cut from: the batches (§5.1), their shape classes and the
/// learning rate's schedule (§5.3).
struct Plan {
    batches: Vec<Batch>,
    classes: Option<usize>,
    noam: Noam,
}

/// A run's time: from its start and from the checkpoint it resumed (what a checkpoint
/// saves), and the tokens of the last 30 seconds (the rate a record reports).
struct Clock {
    started: Instant,
    before: f64,
    window: (Instant, u64),
}

impl Clock {
    fn start(before: f64) -> Self {
        Clock {
            started: Instant::now(),
            before,
            window: (Instant::now(), 0),
        }
    }

    /// Seconds of the whole run, resumed parts included.
    fn elapsed(&self) -> f64 {
        self.before + self.started.elapsed().as_secs_f64()
    }

    /// Counts a step's tokens; the rate over the window, which starts over every 30 s.
    fn tokens_per_sec(&mut self, tokens: usize) -> f64 {
        self.window.1 += tokens as u64;
        let rate = self.window.1 as f64 / self.window.0.elapsed().as_secs_f64().max(1e-9);
        if self.window.0.elapsed().as_secs_f64() > 30.0 {
            self.window = (Instant::now(), 0);
        }
        rate
    }
}

/// The checkpoint a run saved last, and its validation.
#[derive(Default)]
struct Saved {
    checkpoint: Option<PathBuf>,
    valid_nll: Option<f64>,
}

impl Saved {
    /// Whether the last checkpoint is step `step`'s.
    fn holds(&self, step: u64) -> bool {
        self.checkpoint
            .as_ref()
            .is_some_and(|p| p.ends_with(format!("step-{step:08}")))
    }
}

impl Trainer<'_> {
    /// Trains until a stop condition; checkpoints on the way and at the end.
    pub fn run(self) -> Result<Summary> {
        let mut watch = StartWatch::begin();
        let options = &self.config.options;
        loss_scale::check(options.precision, std::slice::from_ref(&self.device))?;
        let device = self.device.clone().autodiff();
        let (ranks, lead) = self
            .collective
            .map_or((1, true), |c| (c.world(), c.leads()));
        if lead {
            self.config.write(self.run_dir)?;
        }
        let (model, optimizer, mut state) = self.begin(&device, ranks, lead)?;
        let mut model = model
            .with_precision(options.precision)
            .with_fused(self.fused);
        if state.loss_scale.is_none() {
            state.loss_scale = LossScale::initial(options.precision);
        }
        let choice = stepper::Choice {
            graph: self.graph,
            fused: self.fused,
            precision: options.precision,
            seed: options.seed,
            label_smoothing: self.config.model.label_smoothing,
            run_dir: self.run_dir,
            lead,
        };
        let mut stepper = Stepper::choose(&choice, &model, optimizer, &state, &device)?;
        let plan = self.plan(lead);
        let mut log = RunLog::open(
            self.run_dir,
            lead,
            self.progress,
            (state.step, options.max_steps),
            self.log_every,
        )?;
        let mut clock = Clock::start(state.elapsed_secs);
        let mut last_checkpoint_time = Instant::now();
        let mut saved = Saved::default();
        let mut order = epoch_order(plan.batches.len(), options.seed, state.epoch);
        watch.loaded();

        while !self.stops(&state, clock.elapsed())? {
            if state.cursor >= plan.batches.len() {
                state.epoch += 1;
                state.cursor = 0;
                order = epoch_order(plan.batches.len(), options.seed, state.epoch);
                continue;
            }
            // One optimizer step over `accum` batches per rank.
            let group: Vec<&Batch> = order[state.cursor..]
                .iter()
                .take(options.accum.max(1) * ranks)
                .map(|&b| &plan.batches[b])
                .collect();
            let group_tokens: usize = group.iter().map(|b| target_tokens(self.train, b)).sum();
            let work = StepWork {
                device: &device,
                group: &group,
                examples: Examples {
                    pairs: self.train,
                    focus: self.focus.as_ref(),
                    classes: plan.classes,
                },
                group_tokens,
                epsilon: self.config.model.label_smoothing,
                seed: rng::step_seed(options.seed, state.step),
                collective: self.collective,
            };
            let step = state.step + 1;
            let taken = stepper.step(
                model,
                &work,
                step,
                &plan.noam,
                options.precision,
                &mut state.loss_scale,
            )?;
            model = taken.model;
            watch.step();
            state.step = step;
            state.cursor += group.len();
            state.tokens += group_tokens as u64;
            if lead {
                let rate = clock.tokens_per_sec(group_tokens);
                log.push(PendingStep {
                    record: self.record(&state, plan.noam.lr(step), rate, clock.elapsed()),
                    loss: taken.loss,
                    tokens: group_tokens,
                    scale: taken.scale,
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
            if log.due() || validate_now || checkpoint_now {
                log.flush(&mut state.loss_scale)?;
            }
            if validate_now || checkpoint_now {
                saved.valid_nll = self.validate(&model, &mut log, &state)?;
            }
            if checkpoint_now {
                state.elapsed_secs = clock.elapsed();
                saved.checkpoint = Some(self.save(&model, &stepper, &state)?);
                last_checkpoint_time = Instant::now();
            }
        }
        log.flush(&mut state.loss_scale)?;
        let start_report = watch.report();
        state.elapsed_secs = clock.elapsed();
        if lead && !saved.holds(state.step) {
            saved.valid_nll = self.validate(&model, &mut log, &state)?;
            saved.checkpoint = Some(self.save(&model, &stepper, &state)?);
        }
        log.bar.finish_and_clear();
        if lead {
            if let Some(report) = stepper.report(ranks, options.accum) {
                eprintln!("{report}");
            }
            eprintln!("start: {start_report}");
        }
        Ok(Summary {
            state,
            last_checkpoint: saved.checkpoint,
            valid_nll: saved.valid_nll,
        })
    }

    /// The model, Adam and the counters a run starts from: the newest checkpoint's with
    /// `resume`, else fresh weights (or `init`'s) in a folder that holds no checkpoint. In
    /// a job, rank 0 alone reads them and every rank starts from its bits.
    fn begin(
        &self,
        device: &Device,
        ranks: usize,
        lead: bool,
    ) -> Result<(Transformer, ModuleOptimizer, TrainState)> {
        match self.collective {
            Some(c) if ranks > 1 => {
                let mine = if lead {
                    self.resume_or_start(device)
                } else {
                    Err(Error::Usage("not read".into()))
                };
                shared_start::broadcast(c, mine, adam(), &self.config.model, device)
            }
            _ => self.resume_or_start(device),
        }
    }

    fn resume_or_start(
        &self,
        device: &Device,
    ) -> Result<(Transformer, ModuleOptimizer, TrainState)> {
        let checkpoints = checkpoint::list(self.run_dir)?;
        match (self.resume, checkpoints.last()) {
            (true, Some((_, latest))) => {
                let state = checkpoint::read_state(latest)?;
                let model = checkpoint::load_model(latest, &self.config.model, device)?;
                let optimizer = checkpoint::load_optimizer(latest, adam())?;
                eprintln!("resuming from {} (step {})", latest.display(), state.step);
                Ok((model, optimizer, state))
            }
            (true, None) => Err(Error::Usage(format!(
                "--resume: no checkpoint in {}",
                self.run_dir.join("checkpoints").display()
            ))),
            (false, Some(_)) => Err(Error::Usage(format!(
                "{} already holds checkpoints: pass --resume to continue it, or choose a new --out",
                self.run_dir.display()
            ))),
            (false, None) => {
                device.seed(self.config.options.seed);
                let model = match &self.config.init {
                    Some(weights) => {
                        eprintln!("starting from the weights in {}", weights.display());
                        checkpoint::load_weights_file(weights, &self.config.model, device)?
                    }
                    None => Transformer::new(&self.config.model, device)?,
                };
                Ok((model, adam(), TrainState::default()))
            }
        }
    }

    /// The batches of the training pairs by token budget, in the run's shape classes
    /// (whose padding rank 0 reports), and the schedule.
    fn plan(&self, lead: bool) -> Plan {
        let options = &self.config.options;
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
        Plan {
            batches,
            classes,
            noam,
        }
    }

    /// Whether a stop condition holds: steps, epochs or minutes. Clocks differ between
    /// ranks, so rank 0's decides a time limit for all.
    fn stops(&self, state: &TrainState, elapsed: f64) -> Result<bool> {
        let options = &self.config.options;
        let stop = options.max_steps.is_some_and(|n| state.step >= n)
            || options.max_epochs.is_some_and(|n| state.epoch >= n)
            || options.max_minutes.is_some_and(|m| elapsed >= m * 60.0);
        match (self.collective, options.max_minutes) {
            (Some(c), Some(_)) => distributed::agree(c, stop),
            _ => Ok(stop),
        }
    }

    /// A step's `metrics.jsonl` record as far as the host knows it: its loss is added when
    /// read ([`pending`]).
    fn record(
        &self,
        state: &TrainState,
        lr: f64,
        tokens_per_sec: f64,
        elapsed: f64,
    ) -> serde_json::Value {
        let mut record = serde_json::json!({
            "step": state.step, "epoch": state.epoch, "lr": lr, "tokens": state.tokens,
            "tokens_per_sec": tokens_per_sec,
            "elapsed_secs": elapsed,
        });
        if let Some(scale) = &state.loss_scale {
            record["loss_scale"] = scale.scale.into();
            record["skipped_steps"] = scale.skipped.into();
        }
        record
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
