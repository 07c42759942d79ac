//! How stages decode and score: a model's arguments for `transduce translate`, corpus BLEU
//! as sacreBLEU computes it, bracket F1 as EVALB does.

use std::path::Path;

use transduce::bundle::{BundleConfig, CONFIG_FILE};

use crate::cmd;
use transduce_train::data;
use transduce_train::error::{Error, Result, io};

use super::outputs::translate;
use super::plan::Model;

/// `--model`/`--checkpoint` arguments for a model or an ensemble.
pub fn model_args(models: &[Model]) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for m in models {
        args.extend(["--model".to_string(), m.path.display().to_string()]);
    }
    let with = models.iter().filter(|m| m.checkpoint.is_some()).count();
    if with == models.len() {
        for m in models {
            if let Some(c) = &m.checkpoint {
                args.extend(["--checkpoint".to_string(), c.display().to_string()]);
            }
        }
    } else if with > 0 {
        return Err(Error::Usage(
            "an ensemble of averaged weights and other models: export the averages first \
             (an export stage)"
                .into(),
        ));
    }
    Ok(args)
}

/// A beam and α to decode a set with, and what it scores.
pub struct Decoding<'a> {
    pub beam: usize,
    pub alpha: f64,
    pub backend: &'a str,
}

impl Decoding<'_> {
    /// Translates `src` into `hyp` with `model` (`--model …` arguments) and scores it
    /// against `reference`: corpus BLEU.
    pub fn bleu(
        &self,
        mut model: Vec<String>,
        src: &Path,
        reference: &Path,
        hyp: &Path,
    ) -> Result<f64> {
        model.extend([
            "--beam".into(),
            self.beam.to_string(),
            "--alpha".into(),
            self.alpha.to_string(),
            "--backend".into(),
            self.backend.to_string(),
        ]);
        translate(model, src, hyp)?;
        Ok(bleu(hyp, reference)?.0)
    }
}

/// The length penalty α a bundle decodes with (its card's `decoding`).
pub fn bundle_alpha(bundle: &Path) -> Result<f64> {
    let path = bundle.join(CONFIG_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let config = BundleConfig::from_json(&bytes).map_err(|e| Error::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(config.decoding.alpha)
}

/// Corpus BLEU as sacreBLEU computes it by default, and its signature.
pub fn bleu(hyp: &Path, reference: &Path) -> Result<(f64, String)> {
    use transduce_metrics::bleu;
    let usage = |e: bleu::BleuError| Error::Usage(e.to_string());
    let options = bleu::BleuOptions {
        lowercase: false,
        tokenize: "13a".parse().map_err(usage)?,
        smooth_method: "exp".parse().map_err(usage)?,
        smooth_value: None,
        effective_order: None,
    };
    let hyps = cmd::read_input(Some(hyp))?;
    let refs = cmd::read_input(Some(reference))?;
    if refs.len() != hyps.len() {
        return Err(Error::LineCount {
            src_path: hyp.to_path_buf(),
            src_lines: hyps.len(),
            tgt_path: reference.to_path_buf(),
            tgt_lines: refs.len(),
        });
    }
    let score = bleu::corpus_bleu_streams(&hyps, &[refs], &options).map_err(usage)?;
    Ok((score.score, format!("BLEU|{}", score.signature())))
}

/// Bracket F1 as EVALB with COLLINS.prm computes it.
pub fn bracket_f1(gold: &Path, test: &Path) -> Result<f64> {
    use transduce_metrics::evalb;
    let gold_text = String::from_utf8_lossy(&data::corpus::read_bytes(gold)?).to_string();
    let test_text = String::from_utf8_lossy(&data::corpus::read_bytes(test)?).to_string();
    let report = evalb::evaluate_text(&gold_text, &test_text, &evalb::EvalbParams::collins())
        .map_err(|e| Error::Usage(format!("{} vs {}: {e}", gold.display(), test.display())))?;
    Ok(report.summary_all.bracketing_fmeasure())
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
