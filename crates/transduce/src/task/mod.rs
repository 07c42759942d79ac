//! What differs per task: translation needs nothing beyond the tokenizer; parsing (§6.3)
//! has trees, their linearization and the well-formedness constraint.

pub mod parse;

use crate::decode::Constraint;
use parse::ParseConstraint;

/// The parse constraint for one batch of sentences: sentence `i` has `words[i]` words and
/// may produce at most `max_len[i]` tokens (EOS included), so every decoded output is a
/// well-formed tree with exactly one slot per word.
pub struct TreeConstraint<'a> {
    pub rules: &'a ParseConstraint,
    pub words: Vec<usize>,
    pub max_len: Vec<usize>,
}

impl Constraint for TreeConstraint<'_> {
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]) {
        self.rules.restrict_within(
            self.words[sentence],
            self.max_len[sentence],
            prefix,
            allowed,
        );
    }
}
