//! Tree → (source words, target tokens), as Vinyals et al. (2015) write trees (§6.3).

use std::collections::BTreeSet;

use super::read::is_delimiter;
use super::{PLACEHOLDER, Tree};

/// A target token, as [`delinearize`], [`repair`] and [`ParseConstraint`] see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetToken<'a> {
    /// `(X`: opens a constituent labelled `X`.
    Open(&'a str),
    /// `)X`: closes the innermost constituent, which must be labelled `X`.
    Close(&'a str),
    /// [`PLACEHOLDER`]: the next word.
    Slot,
    /// Anything else (special tokens, sub-word pieces, …).
    Other,
}

impl<'a> TargetToken<'a> {
    /// Classifies a token string. A label must be non-empty and free of brackets and
    /// whitespace.
    pub fn classify(token: &'a str) -> Self {
        if token == PLACEHOLDER {
            return TargetToken::Slot;
        }
        let valid = |label: &str| !label.is_empty() && !label.contains(is_delimiter);
        if let Some(label) = token.strip_prefix('(').filter(|l| valid(l)) {
            TargetToken::Open(label)
        } else if let Some(label) = token.strip_prefix(')').filter(|l| valid(l)) {
            TargetToken::Close(label)
        } else {
            TargetToken::Other
        }
    }
}

/// The opening target token of a label: `NP` → `(NP`.
pub fn open_token(label: &str) -> String {
    format!("({label}")
}

/// The closing target token of a label: `NP` → `)NP`.
pub fn close_token(label: &str) -> String {
    format!("){label}")
}

/// Linearizes a tree as Vinyals et al. (2015) do (§6.3): depth-first, `(X` … `)X` around
/// each constituent, [`PLACEHOLDER`] for each preterminal (the POS tag is dropped).
/// Returns `(source words, target tokens)`:
///
/// ```text
/// (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
/// → ["The", "dog", "barks", "."],
///   ["(S", "(NP", "XX", "XX", ")NP", "(VP", "XX", ")VP", "XX", ")S"]
/// ```
///
/// Meant for [`preprocess`]ed trees, whose labels are non-empty (an empty label would give
/// the tokens `(` and `)`, which nothing reads back).
pub fn linearize(tree: &Tree) -> (Vec<String>, Vec<String>) {
    fn walk(tree: &Tree, words: &mut Vec<String>, tokens: &mut Vec<String>) {
        match tree {
            Tree::Phrase { label, children } => {
                tokens.push(open_token(label));
                for child in children {
                    walk(child, words, tokens);
                }
                tokens.push(close_token(label));
            }
            Tree::Word { word, .. } => {
                words.push(word.clone());
                tokens.push(PLACEHOLDER.to_string());
            }
        }
    }
    let (mut words, mut tokens) = (Vec::new(), Vec::new());
    walk(tree, &mut words, &mut tokens);
    (words, tokens)
}

/// The target-side tokens of a set of trees: [`PLACEHOLDER`] then `(X`, `)X` for every
/// phrase label, sorted by label. These should be whole tokens of the target vocabulary
/// (e.g. added tokens of the tokenizer), so that [`ParseConstraint`] can steer them.
pub fn target_vocabulary<'a>(trees: impl IntoIterator<Item = &'a Tree>) -> Vec<String> {
    fn labels<'a>(tree: &'a Tree, out: &mut BTreeSet<&'a str>) {
        if let Tree::Phrase { label, children } = tree {
            if !label.is_empty() {
                out.insert(label);
            }
            children.iter().for_each(|c| labels(c, out));
        }
    }
    let mut set = BTreeSet::new();
    trees.into_iter().for_each(|t| labels(t, &mut set));
    let mut out = vec![PLACEHOLDER.to_string()];
    for label in set {
        out.push(open_token(label));
        out.push(close_token(label));
    }
    out
}
