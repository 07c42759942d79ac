//! Parsing for `transduce parse` (§6.3): sentences in (raw text or the words of gold
//! trees), bracketed trees out in the format EVALB reads, by one model, several (mean or
//! vote) or the right-branching baseline.

use indicatif::{ProgressBar, ProgressStyle};
use transduce::Bundle;
use transduce::decode::{Constraint, DecodeOptions, Ensemble};
use transduce::task::parse::{Tree, parse_trees, preprocess, print_tree};
use transduce::task::vote::vote;
use transduce::task::words::ptb_words;
use transduce::task::{Parser, right_branching};
use transduce_gpu::GpuModel;

use transduce_train::error::{Error, Result};

/// One input line: its words, and POS tags when the line was a tree.
pub struct Sentence {
    pub words: Vec<String>,
    pub tags: Option<Vec<String>>,
}

/// Reads input lines: a line starting with `(` is a treebank tree whose words (and tags)
/// are taken, as when re-parsing a gold file for evaluation; other lines are treebank
/// tokens separated by spaces. With `raw`, every line is raw English, including one that
/// opens with a bracket ("(In 2003, ...").
pub fn read_sentences(lines: &[String], raw: bool, input: &str) -> Result<Vec<Sentence>> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let text = line.trim();
            if !raw && text.starts_with('(') {
                let trees = parse_trees(text)
                    .map_err(|e| Error::Usage(format!("{input}, line {}: {}", i + 1, e.kind)))?;
                let tree: Option<Tree> = match trees.as_slice() {
                    [t] => preprocess(t),
                    _ => {
                        return Err(Error::Usage(format!(
                            "{input}, line {}: expected one tree, found {}",
                            i + 1,
                            trees.len()
                        )));
                    }
                };
                Ok(match tree {
                    Some(t) => Sentence {
                        words: t.words().into_iter().map(str::to_string).collect(),
                        tags: Some(t.tags().into_iter().map(str::to_string).collect()),
                    },
                    None => Sentence {
                        words: Vec::new(),
                        tags: None,
                    },
                })
            } else if raw {
                Ok(Sentence {
                    words: ptb_words(text),
                    tags: None,
                })
            } else {
                Ok(Sentence {
                    words: text.split_whitespace().map(str::to_string).collect(),
                    tags: None,
                })
            }
        })
        .collect()
}

/// How the trees are made.
pub enum Method {
    Model {
        constrained: bool,
        options: DecodeOptions,
        batch_size: usize,
        combine: Combine,
    },
    RightBranching,
}

/// How several models make one tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Combine {
    /// One beam search, each next token scored by the mean of the models'
    /// log-probabilities (the models must share a vocabulary).
    Mean,
    /// Each model parses alone; the constituents at least half of them propose are kept,
    /// the non-crossing set with the most votes (Henderson & Brill 1999, Sagae & Lavie
    /// 2006). Any parsing models, whatever their vocabularies.
    Vote,
}

/// Parses every sentence with `bundles` (one model, or several combined as `combine` in
/// [`Method::Model`] says); returns one output line each (empty for a sentence without
/// words) and how many model outputs were malformed and had to be repaired (summed over
/// the models when they vote).
pub fn parse_sentences(
    bundles: &[Bundle],
    gpu: Option<&GpuModel>,
    sentences: &[Sentence],
    method: &Method,
    progress: bool,
) -> Result<(Vec<String>, usize)> {
    let (trees, malformed) = parse_trees_with(bundles, gpu, sentences, method, progress)?;
    let lines = trees
        .into_iter()
        .zip(sentences)
        .map(|(tree, s)| match tree {
            None => String::new(),
            Some(tree) => {
                let tree = s
                    .tags
                    .as_ref()
                    .and_then(|tags| tree.with_tags(tags))
                    .unwrap_or(tree);
                print_tree(&tree, true)
            }
        })
        .collect();
    Ok((lines, malformed))
}

/// The trees of [`parse_sentences`] (`None` for a sentence without words), with
/// placeholder tags, and the count of repaired outputs. With `gpu`, the one model decodes
/// on the GPU decoder.
fn parse_trees_with(
    bundles: &[Bundle],
    gpu: Option<&GpuModel>,
    sentences: &[Sentence],
    method: &Method,
    progress: bool,
) -> Result<(Vec<Option<Tree>>, usize)> {
    let mut trees: Vec<Option<Tree>> = vec![None; sentences.len()];
    let mut malformed = 0;
    match method {
        Method::RightBranching => {
            for (slot, s) in trees.iter_mut().zip(sentences) {
                if !s.words.is_empty() {
                    *slot = Some(right_branching(&s.words, "S"));
                }
            }
        }
        Method::Model {
            combine: Combine::Vote,
            constrained,
            options,
            batch_size,
        } if bundles.len() > 1 => {
            let alone = Method::Model {
                constrained: *constrained,
                options: options.clone(),
                batch_size: *batch_size,
                combine: Combine::Mean,
            };
            let mut parses = Vec::with_capacity(bundles.len());
            for bundle in bundles {
                let (member, repaired) = parse_trees_with(
                    std::slice::from_ref(bundle),
                    None,
                    sentences,
                    &alone,
                    progress,
                )?;
                malformed += repaired;
                parses.push(member);
            }
            for (i, slot) in trees.iter_mut().enumerate() {
                let votes: Vec<Tree> = parses.iter_mut().filter_map(|p| p[i].take()).collect();
                if !votes.is_empty() {
                    *slot = Some(
                        vote(&votes)
                            .map_err(|e| Error::Usage(format!("sentence {}: {e}", i + 1)))?,
                    );
                }
            }
        }
        Method::Model {
            constrained,
            options,
            batch_size,
            ..
        } => {
            let bundle = bundles
                .first()
                .ok_or_else(|| Error::Usage("--model is required".into()))?;
            let parser = Parser::new(bundle)?;
            let models = Ensemble::of_bundles(bundles)?;
            let mut order: Vec<usize> = (0..sentences.len())
                .filter(|&i| !sentences[i].words.is_empty())
                .collect();
            order.sort_by_key(|&i| (sentences[i].words.len(), i));
            let bar = if progress {
                ProgressBar::new(order.len() as u64).with_style(
                    ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:30}] {pos}/{len} sentences, eta {eta}",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                )
            } else {
                ProgressBar::hidden()
            };
            for chunk in order.chunks((*batch_size).max(1)) {
                let words: Vec<Vec<String>> =
                    chunk.iter().map(|&i| sentences[i].words.clone()).collect();
                let parses = match gpu {
                    Some(gpu) => pollster::block_on(parser.parse_by(
                        &bundle.tokenizer,
                        &[&bundle.config.model],
                        &words,
                        options,
                        *constrained,
                        async |sources: &[Vec<u32>], constraint: &dyn Constraint| {
                            gpu.best_outputs(sources, options, Some(constraint)).await
                        },
                    ))?,
                    None => parser.parse_with(
                        &bundle.tokenizer,
                        &models,
                        &words,
                        options,
                        *constrained,
                    )?,
                };
                for (&i, p) in chunk.iter().zip(parses) {
                    malformed += usize::from(!p.well_formed);
                    trees[i] = Some(p.tree);
                }
                bar.inc(chunk.len() as u64);
            }
            bar.finish_and_clear();
        }
    }
    Ok((trees, malformed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_text_opening_with_a_bracket_is_text_not_a_tree() {
        let lines = vec!["(In 2003, prices rose.)".to_string()];
        let raw = read_sentences(&lines, true, "in.txt").unwrap();
        assert_eq!(
            raw[0].words,
            ["-LRB-", "In", "2003", ",", "prices", "rose", ".", "-RRB-"]
        );
        assert!(raw[0].tags.is_none());
        // Without --raw the same line is read as a (malformed) tree, and said so.
        let e = read_sentences(&lines, false, "in.txt").err().unwrap();
        assert!(e.to_string().starts_with("in.txt, line 1: "), "{e}");
        let tree = vec!["(S (NP (DT The) (NN dog)) (VP (VBZ barks)))".to_string()];
        let read = read_sentences(&tree, false, "in.txt").unwrap();
        assert_eq!(read[0].words, ["The", "dog", "barks"]);
        assert_eq!(read[0].tags.as_deref().unwrap(), ["DT", "NN", "VBZ"]);
    }
}
