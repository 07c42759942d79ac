//! A Marian vocabulary (`vocab.json`) in our id order.
//!
//! Our ids 0–3 are fixed (`<pad> <s> </s> <unk>`, [`transduce::tokenizer::SPECIAL_TOKENS`])
//! and every decoder relies on them; Marian's are `</s>` = 0, `<unk>` = 1 and `<pad>` last,
//! and its decoder starts from `<pad>`. Renumbering at import keeps the decoders as they are:
//! Marian's `<pad>` becomes our PAD (0), a new `<s>` (1) carries the decoder-start row, its
//! `</s>` and `<unk>` become 2 and 3, and every other entry follows in Marian's order.

use std::collections::HashMap;

use transduce::tokenizer::SPECIAL_TOKENS;

/// The renumbering of one Marian vocabulary.
#[derive(Clone, Debug, PartialEq)]
pub struct Renumbering {
    /// Pieces in our id order (index = our id).
    pub pieces: Vec<String>,
    /// For each of our ids, the Marian id whose rows it takes (`<s>` takes the decoder
    /// start's, our PAD none: it is never an input that matters nor an output).
    pub marian: Vec<Option<u32>>,
}

/// Why a `vocab.json` cannot be renumbered: the message names the entry.
pub type VocabError = String;

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
            return Err(format!(
                "entry {piece:?} (id {id}) is one of our special tokens but not Marian's \
                 padding ({pad_piece:?}), end ({eos_piece:?}) or unknown ({unk_piece:?})"
            ));
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

    #[test]
    fn bad_vocabularies_are_named() {
        let e = parse_vocab(br#"{"a": 0, "b": 0}"#).unwrap_err();
        assert!(e.contains("share id 0"), "{e}");
        let e = parse_vocab(br#"{"a": 0, "b": 5}"#).unwrap_err();
        assert!(e.contains("outside 0..2"), "{e}");
        let vocab = parse_vocab(br#"{"</s>": 0, "<unk>": 1, "<s>": 2, "<pad>": 3}"#).unwrap();
        let e = renumber(&vocab, 3, 0, 1).unwrap_err();
        assert!(e.contains("\"<s>\""), "{e}");
        let vocab = parse_vocab(br#"{"</s>": 0, "<unk>": 1}"#).unwrap();
        assert!(
            renumber(&vocab, 7, 0, 1)
                .unwrap_err()
                .contains("padding id 7")
        );
    }
}
