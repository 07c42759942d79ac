//! What differs per task: translation needs nothing beyond the tokenizer; parsing (§6.3)
//! has trees, their linearization and the well-formedness constraint.

pub mod channel;
pub mod focus;
pub mod parse;
pub mod translate;
pub mod vote;
pub mod words;

use crate::bundle::Bundle;
use crate::config::ModelConfig;
use crate::decode::{Constraint, DecodeOptions, Ensemble, best_outputs_async, max_output_len};
use crate::error::{Error, Result};
use crate::tokenizer::{EOS, Tokenizer};
use focus::WordFocus;
use parse::{PLACEHOLDER, ParseConstraint, Tree, delinearize, repair};

/// The parse constraint for one batch of sentences: sentence `i` has `words[i]` words and
/// may produce at most `max_len[i]` tokens (EOS included), so every decoded output is a
/// well-formed tree with exactly one slot per word. With `enforce` off it forbids nothing
/// and only answers word focus.
pub struct TreeConstraint<'a> {
    pub rules: &'a ParseConstraint,
    pub words: Vec<usize>,
    pub max_len: Vec<usize>,
    pub enforce: bool,
    /// The focus rule and each sentence's word starts (source positions).
    pub focus: Option<(&'a WordFocus, Vec<Vec<usize>>)>,
}

impl Constraint for TreeConstraint<'_> {
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]) {
        if self.enforce {
            self.rules.restrict_within(
                self.words[sentence],
                self.max_len[sentence],
                prefix,
                allowed,
            );
        }
    }

    fn restricts(&self) -> bool {
        self.enforce
    }

    fn has_focus(&self) -> bool {
        self.focus.is_some()
    }

    fn focus(&self, sentence: usize, prefix: &[u32]) -> Option<usize> {
        let (rule, starts) = self.focus.as_ref()?;
        rule.next(&starts[sentence], prefix)
    }
}

/// One parsed sentence.
#[derive(Clone, Debug, PartialEq)]
pub struct Parse {
    /// The tree over exactly the input words; POS tags are [`parse::PLACEHOLDER`].
    pub tree: Tree,
    /// Whether the decoder's own output was a well-formed tree with one slot per word;
    /// `false` means [`repair`] had to fix it (never with the constraint on).
    pub well_formed: bool,
}

/// Parsing with a bundle (§6.3): words in, a linearized tree decoded, the tree rebuilt.
pub struct Parser {
    rules: ParseConstraint,
    focus: Option<WordFocus>,
    vocab: Vec<String>,
}

impl Parser {
    /// Reads the tree tokens (`(X`, `)X`, `XX`) of the bundle's vocabulary.
    pub fn new(bundle: &Bundle) -> Result<Self> {
        Self::from_tokenizer(&bundle.tokenizer, bundle.config.model.vocab_size)
    }

    /// [`Parser::new`] from a tokenizer and the model's vocabulary size.
    pub fn from_tokenizer(tokenizer: &Tokenizer, vocab_size: usize) -> Result<Self> {
        let vocab = tokenizer.id_strings(vocab_size);
        if !vocab.iter().any(|t| t == PLACEHOLDER) {
            return Err(Error::Tokenizer(format!(
                "no `{PLACEHOLDER}` token: this is not a parsing model's vocabulary"
            )));
        }
        Ok(Parser {
            rules: ParseConstraint::new(&vocab, EOS),
            focus: WordFocus::from_vocab(&vocab),
            vocab,
        })
    }

    /// [`Parser::parse_with_async`], blocking (native callers).
    pub fn parse_with<'m>(
        &self,
        tokenizer: &Tokenizer,
        models: impl Into<Ensemble<'m>>,
        sentences: &[Vec<String>],
        options: &DecodeOptions,
        constrained: bool,
    ) -> Result<Vec<Parse>> {
        pollster::block_on(self.parse_with_async(
            tokenizer,
            models,
            sentences,
            options,
            constrained,
        ))
    }

    /// Parses sentences given as words (treebank tokens, e.g. from
    /// [`words::ptb_words`]). With `constrained`, decoding may only write well-formed
    /// trees over exactly the given words; without, malformed output is [`repair`]ed.
    pub async fn parse_async(
        &self,
        bundle: &Bundle,
        sentences: &[Vec<String>],
        options: &DecodeOptions,
        constrained: bool,
    ) -> Result<Vec<Parse>> {
        self.parse_with_async(
            &bundle.tokenizer,
            bundle.scorer(),
            sentences,
            options,
            constrained,
        )
        .await
    }

    /// [`Parser::parse_async`] with any tokenizer and models: one model or an [`Ensemble`]
    /// whose members share this parser's vocabulary.
    pub async fn parse_with_async<'m>(
        &self,
        tokenizer: &Tokenizer,
        models: impl Into<Ensemble<'m>>,
        sentences: &[Vec<String>],
        options: &DecodeOptions,
        constrained: bool,
    ) -> Result<Vec<Parse>> {
        let models: Ensemble = models.into();
        let configs = models.configs();
        self.parse_by(
            tokenizer,
            &configs,
            sentences,
            options,
            constrained,
            async |sources: &[Vec<u32>], constraint: &dyn Constraint| {
                best_outputs_async(&models, sources, options, Some(constraint)).await
            },
        )
        .await
    }

    /// Parsing with any decoder (e.g. the GPU's): `decode` gets the sources' ids and the
    /// tree constraint and returns each source's best output ids. `configs` are the
    /// models' configurations (one per ensemble member).
    pub async fn parse_by(
        &self,
        tokenizer: &Tokenizer,
        configs: &[&ModelConfig],
        sentences: &[Vec<String>],
        options: &DecodeOptions,
        constrained: bool,
        decode: impl AsyncFnOnce(&[Vec<u32>], &dyn Constraint) -> Result<Vec<Vec<u32>>>,
    ) -> Result<Vec<Parse>> {
        let mut sources = Vec::with_capacity(sentences.len());
        for (i, words) in sentences.iter().enumerate() {
            if words.is_empty() {
                return Err(Error::Input(format!("sentence {i} has no words")));
            }
            sources.push(tokenizer.encode(&words.join(" "))?);
        }
        let focus = self
            .focus
            .as_ref()
            .filter(|_| configs.iter().any(|c| c.word_focus))
            .map(|rule| (rule, sources.iter().map(|s| rule.word_starts(s)).collect()));
        let constraint = TreeConstraint {
            rules: &self.rules,
            words: sentences.iter().map(Vec::len).collect(),
            max_len: sources
                .iter()
                .map(|s| {
                    configs
                        .iter()
                        .map(|c| max_output_len(c, s.len(), options))
                        .min()
                        .unwrap_or(0)
                })
                .collect(),
            enforce: constrained,
            focus,
        };
        let outputs = decode(&sources, &constraint as &dyn Constraint).await?;
        Ok(outputs
            .iter()
            .zip(sentences)
            .map(|(ids, words)| {
                let tokens: Vec<&str> = ids
                    .iter()
                    .map(|&id| self.vocab.get(id as usize).map_or("", String::as_str))
                    .collect();
                match delinearize(&tokens, words) {
                    Ok(tree) => Parse {
                        tree,
                        well_formed: true,
                    },
                    Err(_) => Parse {
                        tree: repair(&tokens, words),
                        well_formed: false,
                    },
                }
            })
            .collect())
    }
}

/// The right-branching baseline of parsing papers: every word opens a constituent that
/// spans the rest of the sentence, `(S w1 (S w2 (S w3 w4)))`, with final punctuation
/// attached to the root. Scored by the same evaluator as the model, it shows how much of
/// the F1 the model earns beyond English's tendency to branch right.
pub fn right_branching(words: &[String], label: &str) -> Tree {
    use parse::PLACEHOLDER as XX;
    let mut words: Vec<&String> = words.iter().collect();
    let punct = match words.last() {
        Some(w) if words.len() > 1 && matches!(w.as_str(), "." | "?" | "!") => words.pop(),
        _ => None,
    };
    let mut tree: Option<Tree> = None;
    for (i, w) in words.iter().enumerate().rev() {
        let leaf = Tree::word(XX, w.as_str());
        tree = Some(match tree {
            None if i == 0 => Tree::phrase(label, vec![leaf]),
            None => leaf,
            Some(rest) => Tree::phrase(label, vec![leaf, rest]),
        });
    }
    let mut root = tree.unwrap_or_else(|| Tree::phrase(label, Vec::new()));
    if let (Some(p), Tree::Phrase { children, .. }) = (punct, &mut root) {
        children.push(Tree::word(XX, p.as_str()));
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;
    use parse::print_tree;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn right_branching_shape() {
        let t = right_branching(&words("a b c ."), "S");
        assert_eq!(print_tree(&t, false), "(S (XX a) (S (XX b) (XX c)) (XX .))");
        assert_eq!(
            print_tree(&right_branching(&words("a"), "S"), false),
            "(S (XX a))"
        );
        assert_eq!(t.words(), ["a", "b", "c", "."]);
    }
}
