//! What the runner knows of a stage kind: one trait, and where a stage runs and is
//! costed.

use std::any::Any;
use std::path::PathBuf;

use clap::ValueEnum;

use transduce_train::backend::Backend;
use transduce_train::error::Result;

use super::super::format::Scale;
use super::super::plan::Plan;
use super::super::state::{self, State};

/// A stage's settings, resolved: paths, references turned into the outputs they name,
/// numbers checked. Every stage of a plan is read before any runs, so a wrong field stops
/// the recipe at its line, not hours in.
pub trait Spec: std::fmt::Debug {
    /// Runs the stage into its folder; `resume` continues a training run.
    fn run(&self, at: &At, resume: bool) -> Result<()>;

    /// Seconds the stage may take from where it stands (not done), and how that was
    /// estimated; `None` where nothing tells.
    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)>;

    /// The corpus files the stage reads from outside the plan (what `--dry-run` lists, so
    /// a missing download shows before a run).
    fn data_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// The step a train stage stops at, at a scale (0 for the other kinds at full scale).
    fn target_steps(&self, scale: Scale) -> u64 {
        match scale {
            Scale::Smoke => 2,
            _ => 0,
        }
    }

    /// What is wrong with a finished stage's output, if anything.
    fn output_check(&self, plan: &Plan, node: usize) -> Result<Option<String>> {
        Ok(state::missing(&state::output_files(&plan.output(node)?)))
    }

    /// For a stage that reads another kind's settings (a continued run, a cost walking
    /// back through the runs a model comes from).
    fn as_any(&self) -> &dyn Any;
}

/// What the runner passes through to the stages.
pub struct RunOptions {
    pub backend: Backend,
    pub devices: Vec<usize>,
    /// The command as the user gave it, for the provenance.
    pub command: String,
}

impl RunOptions {
    /// `--backend`'s value for the subcommands a stage runs.
    pub fn backend_arg(&self) -> String {
        self.backend
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_else(|| "cpu".into())
    }
}

/// Where a stage runs: its plan, node and folder, the scale and the runner's options.
pub struct At<'a> {
    pub plan: &'a Plan,
    pub node: usize,
    pub dir: PathBuf,
    pub scale: Scale,
    pub options: &'a RunOptions,
}

impl At<'_> {
    pub fn smoke(&self) -> bool {
        self.scale == Scale::Smoke
    }
}

/// Where a stage's cost is estimated: its plan, node and state, and every planned stage's
/// settings (`spec_of(node)` is its own).
pub struct CostAt<'a> {
    pub plan: &'a Plan,
    pub node: usize,
    pub state: &'a State,
    pub spec_of: &'a dyn Fn(usize) -> &'a dyn Spec,
}

impl CostAt<'_> {
    pub fn smoke(&self) -> bool {
        self.plan.context.scale == Scale::Smoke
    }
}
