//! A prepared data directory: corpus → shared BPE vocabulary → binary id caches, written
//! by `transduce prepare` (its files and `prepare.json` summary) and read back by
//! `train`, `warmup` and `eval`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use transduce::Tokenizer;

use crate::data::cache::{self, Pairs};
use crate::data::corpus::{read_bytes, read_parallel};
use crate::error::{Error, Result, io};
use transduce::task::parse::{Tree, linearize, parse_trees_lenient, preprocess, target_vocabulary};

pub const TOKENIZER_FILE: &str = "tokenizer.json";
pub const TRAIN_FILE: &str = "train.bin";
pub const VALID_FILE: &str = "valid.bin";
pub const SUMMARY_FILE: &str = "prepare.json";

/// What `prepare` did, written to `prepare.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PrepareSummary {
    /// `translate` or `parse`.
    pub task: String,
    pub vocab_size: usize,
    pub train_pairs: usize,
    pub valid_pairs: usize,
    pub dropped_empty: usize,
    pub dropped_too_long: usize,
    pub max_len: usize,
    pub sources: Vec<String>,
    /// Parsing: malformed trees skipped by the reader, with file, line and reason.
    pub skipped_trees: Vec<String>,
    /// Parsing: trees left empty by preprocessing (only `-NONE-` elements).
    pub empty_trees: usize,
    /// Parsing: validation trees with a label the training trees never use.
    pub dropped_unknown_label: usize,
}

pub struct PrepareArgs<'a> {
    pub src: &'a Path,
    pub tgt: &'a Path,
    pub valid_src: Option<&'a Path>,
    pub valid_tgt: Option<&'a Path>,
    /// The vocabulary to learn, or an existing tokenizer to use instead.
    pub vocabulary: Vocabulary<'a>,
    pub max_len: usize,
    pub out: &'a Path,
}

/// Where `prepare` gets its vocabulary.
#[derive(Clone, Copy, Debug)]
pub enum Vocabulary<'a> {
    /// Learn a BPE vocabulary of this many tokens from the training corpus.
    Learn(usize),
    /// Use the tokenizer of an existing bundle, run or prepared folder (or a
    /// `tokenizer.json`), so the models trained on this data share one vocabulary with the
    /// models trained before: they can then be ensembled (`--model` repeated).
    Reuse(&'a Path),
}

impl Vocabulary<'_> {
    fn path(&self) -> Option<&Path> {
        match self {
            Vocabulary::Learn(_) => None,
            Vocabulary::Reuse(p) => Some(p),
        }
    }
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
    let tokenizer = match args.vocabulary {
        Vocabulary::Learn(size) => {
            eprintln!(
                "read {} training pairs; learning a shared BPE vocabulary of {size} tokens",
                train.len(),
            );
            let sentences = train
                .iter()
                .flat_map(|(s, t)| [s.as_str(), t.as_str()])
                .filter(|s| !s.trim().is_empty());
            Tokenizer::train(sentences, size)?
        }
        Vocabulary::Reuse(path) => {
            eprintln!(
                "read {} training pairs; using the vocabulary of {}",
                train.len(),
                path.display()
            );
            crate::model_folder::tokenizer(path)?
        }
    };
    let mut summary = PrepareSummary {
        task: "translate".into(),
        vocab_size: tokenizer.vocab_size(),
        max_len: args.max_len,
        sources: [
            Some(args.src),
            Some(args.tgt),
            args.valid_src,
            args.valid_tgt,
            args.vocabulary.path(),
        ]
        .into_iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect(),
        ..Default::default()
    };
    let train_ids = encode(&tokenizer, &train, args.max_len, &mut summary)?;
    let valid_ids = valid
        .map(|v| encode(&tokenizer, &v, args.max_len, &mut summary))
        .transpose()?;
    write_prepared(
        args.out,
        &tokenizer,
        &train_ids,
        valid_ids.as_ref(),
        &mut summary,
    )?;
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

/// Writes a prepared folder: the tokenizer, the id caches and `prepare.json`.
fn write_prepared(
    out: &Path,
    tokenizer: &Tokenizer,
    train: &Pairs,
    valid: Option<&Pairs>,
    summary: &mut PrepareSummary,
) -> Result<()> {
    summary.train_pairs = train.len();
    summary.valid_pairs = valid.map_or(0, Pairs::len);
    std::fs::create_dir_all(out).map_err(io(out))?;
    crate::fsutil::write_atomic(&out.join(TOKENIZER_FILE), tokenizer.to_json()?.as_bytes())?;
    cache::write(&out.join(TRAIN_FILE), train)?;
    if let Some(valid) = valid {
        cache::write(&out.join(VALID_FILE), valid)?;
    }
    let json = serde_json::to_string_pretty(summary).expect("summary serializes");
    crate::fsutil::write_atomic(&out.join(SUMMARY_FILE), json.as_bytes())
}

pub struct ParsePrepareArgs<'a> {
    pub train: &'a Path,
    pub valid: Option<&'a Path>,
    pub vocabulary: Vocabulary<'a>,
    pub max_len: usize,
    pub out: &'a Path,
}

/// Reads a treebank file (one tree a line or `.mrg` layout, `.gz` accepted), keeping the
/// well-formed trees, preprocessed (§6.3: no empty elements, no function tags). Each
/// malformed tree is reported with file and line, never silently dropped.
pub fn read_treebank(path: &Path, summary: &mut PrepareSummary) -> Result<Vec<Tree>> {
    let bytes = read_bytes(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(Error::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::Utf8 {
            path: path.to_path_buf(),
            line,
            detail: e.utf8_error().to_string(),
        }
    })?;
    let report = parse_trees_lenient(&text);
    for skipped in &report.skipped {
        let message = format!("{}: {skipped}", path.display());
        eprintln!("skipping malformed tree: {message}");
        summary.skipped_trees.push(message);
    }
    let mut trees = Vec::with_capacity(report.trees.len());
    for tree in &report.trees {
        match preprocess(tree) {
            Some(t) => trees.push(t),
            None => summary.empty_trees += 1,
        }
    }
    Ok(trees)
}

/// Encodes linearized trees (§6.3): the words through the BPE vocabulary, the tree
/// tokens as whole tokens. A tree with a label outside the vocabulary, an empty sentence or
/// one longer than `max_len` is dropped and counted in `summary`.
pub fn encode_trees(
    tokenizer: &Tokenizer,
    pairs: &[(Vec<String>, Vec<String>)],
    max_len: usize,
    summary: &mut PrepareSummary,
) -> Result<Pairs> {
    let mut out = Pairs::default();
    for (words, tokens) in pairs {
        let src = tokenizer.encode(&words.join(" "))?;
        let Some(tgt) = tokens
            .iter()
            .map(|t| tokenizer.token_to_id(t))
            .collect::<Option<Vec<u32>>>()
        else {
            summary.dropped_unknown_label += 1;
            continue;
        };
        if src.is_empty() {
            summary.dropped_empty += 1;
        } else if src.len() > max_len || tgt.len() > max_len {
            summary.dropped_too_long += 1;
        } else {
            out.push(src, tgt);
        }
    }
    Ok(out)
}

/// `prepare --task parse` (§6.3): source = the words, target = the linearized tree. The
/// BPE vocabulary is learned from the words; every bracket token (`(NP`, `)NP`) and the
/// word slot `XX` is added as one whole token, so target ids map one-to-one to tree tokens.
pub fn prepare_parse(args: ParsePrepareArgs) -> Result<PrepareSummary> {
    let mut summary = PrepareSummary {
        task: "parse".into(),
        max_len: args.max_len,
        sources: [Some(args.train), args.valid, args.vocabulary.path()]
            .into_iter()
            .flatten()
            .map(|p| p.display().to_string())
            .collect(),
        ..Default::default()
    };
    let train = read_treebank(args.train, &mut summary)?;
    let valid = args
        .valid
        .map(|p| read_treebank(p, &mut summary))
        .transpose()?;
    let tree_tokens = target_vocabulary(&train);
    let train: Vec<(Vec<String>, Vec<String>)> = train.iter().map(linearize).collect();
    let labels = (tree_tokens.len() - 1) / 2;
    let tokenizer = match args.vocabulary {
        Vocabulary::Learn(size) => {
            eprintln!(
                "read {} training trees ({labels} labels); learning a BPE vocabulary of {size} \
                 tokens for the words",
                train.len(),
            );
            let sentences = train.iter().map(|(words, _)| words.join(" "));
            Tokenizer::train_with_tokens(sentences, size, &tree_tokens)?
        }
        Vocabulary::Reuse(path) => {
            eprintln!(
                "read {} training trees ({labels} labels); using the vocabulary of {}",
                train.len(),
                path.display()
            );
            let tokenizer = crate::model_folder::tokenizer(path)?;
            // Trees using these are dropped and counted below; name them once here.
            let missing: Vec<&str> = tree_tokens
                .iter()
                .map(String::as_str)
                .filter(|t| tokenizer.token_to_id(t).is_none())
                .collect();
            if !missing.is_empty() {
                eprintln!(
                    "{}: no token for {}; the trees using them are dropped",
                    path.display(),
                    missing.join(" ")
                );
            }
            tokenizer
        }
    };
    summary.vocab_size = tokenizer.vocab_size();
    let train_ids = encode_trees(&tokenizer, &train, args.max_len, &mut summary)?;
    let valid_ids = valid
        .map(|v| {
            let pairs: Vec<_> = v.iter().map(linearize).collect();
            encode_trees(&tokenizer, &pairs, args.max_len, &mut summary)
        })
        .transpose()?;
    write_prepared(
        args.out,
        &tokenizer,
        &train_ids,
        valid_ids.as_ref(),
        &mut summary,
    )?;
    eprintln!(
        "kept {} training and {} validation trees; skipped {} malformed and {} empty trees; \
         dropped {} longer than {} tokens and {} with labels outside the vocabulary",
        summary.train_pairs,
        summary.valid_pairs,
        summary.skipped_trees.len(),
        summary.empty_trees,
        summary.dropped_too_long,
        args.max_len,
        summary.dropped_unknown_label
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
        let tokenizer = crate::model_folder::tokenizer(dir)?;
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
