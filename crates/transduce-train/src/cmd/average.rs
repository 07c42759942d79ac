//! `transduce average`: average the newest checkpoints of a run (§6.1).

use std::path::PathBuf;

use clap::Args;

use crate::error::Result;
use crate::{average, options};

#[derive(Args)]
pub struct AverageCmd {
    /// Run folder.
    #[arg(long)]
    pub run: PathBuf,
    /// How many of the newest checkpoints.
    #[arg(long, default_value_t = 5, value_parser = options::count)]
    pub last: usize,
    /// Output file (default: RUN/averaged-last-N.safetensors).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(cmd: AverageCmd) -> Result<()> {
    let out = cmd.out.unwrap_or_else(|| {
        cmd.run
            .join(format!("averaged-last-{}.safetensors", cmd.last))
    });
    let steps = average::average(&cmd.run, cmd.last, &out)?;
    eprintln!("averaged steps {steps:?} into {}", out.display());
    Ok(())
}
