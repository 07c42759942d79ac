//! The constraint hook: a function of the prefix that forbids next tokens. Parsing uses it
//! to keep outputs well-formed trees (§6.3 and beyond), and to give word-focus models the
//! source position each decoder input is aligned to.

/// Restricts the next token of a hypothesis.
pub trait Constraint {
    /// Sets `allowed[id] = false` for every token that may not follow `prefix` (output ids
    /// so far, without BOS) in sentence `sentence` of the batch.
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]);

    /// Whether [`Constraint::focus`] answers: word-focus models can only be decoded
    /// through a constraint that does.
    fn has_focus(&self) -> bool {
        false
    }

    /// The source position the decoder input after `prefix` is aligned to, `None` when it
    /// is aligned to nothing (see [`crate::task::focus`]).
    fn focus(&self, _sentence: usize, _prefix: &[u32]) -> Option<usize> {
        None
    }

    /// Whether [`Constraint::restrict`] can forbid anything; `false` lets decoding skip the
    /// host-side masks.
    fn restricts(&self) -> bool {
        true
    }
}

/// Allows everything.
pub struct Unconstrained;

impl Constraint for Unconstrained {
    fn restrict(&self, _: usize, _: &[u32], _: &mut [bool]) {}

    fn restricts(&self) -> bool {
        false
    }
}

impl<F: Fn(usize, &[u32], &mut [bool])> Constraint for F {
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]) {
        self(sentence, prefix, allowed)
    }
}
