//! A Marian vocabulary (`vocab.json`) in our id order.
//!
//! Our ids 0–3 are fixed (`<pad> <s> </s> <unk>`, [`transduce::tokenizer::SPECIAL_TOKENS`])
//! and every decoder relies on them; Marian's are `</s>` = 0, `<unk>` = 1 and `<pad>` last
//! in the 2020 models, anywhere in the later ones, and its decoder starts from `<pad>`.
//! Renumbering at import keeps the decoders as they are: Marian's `<pad>` becomes our `<s>`
//! (1), which carries the decoder-start row, its `</s>` and `<unk>` become 2 and 3, and every
//! other entry follows in Marian's order.
//!
//! Our PAD (0) is never emitted but, unlike Marian's padding, it is not in the softmax
//! either, so in the 2020 vocabularies it is a new row with no Marian rows. From 2021 on,
//! OPUS-MT-train joins both SentencePiece `.vocab` files into `vocab.json`, so it also holds
//! SentencePiece's own `<s>` as an ordinary row: one no text encodes to and no trained model
//! emits. That row takes our PAD's place: it keeps its embedding and its output row, so the
//! softmax is Marian's, and our decoders never emit it.

use std::collections::HashMap;

use transduce::tokenizer::SPECIAL_TOKENS;

/// The renumbering of one Marian vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub struct Renumbering {
    /// Pieces in our id order (index = our id).
    pub pieces: Vec<String>,
    /// For each of our ids, the Marian id whose rows it takes (`<s>` takes the decoder
    /// start's; our PAD a Marian `<s>` entry's, or none: then it is never an input that
    /// matters nor an output, and out of the softmax).
    pub marian: Vec<Option<u32>>,
}

/// Why a `vocab.json` cannot be renumbered: the message names the entry.
pub type VocabError = String;

/// The piece of Marian id `id` (present: the caller found it in `vocab`).
fn pieces_of(vocab: &[(String, u32)], id: u32) -> &str {
    vocab
        .iter()
        .find(|(_, i)| *i == id)
        .map_or("", |(p, _)| p.as_str())
}

/// Reads `vocab.json` (`{"piece": id, ...}`) into (piece, id) pairs, checking the ids are
/// `0..n` each once.
pub fn parse_vocab(bytes: &[u8]) -> Result<Vec<(String, u32)>, VocabError> {
    let map: HashMap<String, u64> = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "line {} column {}: {e} (expected an object of piece → id)",
            e.line(),
            e.column()
        )
    })?;
    let n = map.len();
    let mut by_id: Vec<Option<String>> = vec![None; n];
    for (piece, id) in map {
        let slot = usize::try_from(id)
            .ok()
            .and_then(|i| by_id.get_mut(i))
            .ok_or_else(|| format!("entry {piece:?} has id {id}, outside 0..{n}"))?;
        if let Some(other) = slot {
            return Err(format!("entries {other:?} and {piece:?} share id {id}"));
        }
        *slot = Some(piece);
    }
    Ok(by_id
        .into_iter()
        .enumerate()
        .map(|(id, piece)| {
            (
                piece.expect("n distinct ids in 0..n fill every slot"),
                id as u32,
            )
        })
        .collect())
}

/// Our id order for a Marian vocabulary whose padding (and decoder start), end and unknown
/// entries have ids `pad`, `eos` and `unk`.
pub fn renumber(
    vocab: &[(String, u32)],
    pad: u32,
    eos: u32,
    unk: u32,
) -> Result<Renumbering, VocabError> {
    let piece_of = |id: u32, what: &str| {
        vocab
            .iter()
            .find(|(_, i)| *i == id)
            .map(|(p, _)| p.clone())
            .ok_or_else(|| format!("the {what} id {id} is not in the vocabulary"))
    };
    let (pad_piece, eos_piece, unk_piece) = (
        piece_of(pad, "padding")?,
        piece_of(eos, "end")?,
        piece_of(unk, "unknown")?,
    );
    if pad == eos || pad == unk || eos == unk {
        return Err(format!(
            "padding ({pad}), end ({eos}) and unknown ({unk}) must be three entries"
        ));
    }
    let mut pieces: Vec<String> = SPECIAL_TOKENS.iter().map(|s| s.to_string()).collect();
    let mut marian: Vec<Option<u32>> = vec![None, Some(pad), Some(eos), Some(unk)];
    let mut others: Vec<&(String, u32)> = vocab
        .iter()
        .filter(|(_, id)| ![pad, eos, unk].contains(id))
        .collect();
    others.sort_by_key(|(_, id)| *id);
    for (piece, id) in others {
        if SPECIAL_TOKENS.contains(&piece.as_str()) {
            // Spelled like one of ours but none of Marian's specials: the one row that
            // counts in the softmax and is never emitted (SentencePiece's `<s>`) goes to
            // our PAD's place; a second has no place to go.
            if let Some(taken) = marian[0] {
                return Err(format!(
                    "entries {:?} (id {taken}) and {piece:?} (id {id}) are both spelled like                      our special tokens but are not Marian's padding ({pad_piece:?}), end                      ({eos_piece:?}) or unknown ({unk_piece:?}): only one such row is supported",
                    pieces_of(vocab, taken)
                ));
            }
            marian[0] = Some(*id);
            continue;
        }
        pieces.push(piece.clone());
        marian.push(Some(*id));
    }
    Ok(Renumbering { pieces, marian })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marian_layout_becomes_ours() {
        let vocab = parse_vocab(br#"{"</s>": 0, "<unk>": 1, "a": 2, "b": 3, "<pad>": 4}"#).unwrap();
        let r = renumber(&vocab, 4, 0, 1).unwrap();
        assert_eq!(r.pieces, ["<pad>", "<s>", "</s>", "<unk>", "a", "b"]);
        // <s> takes the decoder start's (= padding's) rows; a and b move up by two.
        assert_eq!(
            r.marian,
            [None, Some(4), Some(0), Some(1), Some(2), Some(3)]
        );
    }

    /// A vocabulary as OPUS-MT-train builds it from 2021 on: both `.vocab` files' pieces
    /// sorted (`cut -f1 | sort -u`), so SentencePiece's `<s>`, `</s>` and `<unk>` sit among
    /// the pieces in byte order, and `<pad>` is appended last (tc-big-en-fr: end 43311,
    /// padding 53016).
    #[test]
    fn a_joint_sorted_vocabulary_keeps_its_s_row_in_our_pad_place() {
        let mut sorted = ["</s>", "<s>", "<unk>", "a", "b", "▁c"];
        sorted.sort_unstable();
        let json: serde_json::Map<String, serde_json::Value> = sorted
            .iter()
            .chain(&["<pad>"])
            .enumerate()
            .map(|(id, p)| (p.to_string(), id.into()))
            .collect();
        let vocab = parse_vocab(serde_json::to_string(&json).unwrap().as_bytes()).unwrap();
        // Byte order: "</s>" 0, "<s>" 1, "<unk>" 2, "a" 3, "b" 4, "▁c" 5, then "<pad>" 6.
        let r = renumber(&vocab, 6, 0, 2).unwrap();
        assert_eq!(r.pieces, ["<pad>", "<s>", "</s>", "<unk>", "a", "b", "▁c"]);
        // Every Marian row is kept, once: the vocabulary is no larger than Marian's.
        assert_eq!(
            r.marian,
            [
                Some(1),
                Some(6),
                Some(0),
                Some(2),
                Some(3),
                Some(4),
                Some(5)
            ]
        );
    }

    #[test]
    fn bad_vocabularies_are_named() {
        let e = parse_vocab(br#"{"a": 0, "b": 0}"#).unwrap_err();
        assert!(e.contains("share id 0"), "{e}");
        let e = parse_vocab(br#"{"a": 0, "b": 5}"#).unwrap_err();
        assert!(e.contains("outside 0..2"), "{e}");
        let vocab =
            parse_vocab(br#"{"</s>": 0, "<unk>": 1, "<s>": 2, "a": 3, "<pad>": 4, "b": 5}"#)
                .unwrap();
        let e = renumber(&vocab, 5, 0, 1).unwrap_err();
        assert!(
            e.contains("\"<s>\" (id 2)") && e.contains("\"<pad>\" (id 4)"),
            "{e}"
        );
        let vocab = parse_vocab(br#"{"</s>": 0, "<unk>": 1}"#).unwrap();
        assert!(
            renumber(&vocab, 7, 0, 1)
                .unwrap_err()
                .contains("padding id 7")
        );
    }
}
