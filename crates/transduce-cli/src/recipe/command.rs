//! `transduce recipe run FILE`: run a recipe's stages, or print its plan.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::recipe::{self, Scale};
use transduce_train::backend::Backend;
use transduce_train::error::Result;

#[derive(Subcommand)]
pub enum RecipeCmd {
    /// Run a recipe's stages in order, each skipped when done; a stopped run continues
    /// where it stopped (training resumes from its newest checkpoint).
    Run(RecipeRun),
}

#[derive(Args)]
pub struct RecipeRun {
    /// The recipe (TOML), e.g. recipes/en-de-free.toml.
    pub file: PathBuf,
    /// Print the plan (each stage's state and an estimated cost) and run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Run this stage alone (`stage`, or `recipe:stage` for another recipe's); its inputs
    /// must be done.
    #[arg(long)]
    pub stage: Option<String>,
    /// `full` as written; `paper` or `reduced` where the recipe declares them (its
    /// per-scale values); `smoke` runs every stage with tiny steps on a few lines of each
    /// corpus (a test of the recipe, not a model). Default: the recipe's `default_scale`,
    /// else `full`. Each scale has its own work folder.
    #[arg(long, value_enum)]
    pub scale: Option<Scale>,
    /// What `{data}` stands for in the recipe (default: $TRANSDUCE_DATA, else
    /// ../shared/data beside the checkout holding the recipe).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Where stages write: WORK/RECIPE/STAGE (default: work/recipes, or work/recipes-SCALE
    /// at another scale than full).
    #[arg(long)]
    pub work: Option<PathBuf>,
    /// The backend of the training and decoding stages.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// Training devices of --backend (`train --devices`).
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<usize>,
}

pub fn run(cmd: RecipeCmd) -> Result<()> {
    match cmd {
        RecipeCmd::Run(r) => {
            let mut command = format!("transduce recipe run {}", r.file.display());
            if let Some(scale) = r.scale {
                command.push_str(&format!(" --scale {}", scale.name()));
            }
            recipe::run(recipe::RunRequest {
                data: r.data.unwrap_or_else(|| recipe::default_data(&r.file)),
                work: r.work,
                file: r.file,
                scale: r.scale,
                dry_run: r.dry_run,
                stage: r.stage,
                backend: r.backend,
                devices: r.devices,
                command,
            })
        }
    }
}
