//! The subcommands: each module holds one command's options and what it runs; the
//! work itself lives in the crate's concept modules (`prepared`, `train`, `decoder`,
//! `parsing`, …), named for what they hold, not for a command.

pub mod adapt;
pub mod average;
pub mod bench;
pub mod eval;
pub mod export;
pub mod import;
pub mod parse;
pub mod prepare;
pub mod score;
pub mod table3;
pub mod train;
pub mod translate;
pub mod warmup;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use transduce_train::backend::Backend;
use transduce_train::data;
use transduce_train::error::{Error, Result, io};

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TaskKind {
    /// A parallel corpus: --src and --tgt.
    Translate,
    /// A treebank (§6.3): --trees.
    Parse,
}

// The models `translate` and `parse` decode with. The commands themselves require
// `--model`, so that `parse --right-branching` can go without.
#[derive(Args)]
pub struct EnsembleArgs {
    /// A bundle folder, or a training run folder. Repeat it to decode with an ensemble:
    /// models sharing one vocabulary, each next token scored by the mean of their
    /// log-probabilities (`parse` can also let them vote: --combine).
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<PathBuf>,
    /// With a run folder: a checkpoint folder or a .safetensors file (default: newest).
    /// With several models, one per model in order.
    #[arg(long = "checkpoint", value_name = "CHECKPOINT")]
    pub checkpoints: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// Arithmetic of the CPU decoder's matrix products: int8 (weights per output row,
    /// activations per row on the fly, int32 sums) or f32. Default: int8 for int8 bundles,
    /// f32 for f16 and f32 ones (int8 then quantizes them at load).
    #[arg(long, value_enum)]
    pub compute: Option<Compute>,
}

/// The CPU decoder's arithmetic (`--compute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Compute {
    Int8,
    F32,
}

impl EnsembleArgs {
    /// Sets each bundle's CPU arithmetic as `--compute` asks (no change without it).
    pub fn apply_compute(&self, bundles: &mut [transduce::Bundle]) {
        for bundle in bundles {
            match self.compute {
                Some(Compute::Int8) => bundle.quantize(),
                // Natively an f32 copy of an int8 bundle's weights is affordable, and the
                // f32 kernels are faster on it than widening each tile on every product.
                Some(Compute::F32) => bundle.expand_to_f32(),
                None => {}
            }
        }
    }
}

#[derive(Args)]
pub struct ModelArgs {
    /// A bundle folder, or a training run folder.
    #[arg(long)]
    pub model: PathBuf,
    /// With a run folder: a checkpoint folder or a .safetensors file (default: newest).
    #[arg(long)]
    pub checkpoint: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
}

pub fn read_input(path: Option<&Path>) -> Result<Vec<String>> {
    match path {
        Some(p) => {
            let bytes = data::corpus::read_bytes(p)?;
            if bytes.is_empty() {
                return Ok(Vec::new());
            }
            data::corpus::read_lines(p)
        }
        None => {
            let stdin = std::io::stdin();
            let mut lines = Vec::new();
            for (i, line) in stdin.lock().split(b'\n').enumerate() {
                let line = line.map_err(io(Path::new("<stdin>")))?;
                let line = line.strip_suffix(b"\r").unwrap_or(&line).to_vec();
                lines.push(String::from_utf8(line).map_err(|e| Error::Utf8 {
                    path: PathBuf::from("<stdin>"),
                    line: i + 1,
                    detail: e.utf8_error().to_string(),
                })?);
            }
            Ok(lines)
        }
    }
}

/// Writes one line per entry to `path`, or to standard output.
pub fn write_output(lines: &[String], path: Option<&Path>) -> Result<()> {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    match path {
        Some(p) => std::fs::write(p, text).map_err(io(p)),
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(io(Path::new("<stdout>"))),
    }
}
