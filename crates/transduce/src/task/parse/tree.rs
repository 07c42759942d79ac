//! The constituency tree of the parsing task (§6.3).

use super::PLACEHOLDER;

/// A constituency tree. Words always sit under their POS tag (the preterminal), as in the
/// Penn Treebank: `(NN dog)` is [`Tree::Word`], every other bracket is [`Tree::Phrase`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tree {
    /// A constituent. `label` is empty only for the outermost bracket of a treebank tree
    /// as read (`( (S ...) )`); [`preprocess`] removes that bracket.
    Phrase {
        /// Constituent label, e.g. `NP` or, before [`preprocess`], `NP-SBJ-1`.
        label: String,
        /// Sub-trees in sentence order; never empty in trees built by this module.
        children: Vec<Tree>,
    },
    /// A preterminal: a word with its POS tag.
    Word {
        /// POS tag, e.g. `NN`, `-LRB-` or `-NONE-`.
        tag: String,
        /// The word itself.
        word: String,
    },
}

impl Tree {
    /// A constituent.
    pub fn phrase(label: impl Into<String>, children: Vec<Tree>) -> Tree {
        Tree::Phrase {
            label: label.into(),
            children,
        }
    }

    /// A preterminal.
    pub fn word(tag: impl Into<String>, word: impl Into<String>) -> Tree {
        Tree::Word {
            tag: tag.into(),
            word: word.into(),
        }
    }

    /// The constituent label or, for a preterminal, the POS tag.
    pub fn label(&self) -> &str {
        match self {
            Tree::Phrase { label, .. } => label,
            Tree::Word { tag, .. } => tag,
        }
    }

    /// The words in sentence order (the yield), `-NONE-` elements included if present.
    pub fn words(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |_, w| out.push(w));
        out
    }

    /// The POS tags in sentence order.
    pub fn tags(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |t, _| out.push(t));
        out
    }

    /// The same tree with the POS tags replaced, in order, by `tags`; `None` if the number
    /// of tags differs from the number of words.
    ///
    /// Needed before scoring a predicted tree: its tags are all [`PLACEHOLDER`], but EVALB
    /// (`COLLINS.prm`) drops punctuation by *tag* (`,` `:` ` `` ` `''` `.`) in gold and test
    /// alike, so the predicted tree must carry the gold (or a tagger's) tags, or the
    /// sentence lengths differ and EVALB reports `Length unmatch`.
    pub fn with_tags<S: AsRef<str>>(&self, tags: &[S]) -> Option<Tree> {
        let mut next = 0;
        let tree = self.map_tags(&mut |_| {
            let tag = tags.get(next).map(|t| t.as_ref().to_string());
            next += 1;
            tag.unwrap_or_default()
        });
        (next == tags.len()).then_some(tree)
    }

    /// The same tree with every POS tag replaced by [`PLACEHOLDER`]: what
    /// [`delinearize`] gives back for it.
    pub fn with_placeholder_tags(&self) -> Tree {
        self.map_tags(&mut |_| PLACEHOLDER.to_string())
    }

    /// Bracket nesting depth: a preterminal is 0 (it is the `XX` slot of the target), a
    /// constituent is one more than its deepest child. This is the depth
    /// [`ParseConstraint`]'s cap counts.
    pub fn depth(&self) -> usize {
        match self {
            Tree::Word { .. } => 0,
            Tree::Phrase { children, .. } => {
                1 + children.iter().map(Tree::depth).max().unwrap_or(0)
            }
        }
    }

    fn for_each_leaf<'a>(&'a self, f: &mut impl FnMut(&'a str, &'a str)) {
        match self {
            Tree::Phrase { children, .. } => children.iter().for_each(|c| c.for_each_leaf(f)),
            Tree::Word { tag, word } => f(tag, word),
        }
    }

    fn map_tags(&self, f: &mut impl FnMut(&str) -> String) -> Tree {
        match self {
            Tree::Phrase { label, children } => Tree::Phrase {
                label: label.clone(),
                children: children.iter().map(|c| c.map_tags(f)).collect(),
            },
            Tree::Word { tag, word } => Tree::Word {
                tag: f(tag),
                word: word.clone(),
            },
        }
    }
}
