//! `transduce average`: average the newest checkpoints of a run (§6.1), or any weights of
//! one architecture (a model soup of runs that started from the same weights).

use std::path::PathBuf;

use clap::Args;

use crate::options;
use transduce_train::error::{Error, Result};
use transduce_train::{checkpoint_mean, model_folder};

#[derive(Args)]
pub struct AverageCmd {
    /// Run folder: its newest checkpoints are averaged.
    #[arg(long, required_unless_present = "inputs", conflicts_with = "inputs")]
    pub run: Option<PathBuf>,
    /// How many of the run's newest checkpoints.
    #[arg(long, default_value_t = 5, value_parser = options::count, conflicts_with = "inputs")]
    pub last: usize,
    /// Instead of --run: the weights to average, each a checkpoint folder or an f32
    /// safetensors file (e.g. another average), all of one architecture.
    #[arg(long, num_args = 2.., value_name = "WEIGHTS")]
    pub inputs: Vec<PathBuf>,
    /// Output file (default: RUN/averaged-last-N.safetensors; required with --inputs).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(cmd: AverageCmd) -> Result<()> {
    let Some(run) = cmd.run else {
        let out = cmd
            .out
            .ok_or_else(|| Error::Usage("--inputs needs --out".into()))?;
        let paths: Vec<PathBuf> = cmd
            .inputs
            .iter()
            .map(|p| model_folder::weights_path(p, Some(p)))
            .collect::<Result<_>>()?;
        checkpoint_mean::average_files(&paths, &out)?;
        eprintln!("averaged {} weights into {}", paths.len(), out.display());
        return Ok(());
    };
    let out = cmd
        .out
        .unwrap_or_else(|| run.join(format!("averaged-last-{}.safetensors", cmd.last)));
    let steps = checkpoint_mean::average(&run, cmd.last, &out)?;
    eprintln!("averaged steps {steps:?} into {}", out.display());
    Ok(())
}
