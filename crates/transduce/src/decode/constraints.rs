//! The constraint hook: a function of the prefix that forbids next tokens. Parsing uses it
//! to keep outputs well-formed trees (§6.3 and beyond).

/// Restricts the next token of a hypothesis.
pub trait Constraint {
    /// Sets `allowed[id] = false` for every token that may not follow `prefix` (output ids
    /// so far, without BOS) in sentence `sentence` of the batch.
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]);
}

/// Allows everything.
pub struct Unconstrained;

impl Constraint for Unconstrained {
    fn restrict(&self, _: usize, _: &[u32], _: &mut [bool]) {}
}

impl<F: Fn(usize, &[u32], &mut [bool])> Constraint for F {
    fn restrict(&self, sentence: usize, prefix: &[u32], allowed: &mut [bool]) {
        self(sentence, prefix, allowed)
    }
}
