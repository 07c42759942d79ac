//! `transduce score`: log p(target | source) of sentence pairs under a model, by teacher
//! forcing, one line per pair. What rescoring an n-best list with other models needs (as
//! `marian-scorer` or CTranslate2's `score_batch`), and filtering pairs by a model.

use std::path::{Path, PathBuf};

use clap::Args;
use transduce::Task;

use super::{ModelArgs, write_output};
use crate::options;
use transduce_train::data::{self, cache::Pairs};
use transduce_train::error::{Error, Result};
use transduce_train::{model_folder, train};

#[derive(Args)]
pub struct ScoreCmd {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Source sentences, one a line.
    #[arg(long)]
    pub src: PathBuf,
    /// Target sentences, one a line beside each source; with --nbest, an n-best list as
    /// `translate --nbest` writes it (`LINE ||| TRANSLATION ||| …`, LINE counted from 0),
    /// each entry scored against source line LINE.
    #[arg(long)]
    pub tgt: PathBuf,
    /// --tgt is an n-best list.
    #[arg(long)]
    pub nbest: bool,
    /// Output file (default: standard output): one line per pair (per n-best entry),
    /// `LOG-PROB<TAB>WORDPIECES`, the natural-log probability of the target's wordpieces
    /// and their count, EOS included in both.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Source plus target wordpieces per batch.
    #[arg(long, default_value_t = 4096, value_parser = options::count)]
    pub max_tokens: usize,
}

pub fn run(cmd: ScoreCmd) -> Result<()> {
    // (source line, target) entries: an n-best list names its source lines, a parallel
    // file pairs line with line.
    let (sources, targets): (Vec<String>, Vec<(usize, String)>) = if cmd.nbest {
        let sources = data::corpus::read_lines(&cmd.src)?;
        let list = data::corpus::read_lines(&cmd.tgt)?;
        let entries = nbest_entries(&list, &cmd.tgt, sources.len())?;
        (sources, entries)
    } else {
        data::corpus::read_parallel(&cmd.src, &cmd.tgt)?
            .into_iter()
            .enumerate()
            .map(|(i, (src, tgt))| (src, (i, tgt)))
            .unzip()
    };
    let device = cmd.model.backend.device()?;
    let task = Task::Translate {
        source: String::new(),
        target: String::new(),
    };
    let bundle = model_folder::load(
        &cmd.model.model,
        cmd.model.checkpoint.as_deref(),
        task,
        &device,
    )?;
    super::eval::refuse_parser(&bundle, &cmd.model.model)?;
    let config = &bundle.config.model;
    let encoded: Vec<Vec<u32>> = sources
        .iter()
        .map(|s| bundle.tokenizer.encode(s.trim()))
        .collect::<transduce::Result<_>>()?;
    let mut pairs = Pairs::default();
    for (at, (line, target)) in targets.iter().enumerate() {
        let src = &encoded[*line];
        // Where the trouble is: the source file's line, and the n-best file's.
        let place = || match cmd.nbest {
            true => format!("{}, line {}", cmd.tgt.display(), at + 1),
            false => format!("{}, line {}", cmd.src.display(), line + 1),
        };
        if src.is_empty() {
            return Err(Error::Usage(format!(
                "{}: the source is empty; there is nothing to condition on",
                place()
            )));
        }
        let tgt = bundle.tokenizer.encode(target.trim())?;
        for len in [src.len(), tgt.len() + 1] {
            config
                .check_length(len)
                .map_err(|e| Error::Usage(format!("{}: {e}", place())))?;
        }
        pairs.push(src.clone(), tgt);
    }
    let focus = train::focus_rule(config, &bundle.tokenizer)?;
    let sums = train::sentence_log_probs(bundle.model()?, &pairs, focus.as_ref(), cmd.max_tokens)?;
    let lines: Vec<String> = sums
        .iter()
        .zip(&pairs.tgt)
        .map(|(sum, tgt)| format!("{sum:.6}\t{}", tgt.len() + 1))
        .collect();
    write_output(&lines, cmd.output.as_deref())
}

/// The (source line, translation) entries of an n-best list, in file order.
pub(crate) fn nbest_entries(
    lines: &[String],
    path: &Path,
    sources: usize,
) -> Result<Vec<(usize, String)>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let bad = |message: String| Error::Format {
                path: path.to_path_buf(),
                message: format!("line {}: {message}", i + 1),
            };
            let mut fields = line.split(" ||| ");
            let (Some(index), Some(text)) = (fields.next(), fields.next()) else {
                return Err(bad(
                    "not an n-best entry (`LINE ||| TRANSLATION ||| …`)".into()
                ));
            };
            let index: usize = index
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{index}` is not a line number (counted from 0)")))?;
            if index >= sources {
                return Err(bad(format!(
                    "source line {index} (counted from 0) is past the sources' {sources} lines"
                )));
            }
            Ok((index, text.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn nbest_entries_pair_each_translation_with_its_source_line() {
        let list = lines(&[
            "0 ||| Ein Hund. ||| -1.5 ||| -1.2",
            "0 ||| Ein Hund ||| -2.0 ||| -1.7",
            "1 |||  ||| 0 ||| 0",
        ]);
        let entries = nbest_entries(&list, Path::new("n.best"), 2).unwrap();
        assert_eq!(
            entries,
            vec![
                (0, "Ein Hund.".to_string()),
                (0, "Ein Hund".to_string()),
                (1, String::new())
            ]
        );
    }

    #[test]
    fn nbest_entries_name_the_bad_line() {
        let err = nbest_entries(&lines(&["0 ||| a", "x ||| b"]), Path::new("n.best"), 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("n.best: line 2") && err.contains("`x`"),
            "{err}"
        );
        let err = nbest_entries(&lines(&["3 ||| a"]), Path::new("n.best"), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1") && err.contains("past"), "{err}");
        let err = nbest_entries(&lines(&["just text"]), Path::new("n.best"), 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not an n-best entry"), "{err}");
    }
}
