//! Word focus for parsing (beyond the paper; after Ma et al. 2017, "Deterministic Attention
//! for Sequence-to-Sequence Constituent Parsing").
//!
//! In the linearized tree of §6.3 the k-th slot `XX` stands for the k-th word, but the plain
//! decoder has to find word k by attention alone: it must count the slots it has written
//! and match that count against source positions. With little data it learns the shapes of
//! trees and loses its place in long sentences. A word-focus model (`word_focus` in its
//! config) adds to each decoder input the encoder state of the word the next slot will fill.
//! This module says which source position that is, from token ids alone, the same way in
//! training (teacher forcing) and in decoding (a hypothesis's prefix).

use burn::prelude::*;
use burn::tensor::TensorData;

use super::parse::PLACEHOLDER;

/// The SentencePiece-style marker that begins a word in the BPE vocabulary.
pub const WORD_MARKER: char = '▁';

/// Which source tokens begin words, and which target token is the slot.
#[derive(Clone, Debug)]
pub struct WordFocus {
    slot: u32,
    begins_word: Vec<bool>,
}

impl WordFocus {
    /// Reads a vocabulary (`vocab[id]` is the token of `id`): the slot is [`PLACEHOLDER`],
    /// a source token begins a word when it starts with [`WORD_MARKER`]. `None` when the
    /// vocabulary has no slot token (not a parsing vocabulary).
    pub fn from_vocab<S: AsRef<str>>(vocab: &[S]) -> Option<Self> {
        let slot = vocab.iter().position(|t| t.as_ref() == PLACEHOLDER)? as u32;
        Some(WordFocus {
            slot,
            begins_word: vocab
                .iter()
                .map(|t| t.as_ref().starts_with(WORD_MARKER))
                .collect(),
        })
    }

    /// The slot token's id.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Source positions where words begin. The first token always begins one, so a
    /// non-empty source has at least one word.
    pub fn word_starts(&self, src: &[u32]) -> Vec<usize> {
        src.iter()
            .enumerate()
            .filter(|&(i, &id)| i == 0 || self.begins_word.get(id as usize).copied() == Some(true))
            .map(|(i, _)| i)
            .collect()
    }

    /// The source position the decoder input after `prefix` (output ids so far, BOS not
    /// included) is aligned to: the start of the word the next slot fills, `None` once
    /// every word has its slot.
    pub fn next(&self, starts: &[usize], prefix: &[u32]) -> Option<usize> {
        let placed = prefix.iter().filter(|&&id| id == self.slot).count();
        starts.get(placed).copied()
    }

    /// The focus of every decoder input of a teacher-forced pass: `tgt_in` is BOS followed
    /// by the target, so input t sees the slots among target tokens 0..t.
    pub fn positions(&self, src: &[u32], tgt_in: &[u32]) -> Vec<Option<usize>> {
        let starts = self.word_starts(src);
        let mut placed = 0;
        tgt_in
            .iter()
            .enumerate()
            .map(|(t, &id)| {
                // tgt_in[0] is BOS; tgt_in[t] for t ≥ 1 is target token t - 1.
                if t > 0 && id == self.slot {
                    placed += 1;
                }
                starts.get(placed).copied()
            })
            .collect()
    }

    /// [`WordFocus::positions`] of a batch as the `[b, t]` tensor the model takes, `t`
    /// the longest decoder input; -1 (nothing) where there is no word or no input.
    pub fn tensor<S: AsRef<[u32]>, T: AsRef<[u32]>>(
        &self,
        sources: &[S],
        tgt_ins: &[T],
        device: &Device,
    ) -> Tensor<2, Int> {
        let t = tgt_ins.iter().map(|r| r.as_ref().len()).max().unwrap_or(0);
        let mut data = Vec::with_capacity(tgt_ins.len() * t);
        for (src, tgt_in) in sources.iter().zip(tgt_ins) {
            let row = self.positions(src.as_ref(), tgt_in.as_ref());
            data.extend(row.iter().map(|p| p.map_or(-1, |p| p as i32)));
            data.extend(std::iter::repeat_n(-1, t - row.len()));
        }
        Tensor::from_data(TensorData::new(data, [tgt_ins.len(), t]), device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> Vec<&'static str> {
        // 0 PAD, 1 BOS, 2 EOS, 3 XX, 4 (S, 5 )S, 6 ▁the, 7 ▁ca, 8 t, 9 ▁sat
        vec![
            "<pad>", "<s>", "</s>", "XX", "(S", ")S", "▁the", "▁ca", "t", "▁sat",
        ]
    }

    #[test]
    fn word_starts_skip_continuations() {
        let f = WordFocus::from_vocab(&vocab()).unwrap();
        assert_eq!(f.slot(), 3);
        // the ca·t sat
        assert_eq!(f.word_starts(&[6, 7, 8, 9]), [0, 1, 3]);
        // A source starting mid-word still has its first word at 0.
        assert_eq!(f.word_starts(&[8, 9]), [0, 1]);
        assert!(WordFocus::from_vocab(&["a", "b"]).is_none());
    }

    #[test]
    fn focus_moves_one_word_per_slot() {
        let f = WordFocus::from_vocab(&vocab()).unwrap();
        let src = [6, 7, 8, 9]; // the cat sat: words at 0, 1, 3
        // BOS (S XX XX XX )S
        let tgt_in = [1, 4, 3, 3, 3, 5];
        assert_eq!(
            f.positions(&src, &tgt_in),
            [Some(0), Some(0), Some(1), Some(3), None, None]
        );
        // Decoding gives the same answers from prefixes (BOS excluded).
        let starts = f.word_starts(&src);
        for t in 0..tgt_in.len() {
            assert_eq!(
                f.next(&starts, &tgt_in[1..=t]),
                f.positions(&src, &tgt_in)[t]
            );
        }
    }
}
