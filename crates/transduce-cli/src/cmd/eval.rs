//! `transduce eval`: sacreBLEU-identical BLEU, EVALB-identical bracket F1, perplexity.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use transduce::Task;
use transduce::task::parse::{PLACEHOLDER, linearize, open_token};

use super::{ModelArgs, read_input};
use crate::options;
use transduce_train::error::{Error, Result};
use transduce_train::{data, model_folder, prepared, train};

#[derive(Subcommand)]
pub enum EvalCmd {
    /// BLEU exactly as sacreBLEU 2.6 computes it, with its signature.
    Bleu {
        /// System output, one sentence a line.
        #[arg(long)]
        hyp: PathBuf,
        /// Reference translations (repeat for several references).
        #[arg(long = "ref", required = true)]
        refs: Vec<PathBuf>,
        /// 13a (sacreBLEU's default), intl, or none.
        #[arg(long, default_value = "13a")]
        tokenize: String,
        /// Case-insensitive BLEU.
        #[arg(long)]
        lowercase: bool,
        /// exp (default), floor, add-k, or none.
        #[arg(long, default_value = "exp")]
        smooth_method: String,
        /// Value for floor / add-k smoothing.
        #[arg(long, value_parser = options::non_negative)]
        smooth_value: Option<f64>,
        /// Sentence-level BLEU (effective order), one score per line.
        #[arg(long)]
        sentence: bool,
    },
    /// Bracket scores exactly as EVALB with COLLINS.prm prints them.
    F1 {
        /// Gold trees, one per line.
        #[arg(long)]
        gold: PathBuf,
        /// Parser output, one per line.
        #[arg(long)]
        test: PathBuf,
    },
    /// Perplexity per target wordpiece of a model: a translation model on a parallel
    /// corpus (`--src`, `--tgt`), a parsing model on treebank trees (`--trees`).
    Ppl {
        #[command(flatten)]
        model: ModelArgs,
        /// Source sentences, one a line (translation).
        #[arg(long, requires = "tgt", conflicts_with = "trees")]
        src: Option<PathBuf>,
        /// Reference translations, one a line.
        #[arg(long, requires = "src")]
        tgt: Option<PathBuf>,
        /// Treebank trees (parsing): each tree's words are the source and its
        /// linearization (§6.3) the target, as `prepare --task parse` makes them.
        #[arg(long, required_unless_present = "src")]
        trees: Option<PathBuf>,
    },
}

pub fn run(metric: EvalCmd) -> Result<()> {
    match metric {
        EvalCmd::Bleu {
            hyp,
            refs,
            tokenize,
            lowercase,
            smooth_method,
            smooth_value,
            sentence,
        } => eval_bleu(
            &hyp,
            &refs,
            &tokenize,
            lowercase,
            &smooth_method,
            smooth_value,
            sentence,
        )?,
        EvalCmd::F1 { gold, test } => {
            use transduce_metrics::evalb;
            let gold_text = String::from_utf8_lossy(&data::corpus::read_bytes(&gold)?).to_string();
            let test_text = String::from_utf8_lossy(&data::corpus::read_bytes(&test)?).to_string();
            let report =
                evalb::evaluate_text(&gold_text, &test_text, &evalb::EvalbParams::collins())
                    .map_err(|e| {
                        Error::Usage(format!("{} vs {}: {e}", gold.display(), test.display()))
                    })?;
            for line in report.stderr_lines() {
                eprintln!("{line}");
            }
            print!("{report}");
        }
        EvalCmd::Ppl {
            model,
            src,
            tgt,
            trees,
        } => eval_ppl(&model, src, tgt, trees)?,
    }
    Ok(())
}

fn eval_bleu(
    hyp: &Path,
    refs: &[PathBuf],
    tokenize: &str,
    lowercase: bool,
    smooth_method: &str,
    smooth_value: Option<f64>,
    sentence: bool,
) -> Result<()> {
    use transduce_metrics::bleu;
    let usage = |e: bleu::BleuError| Error::Usage(e.to_string());
    let options = bleu::BleuOptions {
        lowercase,
        tokenize: tokenize.parse().map_err(usage)?,
        smooth_method: smooth_method.parse().map_err(usage)?,
        smooth_value,
        effective_order: None,
    };
    let hyps = read_input(Some(hyp))?;
    let streams: Vec<Vec<String>> = refs
        .iter()
        .map(|r| read_input(Some(r)))
        .collect::<Result<_>>()?;
    for (r, stream) in refs.iter().zip(&streams) {
        if stream.len() != hyps.len() {
            return Err(Error::LineCount {
                src_path: hyp.to_path_buf(),
                src_lines: hyps.len(),
                tgt_path: r.clone(),
                tgt_lines: stream.len(),
            });
        }
    }
    if sentence {
        for (i, h) in hyps.iter().enumerate() {
            let sentence_refs: Vec<&str> = streams.iter().map(|s| s[i].as_str()).collect();
            let score = bleu::sentence_bleu(h, &sentence_refs, &options).map_err(usage)?;
            println!("{}", score.format_with_signature());
        }
    } else {
        let score = bleu::corpus_bleu_streams(&hyps, &streams, &options).map_err(usage)?;
        println!("{}", score.format_with_signature());
    }
    Ok(())
}

/// A translation model's loss on sentence pairs.
pub struct PairLoss {
    /// Nats per target wordpiece: its exponential is the perplexity.
    pub nll: f64,
    /// The pairs scored (pairs with an empty side are left out).
    pub pairs: usize,
    /// The model's parameters.
    pub params: usize,
}

/// Loss per target wordpiece of a translation model on `src`/`tgt` (what `eval ppl
/// --src --tgt` prints; the Table 3 report's perplexity).
pub fn pair_loss(model: &ModelArgs, src: &Path, tgt: &Path) -> Result<PairLoss> {
    let device = model.backend.device()?;
    let task = Task::Translate {
        source: String::new(),
        target: String::new(),
    };
    let bundle = model_folder::load(&model.model, model.checkpoint.as_deref(), task, &device)?;
    refuse_parser(&bundle, &model.model)?;
    let pairs = data::corpus::read_parallel(src, tgt)?;
    let mut ids = data::cache::Pairs::default();
    for (s, t) in &pairs {
        let (s, t) = (bundle.tokenizer.encode(s)?, bundle.tokenizer.encode(t)?);
        if !s.is_empty() && !t.is_empty() {
            ids.push(s, t);
        }
    }
    loss_of(&bundle, ids)
}

/// The bundle's loss per target wordpiece on encoded pairs, teacher-forced.
fn loss_of(bundle: &transduce::Bundle, mut ids: data::cache::Pairs) -> Result<PairLoss> {
    if ids.is_empty() {
        return Err(Error::Usage("nothing to score: no usable pairs".into()));
    }
    ids.close_sources(&bundle.config.model);
    let focus = train::focus_rule(&bundle.config.model, &bundle.tokenizer)?;
    let nll = train::evaluate_nll(
        bundle.model()?,
        &ids,
        focus.as_ref(),
        4096,
        transduce_train::data::shape::Shapes::Exact,
    )?;
    Ok(PairLoss {
        nll,
        pairs: ids.len(),
        params: bundle.config.model.num_params(),
    })
}

/// `eval ppl`: perplexity per target wordpiece, on sentence pairs or on treebank trees.
fn eval_ppl(
    model: &ModelArgs,
    src: Option<PathBuf>,
    tgt: Option<PathBuf>,
    trees: Option<PathBuf>,
) -> Result<()> {
    let loss = match (src, tgt, trees) {
        (Some(src), Some(tgt), None) => pair_loss(model, &src, &tgt)?,
        (None, None, Some(trees)) => tree_loss(model, &trees)?,
        _ => {
            return Err(Error::Usage(
                "give --trees (a parser), or --src and --tgt (a translator)".into(),
            ));
        }
    };
    println!(
        "perplexity {:.6} (loss {:.6} nats per target wordpiece, {} pairs)",
        loss.nll.exp(),
        loss.nll,
        loss.pairs
    );
    Ok(())
}

/// Loss per target wordpiece of a parsing model on the linearized trees of a treebank.
fn tree_loss(model: &ModelArgs, trees: &Path) -> Result<PairLoss> {
    let device = model.backend.device()?;
    let bundle = model_folder::load(
        &model.model,
        model.checkpoint.as_deref(),
        Task::Parse,
        &device,
    )?;
    if bundle.tokenizer.token_to_id(PLACEHOLDER).is_none() {
        return Err(Error::Usage(format!(
            "--trees needs a parsing model; {} has no `{PLACEHOLDER}` slot token in its vocabulary",
            model.model.display()
        )));
    }
    let mut summary = prepared::PrepareSummary::default();
    let pairs: Vec<_> = prepared::read_treebank(trees, &mut summary)?
        .iter()
        .map(linearize)
        .collect();
    let ids = prepared::encode_trees(&bundle.tokenizer, &pairs, usize::MAX, &mut summary)?;
    let skipped = summary.skipped_trees.len() + summary.empty_trees + summary.dropped_empty;
    if skipped + summary.dropped_unknown_label > 0 {
        eprintln!(
            "{}: scored {} trees; skipped {skipped} malformed or empty, \
             {} with labels outside the model's vocabulary",
            trees.display(),
            ids.len(),
            summary.dropped_unknown_label
        );
    }
    loss_of(&bundle, ids)
}

/// An error for a parsing model where sentence pairs are scored: it scores trees.
pub(super) fn refuse_parser(bundle: &transduce::Bundle, path: &Path) -> Result<()> {
    // A run folder has no task of its own: its vocabulary tells.
    let tree_vocabulary = bundle.tokenizer.token_to_id(PLACEHOLDER).is_some();
    let parser = matches!(bundle.config.task, Task::Parse)
        || (tree_vocabulary && bundle.tokenizer.token_to_id(&open_token("S")).is_some());
    if parser {
        return Err(Error::Usage(format!(
            "{} is a parsing model: score it on trees (`eval ppl --trees`)",
            path.display()
        )));
    }
    Ok(())
}
