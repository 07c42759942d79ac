//! `transduce prepare`: learn the shared BPE vocabulary and write token-id caches.

use std::path::PathBuf;

use clap::Args;

use super::TaskKind;
use crate::options;
use transduce_train::error::{Error, Result};
use transduce_train::prepared;

#[derive(Args)]
pub struct PrepareCmd {
    #[arg(long, value_enum, default_value = "translate")]
    pub task: TaskKind,
    /// Source side of the training corpus (one sentence a line, .gz accepted).
    #[arg(long, required_if_eq("task", "translate"))]
    pub src: Option<PathBuf>,
    /// Target side of the training corpus.
    #[arg(long, required_if_eq("task", "translate"))]
    pub tgt: Option<PathBuf>,
    /// Source side of the validation corpus.
    #[arg(long, requires = "valid_tgt")]
    pub valid_src: Option<PathBuf>,
    /// Target side of the validation corpus.
    #[arg(long, requires = "valid_src")]
    pub valid_tgt: Option<PathBuf>,
    /// Training treebank for --task parse (one tree a line or .mrg layout, .gz accepted).
    #[arg(long, required_if_eq("task", "parse"))]
    pub trees: Option<PathBuf>,
    /// Validation treebank for --task parse.
    #[arg(long)]
    pub valid_trees: Option<PathBuf>,
    /// Size of the shared BPE vocabulary (§5.1: about 37,000 for WMT14 en–de; §6.3:
    /// 16,000 for WSJ parsing).
    #[arg(long, default_value_t = 37_000, value_parser = options::vocab_size)]
    pub vocab_size: usize,
    /// Use this tokenizer instead of learning one: a tokenizer.json, or a bundle, run or
    /// prepared folder holding one. Models trained on data prepared with one tokenizer
    /// share a vocabulary, so they can be ensembled.
    #[arg(long, conflicts_with = "vocab_size")]
    pub tokenizer: Option<PathBuf>,
    /// Pairs with a side longer than this many tokens are dropped (and counted).
    #[arg(long, default_value_t = 256, value_parser = options::count)]
    pub max_len: usize,
    /// Output folder.
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(cmd: PrepareCmd) -> Result<()> {
    let vocabulary = match &cmd.tokenizer {
        Some(path) => prepared::Vocabulary::Reuse(path),
        None => prepared::Vocabulary::Learn(cmd.vocab_size),
    };
    match cmd.task {
        TaskKind::Translate => {
            let missing = || Error::Usage("--src and --tgt are required".into());
            prepared::prepare(prepared::PrepareArgs {
                src: cmd.src.as_deref().ok_or_else(missing)?,
                tgt: cmd.tgt.as_deref().ok_or_else(missing)?,
                valid_src: cmd.valid_src.as_deref(),
                valid_tgt: cmd.valid_tgt.as_deref(),
                vocabulary,
                max_len: cmd.max_len,
                out: &cmd.out,
            })?;
        }
        TaskKind::Parse => {
            let trees = cmd
                .trees
                .as_deref()
                .ok_or_else(|| Error::Usage("--trees is required with --task parse".into()))?;
            prepared::prepare_parse(prepared::ParsePrepareArgs {
                train: trees,
                valid: cmd.valid_trees.as_deref(),
                vocabulary,
                max_len: cmd.max_len,
                out: &cmd.out,
            })?;
        }
    }
    Ok(())
}
