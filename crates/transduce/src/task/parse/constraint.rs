//! The decoding constraint: a prefix automaton that only lets the decoder write
//! well-formed trees over exactly the source words.

use std::collections::HashMap;

use super::TargetToken;

/// What a vocabulary id is to the tree automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Never,
    Eos,
    Slot,
    Open(u32),
    Close(u32),
}

/// A prefix automaton over target ids that lets a decoder write only well-formed
/// linearized trees over a given number of source words.
///
/// Every sequence it lets through to EOS [`delinearize`]s: one root bracket; each `)X`
/// closes the innermost open `(X`; no constituent is empty (a bracket may close only once
/// it has a child); exactly `n_words` [`PLACEHOLDER`] slots; EOS only after the root has
/// closed. Other tokens (special tokens, sub-words, `(X` without a `)X` in the vocabulary)
/// are never allowed.
///
/// It never dead-ends: from every prefix it allows, a completion exists (place the
/// remaining words, then close the open brackets), because a bracket may open only while
/// a word is left to fill it, and the root may close only once every word is placed.
///
/// Caps (both configurable with [`ParseConstraint::with_caps`]):
///
/// * bracket depth at most [`ParseConstraint::DEFAULT_MAX_DEPTH`] (counting the root as 1,
///   slots as 0; see [`Tree::depth`]);
/// * at most [`ParseConstraint::DEFAULT_MAX_OPEN_RUN`] opening tokens in a row, which
///   bounds unary chains (in `(A (B (C XX …`, a unary chain A→B→C is always a run of
///   consecutive openings).
///
/// The depth cap guarantees termination: every bracket spans at least one word and the
/// brackets spanning a word are all open when its slot is written, so there are at most
/// `n_words · max_depth` brackets and any sequence is at most
/// `2 · n_words · max_depth + n_words` tokens long before EOS. The defaults leave room above
/// the Penn Treebank: after [`preprocess`] the PTB sample (3,914 trees) already peaks at
/// depth 28 and 6 openings in a row, so the depth cap is 64 rather than 40, as the full WSJ
/// is 13 times larger. [`ParseConstraint::restrict_within`] adds a hard length budget.
///
/// Prefixes it would not have produced (an unknown or forbidden token) and `n_words == 0`
/// (no tree exists) allow only EOS, so the hypothesis ends and [`repair`] takes over.
#[derive(Clone, Debug)]
pub struct ParseConstraint {
    kinds: Vec<Kind>,
    eos_id: u32,
    max_depth: usize,
    max_open_run: usize,
}

/// The automaton's state after a prefix.
#[derive(Clone, Debug, Default)]
struct State {
    /// Open brackets, outermost first: (label, has a child yet).
    stack: Vec<(u32, bool)>,
    /// Slots written.
    placed: usize,
    /// The root has closed.
    done: bool,
    /// Opening tokens in a row at the end of the prefix.
    open_run: usize,
    /// Tokens so far.
    len: usize,
}

impl ParseConstraint {
    /// Default bracket-depth cap.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
    /// Default cap on consecutive opening tokens.
    pub const DEFAULT_MAX_OPEN_RUN: usize = 12;

    /// Builds the automaton from the target vocabulary (`vocab[id]` is the token string of
    /// `id`) and the EOS id. `(X`, `)X` and [`PLACEHOLDER`] must be whole tokens; every
    /// other entry is never allowed.
    pub fn new<S: AsRef<str>>(vocab: &[S], eos_id: u32) -> Self {
        Self::build(vocab, eos_id, "")
    }

    /// As [`ParseConstraint::new`] for a vocabulary whose word-initial tokens carry a
    /// marker, e.g. SentencePiece's `▁` (`▁(NP`, `▁XX`): only tokens starting with `marker`
    /// are tree tokens, read without it; tokens without it (word continuations) are never
    /// allowed.
    pub fn with_word_marker<S: AsRef<str>>(vocab: &[S], eos_id: u32, marker: &str) -> Self {
        Self::build(vocab, eos_id, marker)
    }

    fn build<S: AsRef<str>>(vocab: &[S], eos_id: u32, marker: &str) -> Self {
        fn classify<'a>(token: &'a str, marker: &str) -> TargetToken<'a> {
            token
                .strip_prefix(marker)
                .map_or(TargetToken::Other, TargetToken::classify)
        }
        // Labels are numbered from their closing tokens: an `(X` that could never be closed
        // must never be opened.
        let mut labels: HashMap<String, u32> = HashMap::new();
        for token in vocab {
            if let TargetToken::Close(label) = classify(token.as_ref(), marker) {
                let next = labels.len() as u32;
                labels.entry(label.to_string()).or_insert(next);
            }
        }
        let kinds = vocab
            .iter()
            .enumerate()
            .map(|(id, token)| {
                if id as u64 == eos_id as u64 {
                    return Kind::Eos;
                }
                match classify(token.as_ref(), marker) {
                    TargetToken::Slot => Kind::Slot,
                    TargetToken::Open(l) => labels.get(l).map_or(Kind::Never, |&i| Kind::Open(i)),
                    TargetToken::Close(l) => labels.get(l).map_or(Kind::Never, |&i| Kind::Close(i)),
                    TargetToken::Other => Kind::Never,
                }
            })
            .collect();
        ParseConstraint {
            kinds,
            eos_id,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_open_run: Self::DEFAULT_MAX_OPEN_RUN,
        }
    }

    /// The same automaton with other caps (each at least 1): bracket depth and consecutive
    /// opening tokens.
    pub fn with_caps(mut self, max_depth: usize, max_open_run: usize) -> Self {
        self.max_depth = max_depth.max(1);
        self.max_open_run = max_open_run.max(1);
        self
    }

    /// The depth cap.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The cap on consecutive opening tokens.
    pub fn max_open_run(&self) -> usize {
        self.max_open_run
    }

    /// Sets `allowed[id] = false` for every id that may not follow `prefix` (output ids so
    /// far, without BOS) in a tree over `n_words` words; never sets anything to `true`.
    /// Ids beyond the vocabulary are forbidden. Cost: O(|prefix| + |allowed|).
    pub fn restrict(&self, n_words: usize, prefix: &[u32], allowed: &mut [bool]) {
        self.restrict_impl(n_words, None, prefix, allowed);
    }

    /// As [`ParseConstraint::restrict`], and the output must also end within `max_len`
    /// tokens, EOS included: a token is allowed only if the shortest completion after it
    /// still fits. Use it when the decoder cuts hypotheses at a maximum length (§6.3: input
    /// length + 300), so a cut never leaves a broken tree. If even the shortest tree
    /// (`n_words + 3` tokens with EOS) does not fit, the budget is ignored.
    pub fn restrict_within(
        &self,
        n_words: usize,
        max_len: usize,
        prefix: &[u32],
        allowed: &mut [bool],
    ) {
        self.restrict_impl(n_words, Some(max_len), prefix, allowed);
    }

    fn restrict_impl(
        &self,
        n_words: usize,
        max_len: Option<usize>,
        prefix: &[u32],
        allowed: &mut [bool],
    ) {
        let state = self.replay(n_words, max_len, prefix);
        let budget = state
            .as_ref()
            .and_then(|state| self.budget(state, n_words, max_len));
        let rule = |id: usize| {
            state
                .as_ref()
                .is_some_and(|state| self.permits(state, self.kind(id), n_words, budget))
        };
        // Never leave the decoder without a choice: if nothing is permitted (a prefix this
        // automaton would not have produced, no words, or no tree tokens in the
        // vocabulary), EOS alone is.
        let any = (0..allowed.len()).any(rule);
        for (id, slot) in allowed.iter_mut().enumerate() {
            let ok = if any {
                rule(id)
            } else {
                id as u64 == self.eos_id as u64
            };
            if !ok {
                *slot = false;
            }
        }
    }

    fn kind(&self, id: usize) -> Kind {
        if id as u64 == self.eos_id as u64 {
            Kind::Eos
        } else {
            self.kinds.get(id).copied().unwrap_or(Kind::Never)
        }
    }

    /// The state after `prefix`, or `None` if some token of it was not allowed.
    fn replay(&self, n_words: usize, max_len: Option<usize>, prefix: &[u32]) -> Option<State> {
        let mut state = State::default();
        for &id in prefix {
            let kind = self.kind(id as usize);
            let budget = self.budget(&state, n_words, max_len);
            if kind == Kind::Eos || !self.permits(&state, kind, n_words, budget) {
                return None;
            }
            Self::apply(&mut state, kind);
        }
        Some(state)
    }

    /// The length budget, if it can still be met from `state`.
    fn budget(&self, state: &State, n_words: usize, max_len: Option<usize>) -> Option<usize> {
        max_len.filter(|&max| state.len + Self::min_completion(state, n_words) <= max)
    }

    /// Fewest tokens (EOS included) that complete a tree from `state`: the remaining slots,
    /// one closer per open bracket, EOS; from the start, root open + slots + root close + EOS.
    fn min_completion(state: &State, n_words: usize) -> usize {
        if state.done {
            1
        } else if state.stack.is_empty() {
            n_words + 3
        } else {
            n_words.saturating_sub(state.placed) + state.stack.len() + 1
        }
    }

    fn permits(&self, state: &State, kind: Kind, n_words: usize, budget: Option<usize>) -> bool {
        let remaining = n_words.saturating_sub(state.placed);
        let depth = state.stack.len();
        let structural = match kind {
            Kind::Never => false,
            Kind::Eos => state.done,
            Kind::Slot => !state.done && depth > 0 && remaining > 0,
            // A new bracket needs a word of its own to be non-empty.
            Kind::Open(_) => {
                !state.done
                    && remaining > 0
                    && depth < self.max_depth
                    && state.open_run < self.max_open_run
            }
            // Close the innermost bracket only once it has a child, and the root only once
            // every word is placed.
            Kind::Close(label) => match state.stack.last() {
                Some(&(open, has_child)) => {
                    open == label && has_child && (depth > 1 || remaining == 0)
                }
                None => false,
            },
        };
        let Some(max_len) = budget.filter(|_| structural) else {
            return structural;
        };
        let after = match kind {
            Kind::Eos => 0,
            Kind::Slot => (remaining - 1) + depth + 1,
            Kind::Open(_) => remaining + (depth + 1) + 1,
            Kind::Close(_) if depth == 1 => 1,
            Kind::Close(_) => remaining + (depth - 1) + 1,
            Kind::Never => return false,
        };
        structural && state.len + 1 + after <= max_len
    }

    fn apply(state: &mut State, kind: Kind) {
        state.len += 1;
        match kind {
            Kind::Open(label) => {
                state.stack.push((label, false));
                state.open_run += 1;
            }
            Kind::Slot => {
                state.placed += 1;
                if let Some(top) = state.stack.last_mut() {
                    top.1 = true;
                }
                state.open_run = 0;
            }
            Kind::Close(_) => {
                state.stack.pop();
                match state.stack.last_mut() {
                    Some(top) => top.1 = true,
                    None => state.done = true,
                }
                state.open_run = 0;
            }
            Kind::Eos | Kind::Never => {}
        }
    }
}
