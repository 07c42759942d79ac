//! A teacher that two models make together by rescoring (the rescoring teacher of
//! docs/RESULTS.md's mixed translators): each model translates every source, the
//! candidates of both are pooled, every candidate is scored under both models by teacher
//! forcing (`transduce score`), and each line keeps the candidate with the best
//! Σ w·log p / lp(|Y|), each model's log-probability over the GNMT length penalty (§6.1)
//! of its own wordpiece count. The models need not share a vocabulary, which is why this
//! is rescoring and not an ensemble (an ensemble averages distributions over one
//! vocabulary).

use std::path::Path;

use transduce::decode::length_penalty;

use crate::cmd::{self, score::ScoreCmd};
use transduce_train::data;
use transduce_train::error::{Error, Result};

use super::argv::Argv;

/// One model's part: its decoding arguments (`--model …`, `--backend …`) and its weight.
pub struct Scorer {
    pub args: Vec<String>,
    pub weight: f64,
}

/// Translates `input` by each scorer's model (its own beam-search best), rescores the
/// pooled candidates under every model and writes each line's best to `output`. The
/// intermediate files go to `dir`.
pub fn translate(
    scorers: &[Scorer],
    alpha: f64,
    input: &Path,
    output: &Path,
    dir: &Path,
) -> Result<()> {
    let sources = data::corpus::read_lines(input)?;
    let mut lists = Vec::new();
    for (i, scorer) in scorers.iter().enumerate() {
        let list = dir.join(format!("candidates-{i}.nbest"));
        let mut args = scorer.args.clone();
        args.extend(["--nbest".into(), "1".into(), "--quiet".into()]);
        super::outputs::translate(args, input, &list)?;
        lists.extend(data::corpus::read_lines(&list)?);
    }
    let entries = pool(cmd::score::nbest_entries(
        &lists,
        &dir.join("candidates"),
        sources.len(),
    )?);
    let union = dir.join("union.nbest");
    super::outputs::write_lines(
        &union,
        entries
            .iter()
            .map(|(i, t)| format!("{i} ||| {t}"))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str),
    )?;
    let mut scores = Vec::new();
    for (i, scorer) in scorers.iter().enumerate() {
        let file = dir.join(format!("scores-{i}.txt"));
        // `score` reads the model arguments `translate` does, less the decoding ones.
        let mut args: Vec<String> = model_only(&scorer.args);
        args.extend([
            "--src".into(),
            input.display().to_string(),
            "--tgt".into(),
            union.display().to_string(),
            "--nbest".into(),
            "--output".into(),
            file.display().to_string(),
        ]);
        cmd::score::run(Argv::<ScoreCmd>::read(&args)?)?;
        scores.push((
            parse_scores(&data::corpus::read_lines(&file)?, &file)?,
            scorer.weight,
        ));
    }
    let best = rerank(&entries, &scores, alpha, sources.len());
    super::outputs::write_lines(output, best.iter().map(String::as_str))
}

/// `--model`, `--checkpoint` and `--backend` of a translate command line.
fn model_only(args: &[String]) -> Vec<String> {
    args.chunks(2)
        .filter(|pair| matches!(pair[0].as_str(), "--model" | "--checkpoint" | "--backend"))
        .flatten()
        .cloned()
        .collect()
}

/// The candidates of all lists, each translation of a line once (the first list's entry
/// stays first), ordered by line and stable within it: `rescored-teacher.sh`'s union.
pub fn pool(entries: Vec<(usize, String)>) -> Vec<(usize, String)> {
    let mut seen = std::collections::HashSet::new();
    let mut kept: Vec<(usize, String)> = entries
        .into_iter()
        .filter(|e| seen.insert(e.clone()))
        .collect();
    kept.sort_by_key(|(line, _)| *line);
    kept
}

/// `LOG-PROB<TAB>WORDPIECES` lines as `transduce score` writes them.
fn parse_scores(lines: &[String], path: &Path) -> Result<Vec<(f64, usize)>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (lp, n) = l.split_once('\t').unwrap_or((l, ""));
            match (lp.parse::<f64>(), n.parse::<usize>()) {
                (Ok(lp), Ok(n)) => Ok((lp, n)),
                _ => Err(Error::Format {
                    path: path.to_path_buf(),
                    message: format!("line {}: not `LOG-PROB<TAB>WORDPIECES`", i + 1),
                }),
            }
        })
        .collect()
}

/// Each line's candidate with the highest Σ w·log p / lp under the models' scores (one
/// `(log p, wordpieces)` per entry for each model); on a tie the earlier entry stays; a
/// line without candidates is empty.
pub fn rerank(
    entries: &[(usize, String)],
    scores: &[(Vec<(f64, usize)>, f64)],
    alpha: f64,
    lines: usize,
) -> Vec<String> {
    let mut best: Vec<Option<(f64, &str)>> = vec![None; lines];
    for (k, (line, text)) in entries.iter().enumerate() {
        let total: f64 = scores
            .iter()
            .map(|(s, w)| w * s[k].0 / length_penalty(s[k].1, alpha))
            .sum();
        if best[*line].is_none_or(|(b, _)| total > b) {
            best[*line] = Some((total, text));
        }
    }
    best.into_iter()
        .map(|b| b.map_or(String::new(), |(_, t)| t.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(line: usize, text: &str) -> (usize, String) {
        (line, text.to_string())
    }

    #[test]
    fn pool_keeps_each_translation_of_a_line_once_in_line_order() {
        let pooled = pool(vec![
            e(0, "Ein Hund."),
            e(1, "Eine Katze."),
            e(0, "Ein Hund."),
            e(0, "Der Hund."),
            e(1, "Eine Katze."),
        ]);
        assert_eq!(
            pooled,
            [e(0, "Ein Hund."), e(0, "Der Hund."), e(1, "Eine Katze.")]
        );
    }

    #[test]
    fn rerank_weighs_each_models_length_normalised_score() {
        let entries = [e(0, "kurz"), e(0, "etwas länger"), e(1, "x")];
        // Model A prefers the short candidate, model B the long one by more.
        let a = vec![(-2.0, 2), (-3.0, 4), (-1.0, 2)];
        let b = vec![(-9.0, 2), (-3.0, 5), (-1.0, 2)];
        let alpha = 1.0;
        // With A alone the short one wins; with weight 0.6 on A, B's margin decides.
        assert_eq!(
            rerank(&entries, &[(a.clone(), 1.0)], alpha, 3),
            ["kurz", "x", ""]
        );
        let both = rerank(&entries, &[(a.clone(), 0.6), (b.clone(), 0.4)], alpha, 3);
        let score = |k: usize| {
            0.6 * a[k].0 / length_penalty(a[k].1, alpha)
                + 0.4 * b[k].0 / length_penalty(b[k].1, alpha)
        };
        assert!(score(1) > score(0));
        assert_eq!(both, ["etwas länger", "x", ""]);
    }

    #[test]
    fn rerank_keeps_the_earlier_entry_on_a_tie() {
        let entries = [e(0, "first"), e(0, "second")];
        let s = vec![(-1.0, 3), (-1.0, 3)];
        assert_eq!(rerank(&entries, &[(s, 1.0)], 0.6, 1), ["first"]);
    }

    #[test]
    fn the_length_penalty_is_gnmts() {
        assert_eq!(length_penalty(1, 0.6), 1.0);
        assert!((length_penalty(7, 1.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn model_only_keeps_the_model_and_backend_arguments() {
        let args: Vec<String> = [
            "--model",
            "a",
            "--beam",
            "8",
            "--backend",
            "cpu",
            "--alpha",
            "2",
        ]
        .map(String::from)
        .into();
        assert_eq!(model_only(&args), ["--model", "a", "--backend", "cpu"]);
    }
}
