//! `transduce import`: a Hugging Face Marian (OPUS-MT) folder becomes a bundle
//! ([`crate::import`]).

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use transduce::WeightDtype;
use transduce::bundle::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE};

use crate::error::{Result, io};
use crate::fsutil;
use crate::import::{ImportOptions, import};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WeightsArg {
    /// The original's values (f16 or bf16 checkpoints are widened exactly).
    F32,
    /// Half precision: half the size.
    F16,
    /// Matrices and embeddings in int8 with a scale per row (about a quarter of f32): what
    /// the CPU decoder multiplies in, and the page's choice.
    Int8,
}

#[derive(Args)]
pub struct ImportCmd {
    /// The model folder: config.json, model.safetensors or pytorch_model.bin, source.spm,
    /// vocab.json (generation_config.json and README.md when present), as the Hugging Face
    /// hub serves OPUS-MT models.
    pub dir: PathBuf,
    /// Output bundle folder.
    #[arg(long)]
    pub out: PathBuf,
    /// How the bundle stores its weights.
    #[arg(long, value_enum, default_value = "f32")]
    pub weights: WeightsArg,
    /// The weights' licence, when the folder's README.md does not name it (e.g. cc-by-4.0).
    #[arg(long)]
    pub licence: Option<String>,
    /// The source model's name for the model card (default: the config's hub id, else the
    /// folder's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Source language code (default: read from an `opus-mt-SRC-TGT` name).
    #[arg(long, requires = "target")]
    pub source: Option<String>,
    /// Target language code.
    #[arg(long, requires = "source")]
    pub target: Option<String>,
}

pub fn run(cmd: ImportCmd) -> Result<()> {
    let start = Instant::now();
    let weights = match cmd.weights {
        WeightsArg::F32 => WeightDtype::F32,
        WeightsArg::F16 => WeightDtype::F16,
        WeightsArg::Int8 => WeightDtype::Int8,
    };
    let command = std::iter::once("transduce".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ");
    let imported = import(
        &cmd.dir,
        &ImportOptions {
            weights,
            licence: cmd.licence,
            name: cmd.name,
            source: cmd.source,
            target: cmd.target,
            command,
        },
    )?;
    std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
    let files = &imported.files;
    fsutil::write_atomic(&cmd.out.join(TOKENIZER_FILE), &files.tokenizer)?;
    fsutil::write_atomic(&cmd.out.join(WEIGHTS_FILE), &files.weights)?;
    fsutil::write_atomic(&cmd.out.join("README.md"), imported.card.as_bytes())?;
    // config.json last: a folder without it is not a bundle, so an interrupted import never
    // leaves one that loads with the wrong weights.
    fsutil::write_atomic(&cmd.out.join(CONFIG_FILE), &files.config)?;
    eprintln!(
        "imported {} into {} ({:.1} MB of weights) in {:.1} s",
        imported.name,
        cmd.out.display(),
        files.weights.len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
