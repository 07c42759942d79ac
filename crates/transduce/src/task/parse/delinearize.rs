//! Target tokens + words → tree, strictly: anything but one well-formed tree over exactly
//! the words is an error.

use std::fmt;

use super::{MAX_NESTING, PLACEHOLDER, TargetToken, Tree};

/// Why a target sequence is not a tree over the given words ([`delinearize`]). Positions
/// are 0-based token indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinearError {
    /// No tokens at all.
    Empty,
    /// A token that is neither `(X`, `)X` nor [`PLACEHOLDER`].
    UnknownToken {
        /// Where.
        position: usize,
        /// The token.
        token: String,
    },
    /// A word slot before the root bracket opened.
    SlotOutsideBracket {
        /// Where.
        position: usize,
    },
    /// A closing token with no open bracket (at the start of the sequence).
    StrayClose {
        /// Where.
        position: usize,
        /// The token.
        token: String,
    },
    /// `)B` while the innermost open bracket is `(A`.
    Mismatch {
        /// Where.
        position: usize,
        /// Label of the innermost open bracket.
        open: String,
        /// Label of the closing token.
        close: String,
    },
    /// `(X` closed with no child (`(NP )NP`).
    EmptyConstituent {
        /// Position of the closing token.
        position: usize,
        /// The label.
        label: String,
    },
    /// Brackets still open at the end.
    Unclosed {
        /// Label of the innermost open bracket.
        label: String,
        /// How many brackets are open.
        open: usize,
    },
    /// Tokens after the root bracket closed (a second root, or stray tokens).
    AfterRoot {
        /// Position of the first such token.
        position: usize,
        /// The token.
        token: String,
    },
    /// The number of word slots differs from the number of words.
    WordCount {
        /// Slots in the sequence.
        slots: usize,
        /// Words given.
        words: usize,
    },
    /// Brackets nested deeper than [`MAX_NESTING`].
    TooDeep {
        /// Position of the opening token past the limit.
        position: usize,
    },
}

impl fmt::Display for LinearError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinearError::Empty => write!(f, "empty target sequence"),
            LinearError::UnknownToken { position, token } => {
                write!(f, "token {position} `{token}` is not a tree token")
            }
            LinearError::SlotOutsideBracket { position } => {
                write!(f, "token {position}: word slot outside any bracket")
            }
            LinearError::StrayClose { position, token } => {
                write!(f, "token {position} `{token}` closes nothing")
            }
            LinearError::Mismatch {
                position,
                open,
                close,
            } => write!(f, "token {position} `){close}` closes `({open}`"),
            LinearError::EmptyConstituent { position, label } => {
                write!(f, "token {position}: empty constituent `({label} ){label}`")
            }
            LinearError::Unclosed { label, open } => {
                write!(f, "{open} bracket(s) never closed (innermost `({label}`)")
            }
            LinearError::AfterRoot { position, token } => {
                write!(f, "token {position} `{token}` follows the closed root")
            }
            LinearError::WordCount { slots, words } => {
                write!(f, "{slots} word slot(s) for {words} word(s)")
            }
            LinearError::TooDeep { position } => write!(
                f,
                "token {position}: brackets nested deeper than {MAX_NESTING}"
            ),
        }
    }
}

impl std::error::Error for LinearError {}

/// Rebuilds the tree of a target sequence, filling the [`PLACEHOLDER`] slots with `words`
/// in order; every preterminal gets the tag [`PLACEHOLDER`] (the model predicts no tags;
/// see [`Tree::with_tags`]). The inverse of [`linearize`] up to POS tags:
/// `delinearize(&t, &w) == Ok(tree.with_placeholder_tags())` for `(w, t) = linearize(tree)`.
///
/// Strict: anything that is not exactly one well-formed bracketed tree with one slot per
/// word is an error ([`LinearError`]), never a panic. [`repair`] never fails.
pub fn delinearize<T: AsRef<str>, W: AsRef<str>>(
    tokens: &[T],
    words: &[W],
) -> Result<Tree, LinearError> {
    if tokens.is_empty() {
        return Err(LinearError::Empty);
    }
    let mut stack: Vec<(&str, Vec<Tree>)> = Vec::new();
    let mut root = None;
    let mut slots = 0;
    for (position, token) in tokens.iter().enumerate() {
        let token = token.as_ref();
        if root.is_some() {
            return Err(LinearError::AfterRoot {
                position,
                token: token.to_string(),
            });
        }
        match TargetToken::classify(token) {
            TargetToken::Other => {
                return Err(LinearError::UnknownToken {
                    position,
                    token: token.to_string(),
                });
            }
            TargetToken::Open(label) => {
                if stack.len() == MAX_NESTING {
                    return Err(LinearError::TooDeep { position });
                }
                stack.push((label, Vec::new()));
            }
            TargetToken::Slot => {
                let Some((_, children)) = stack.last_mut() else {
                    return Err(LinearError::SlotOutsideBracket { position });
                };
                let word = words.get(slots).map_or("", |w| w.as_ref());
                children.push(Tree::word(PLACEHOLDER, word));
                slots += 1;
            }
            TargetToken::Close(label) => {
                let Some((open, children)) = stack.pop() else {
                    return Err(LinearError::StrayClose {
                        position,
                        token: token.to_string(),
                    });
                };
                if open != label {
                    return Err(LinearError::Mismatch {
                        position,
                        open: open.to_string(),
                        close: label.to_string(),
                    });
                }
                if children.is_empty() {
                    return Err(LinearError::EmptyConstituent {
                        position,
                        label: label.to_string(),
                    });
                }
                let node = Tree::phrase(label, children);
                match stack.last_mut() {
                    Some((_, parent)) => parent.push(node),
                    None => root = Some(node),
                }
            }
        }
    }
    let Some(root) = root else {
        let open = stack.len();
        let label = stack.pop().map_or("", |(l, _)| l).to_string();
        return Err(LinearError::Unclosed { label, open });
    };
    if slots != words.len() {
        return Err(LinearError::WordCount {
            slots,
            words: words.len(),
        });
    }
    Ok(root)
}
