//! The training regime of §5: token-bucketed batches, Adam (β1 0.9, β2 0.98, ε 1e-9) with
//! the warm-up schedule, residual/embedding dropout, label smoothing; plus checkpoints,
//! exact resume, validation perplexity and a JSON-lines log.
//!
//! - [`engine`]: one optimizer step, eager or captured and replayed, with its Adam and loss
//!   scale;
//! - [`run`]: a run of steps (`Trainer::run`), checkpoints, validation, pending metrics;
//! - [`job`]: a process's place in a job: its rank, device, replay and whether it resumes;
//! - [`config`]: the run's settings and `run.json`; [`batches`]: a batch's tokens and
//!   tensors; [`read`]: device values read back; [`observe`]: what a run
//!   reports of itself (its steps' census, where its start went).
//!
//! The loss, its GPU kernel and the schedule live in the model crate (`transduce::train`),
//! shared with adaptation in the browser.

pub mod batches;
pub mod config;
pub mod engine;
pub mod job;
pub mod observe;
pub mod read;
pub mod run;

// What the commands use, by its short name.
pub use batches::Examples;
pub use config::{LOG_EVERY, RUN_FILE, RunConfig, TrainOptions, focus_rule};
pub use engine::eager::{StepWork, optimizer_step};
pub use read::read_scalars;
pub use run::Trainer;
pub use run::checkpoint;
pub use run::validate::{evaluate_nll, sentence_log_probs};
pub use transduce::train::adam;
