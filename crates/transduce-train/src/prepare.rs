//! `transduce prepare`: corpus → shared BPE vocabulary → binary id caches.

use std::path::Path;

use serde::{Deserialize, Serialize};
use transduce::Tokenizer;

use crate::data::cache::{self, Pairs};
use crate::data::corpus::read_parallel;
use crate::error::{Result, io};

pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const TRAIN_FILE: &str = "train.bin";
pub const VALID_FILE: &str = "valid.bin";
pub const SUMMARY_FILE: &str = "prepare.json";

/// What `prepare` did, written to `prepare.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PrepareSummary {
    pub vocab_size: usize,
    pub train_pairs: usize,
    pub valid_pairs: usize,
    pub dropped_empty: usize,
    pub dropped_too_long: usize,
    pub max_len: usize,
    pub sources: Vec<String>,
}

pub struct PrepareArgs<'a> {
    pub src: &'a Path,
    pub tgt: &'a Path,
    pub valid_src: Option<&'a Path>,
    pub valid_tgt: Option<&'a Path>,
    pub vocab_size: usize,
    pub max_len: usize,
    pub out: &'a Path,
}

fn encode(
    tokenizer: &Tokenizer,
    pairs: &[(String, String)],
    max_len: usize,
    summary: &mut PrepareSummary,
) -> Result<Pairs> {
    let mut out = Pairs::default();
    for (s, t) in pairs {
        if s.trim().is_empty() || t.trim().is_empty() {
            summary.dropped_empty += 1;
            continue;
        }
        let (s, t) = (tokenizer.encode(s)?, tokenizer.encode(t)?);
        if s.len() > max_len || t.len() > max_len {
            summary.dropped_too_long += 1;
            continue;
        }
        out.push(s, t);
    }
    Ok(out)
}

pub fn prepare(args: PrepareArgs) -> Result<PrepareSummary> {
    let train = read_parallel(args.src, args.tgt)?;
    let valid = match (args.valid_src, args.valid_tgt) {
        (Some(s), Some(t)) => Some(read_parallel(s, t)?),
        _ => None,
    };
    eprintln!(
        "read {} training pairs; learning a shared BPE vocabulary of {} tokens",
        train.len(),
        args.vocab_size
    );
    let sentences = train
        .iter()
        .flat_map(|(s, t)| [s.as_str(), t.as_str()])
        .filter(|s| !s.trim().is_empty());
    let tokenizer = Tokenizer::train(sentences, args.vocab_size)?;
    let mut summary = PrepareSummary {
        vocab_size: tokenizer.vocab_size(),
        max_len: args.max_len,
        sources: [
            Some(args.src),
            Some(args.tgt),
            args.valid_src,
            args.valid_tgt,
        ]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect(),
        ..Default::default()
    };
    let train_ids = encode(&tokenizer, &train, args.max_len, &mut summary)?;
    summary.train_pairs = train_ids.len();
    std::fs::create_dir_all(args.out).map_err(io(args.out))?;
    crate::fsutil::write_atomic(
        &args.out.join(TOKENIZER_FILE),
        tokenizer.to_json()?.as_bytes(),
    )?;
    cache::write(&args.out.join(TRAIN_FILE), &train_ids)?;
    if let Some(valid) = valid {
        let valid_ids = encode(&tokenizer, &valid, args.max_len, &mut summary)?;
        summary.valid_pairs = valid_ids.len();
        cache::write(&args.out.join(VALID_FILE), &valid_ids)?;
    }
    let json = serde_json::to_string_pretty(&summary).expect("summary serializes");
    crate::fsutil::write_atomic(&args.out.join(SUMMARY_FILE), json.as_bytes())?;
    eprintln!(
        "kept {} training and {} validation pairs; dropped {} empty and {} longer than {} tokens",
        summary.train_pairs,
        summary.valid_pairs,
        summary.dropped_empty,
        summary.dropped_too_long,
        args.max_len
    );
    Ok(summary)
}

/// A prepared data directory.
pub struct Prepared {
    pub tokenizer: Tokenizer,
    pub train: Pairs,
    pub valid: Option<Pairs>,
}

impl Prepared {
    pub fn load(dir: &Path) -> Result<Prepared> {
        let tok_path = dir.join(TOKENIZER_FILE);
        let bytes = std::fs::read(&tok_path).map_err(io(&tok_path))?;
        let tokenizer = Tokenizer::from_bytes(&bytes)?;
        let train = cache::read(&dir.join(TRAIN_FILE))?;
        let valid_path = dir.join(VALID_FILE);
        let valid = if valid_path.exists() {
            Some(cache::read(&valid_path)?)
        } else {
            None
        };
        Ok(Prepared {
            tokenizer,
            train,
            valid,
        })
    }
}
