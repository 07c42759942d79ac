//! SentencePiece models (`source.spm`, `target.spm` of a Hugging Face Marian folder) read
//! without a protobuf dependency, and their conversion to a `tokenizers` Unigram tokenizer
//! that gives MarianTokenizer's ids in our id order (tests/fixtures/marian/README.md has the
//! measured agreement and every difference).

use std::collections::HashMap;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::replace::{Replace, ReplacePattern};
use tokenizers::normalizers::{NormalizerWrapper, Precompiled, Sequence as NormalizerSequence};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, Tokenizer};

use transduce::tokenizer::{SPECIAL_TOKENS, is_language_code};

use crate::error::{Error, Result};

/// A piece's kind (`SentencePiece.Type` in sentencepiece_model.proto).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PieceType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub piece: String,
    pub score: f32,
    pub kind: PieceType,
}

/// `NormalizerSpec`: what SentencePiece does to text before segmenting it.
#[derive(Clone, Debug, PartialEq)]
pub struct NormalizerSpec {
    pub name: String,
    pub precompiled_charsmap: Vec<u8>,
    pub add_dummy_prefix: bool,
    pub remove_extra_whitespaces: bool,
    pub escape_whitespaces: bool,
}

/// The parts of a SentencePiece `ModelProto` a Unigram tokenizer needs.
#[derive(Clone, Debug)]
pub struct SentencePiece {
    /// The file it was read from (`source.spm`), for errors.
    pub origin: String,
    pub pieces: Vec<Piece>,
    /// `TrainerSpec.model_type`: 1 unigram, 2 BPE, 3 word, 4 char.
    pub model_type: i32,
    pub byte_fallback: bool,
    pub treat_whitespace_as_suffix: bool,
    pub normalizer: NormalizerSpec,
}

/// `TrainerSpec.model_type` of a unigram model.
const UNIGRAM: i32 = 1;

impl SentencePiece {
    /// Parses a serialized `ModelProto`; `origin` names it in errors.
    pub fn parse(bytes: &[u8], origin: &str) -> Result<Self> {
        parse_model(bytes)
            .map_err(|message| {
                Error::corrupt(origin, format!("not a SentencePiece model: {message}"))
            })
            .map(|mut spm| {
                spm.origin = origin.to_string();
                spm
            })
    }

    /// A model this import cannot turn into a tokenizer.
    fn error(&self, message: String) -> Error {
        Error::unsupported(&self.origin, message)
    }
}

// ---- protobuf wire format -------------------------------------------------------------
// Only what ModelProto uses: varints, 32-bit floats, length-delimited fields. Unknown
// fields are skipped, as protobuf readers do; anything malformed is an error naming the
// message, the field and the byte offset.

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

enum Value<'a> {
    Varint(u64),
    Fixed32([u8; 4]),
    Fixed64,
    /// The bytes, and their offset in the file.
    Bytes(&'a [u8], usize),
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of `bytes` in the whole file, so errors point into the file.
    base: usize,
    message: &'static str,
    /// The message's field names by number, for errors.
    names: &'static [(u64, &'static str)],
}

impl<'a> Reader<'a> {
    fn new(
        bytes: &'a [u8],
        base: usize,
        message: &'static str,
        names: &'static [(u64, &'static str)],
    ) -> Self {
        Reader {
            bytes,
            pos: 0,
            base,
            message,
            names,
        }
    }

    fn fail(&self, what: String) -> String {
        format!("{} at byte {}: {what}", self.message, self.base + self.pos)
    }

    fn name(&self, number: u64) -> String {
        match self.names.iter().find(|(n, _)| *n == number) {
            Some((_, name)) => format!("{}.{name}", self.message),
            None => format!("{} field {number}", self.message),
        }
    }

    fn varint(&mut self, field: &str) -> std::result::Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.bytes.get(self.pos) else {
                return Err(self.fail(format!("{field}: truncated varint")));
            };
            self.pos += 1;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.fail(format!("{field}: varint longer than 10 bytes")))
    }

    fn take(&mut self, n: usize, field: &str) -> std::result::Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or_else(|| {
                self.fail(format!(
                    "{field}: {n} bytes announced, {} left",
                    self.bytes.len() - self.pos
                ))
            })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// The next field: its number, the offset of its key in the file, and its value.
    fn field(&mut self) -> std::result::Result<Option<(u64, usize, Value<'a>)>, String> {
        if self.pos == self.bytes.len() {
            return Ok(None);
        }
        let at = self.base + self.pos;
        let key = self.varint("a field key")?;
        let number = key >> 3;
        let name = self.name(number);
        let value = match (key & 7) as u8 {
            VARINT => Value::Varint(self.varint(&name)?),
            FIXED64 => {
                self.take(8, &name)?;
                Value::Fixed64
            }
            LEN => {
                let n = self.varint(&format!("{name} length"))?;
                let n = usize::try_from(n).map_err(|_| self.fail(format!("{name}: length {n}")))?;
                let start = self.base + self.pos;
                Value::Bytes(self.take(n, &name)?, start)
            }
            FIXED32 => {
                let b = self.take(4, &name)?;
                Value::Fixed32([b[0], b[1], b[2], b[3]])
            }
            wire => {
                return Err(format!(
                    "{name} at byte {at}: wire type {wire} (a group, or not protobuf)"
                ));
            }
        };
        Ok(Some((number, at, value)))
    }
}

fn wrong_type(message: &str, field: &str, at: usize) -> String {
    format!("{message}.{field} at byte {at}: unexpected wire type")
}

fn string_field(
    bytes: &[u8],
    message: &str,
    field: &str,
    at: usize,
) -> std::result::Result<String, String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|e| format!("{message}.{field} at byte {at}: invalid UTF-8 ({e})"))
}

fn parse_model(bytes: &[u8]) -> std::result::Result<SentencePiece, String> {
    let mut spm = SentencePiece {
        origin: String::new(),
        pieces: Vec::new(),
        model_type: UNIGRAM,
        byte_fallback: false,
        treat_whitespace_as_suffix: false,
        // The proto's defaults, for a model that leaves them out.
        normalizer: NormalizerSpec {
            name: String::new(),
            precompiled_charsmap: Vec::new(),
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            escape_whitespaces: true,
        },
    };
    let mut seen_normalizer = false;
    let mut r = Reader::new(
        bytes,
        0,
        "ModelProto",
        &[(1, "pieces"), (2, "trainer_spec"), (3, "normalizer_spec")],
    );
    while let Some((number, at, value)) = r.field()? {
        match (number, value) {
            (1, Value::Bytes(b, start)) => {
                spm.pieces.push(parse_piece(b, start, spm.pieces.len())?)
            }
            (2, Value::Bytes(b, start)) => parse_trainer(b, start, &mut spm)?,
            (3, Value::Bytes(b, start)) => {
                spm.normalizer = parse_normalizer(b, start)?;
                seen_normalizer = true;
            }
            (1, _) => return Err(wrong_type("ModelProto", "pieces", at)),
            (2, _) => return Err(wrong_type("ModelProto", "trainer_spec", at)),
            (3, _) => return Err(wrong_type("ModelProto", "normalizer_spec", at)),
            _ => {}
        }
    }
    if spm.pieces.is_empty() {
        return Err("ModelProto.pieces: none (an empty or truncated file?)".into());
    }
    if !seen_normalizer {
        return Err("ModelProto.normalizer_spec: missing".into());
    }
    Ok(spm)
}

fn parse_piece(bytes: &[u8], base: usize, index: usize) -> std::result::Result<Piece, String> {
    let mut piece = None;
    let mut score = 0.0f32;
    let mut kind = PieceType::Normal;
    let mut r = Reader::new(
        bytes,
        base,
        "SentencePiece",
        &[(1, "piece"), (2, "score"), (3, "type")],
    );
    while let Some((number, at, value)) = r.field()? {
        match (number, value) {
            (1, Value::Bytes(b, _)) => piece = Some(string_field(b, "SentencePiece", "piece", at)?),
            (2, Value::Fixed32(b)) => score = f32::from_le_bytes(b),
            (3, Value::Varint(v)) => {
                kind = match v {
                    1 => PieceType::Normal,
                    2 => PieceType::Unknown,
                    3 => PieceType::Control,
                    4 => PieceType::UserDefined,
                    5 => PieceType::Unused,
                    6 => PieceType::Byte,
                    other => {
                        return Err(format!(
                            "SentencePiece.type at byte {at} (piece {index}): unknown type {other}"
                        ));
                    }
                }
            }
            (1, _) => return Err(wrong_type("SentencePiece", "piece", at)),
            (2, _) => return Err(wrong_type("SentencePiece", "score", at)),
            (3, _) => return Err(wrong_type("SentencePiece", "type", at)),
            _ => {}
        }
    }
    let piece = piece
        .ok_or_else(|| format!("SentencePiece at byte {base} (piece {index}): no piece string"))?;
    Ok(Piece { piece, score, kind })
}

fn parse_trainer(
    bytes: &[u8],
    base: usize,
    spm: &mut SentencePiece,
) -> std::result::Result<(), String> {
    let mut r = Reader::new(
        bytes,
        base,
        "TrainerSpec",
        &[
            (3, "model_type"),
            (24, "treat_whitespace_as_suffix"),
            (35, "byte_fallback"),
        ],
    );
    while let Some((number, at, value)) = r.field()? {
        match (number, value) {
            // An int32 enum: a negative value is a 10-byte varint, two's complement.
            (3, Value::Varint(v)) => spm.model_type = v as i64 as i32,
            (24, Value::Varint(v)) => spm.treat_whitespace_as_suffix = v != 0,
            (35, Value::Varint(v)) => spm.byte_fallback = v != 0,
            (3, _) => return Err(wrong_type("TrainerSpec", "model_type", at)),
            (24, _) => return Err(wrong_type("TrainerSpec", "treat_whitespace_as_suffix", at)),
            (35, _) => return Err(wrong_type("TrainerSpec", "byte_fallback", at)),
            _ => {}
        }
    }
    Ok(())
}

fn parse_normalizer(bytes: &[u8], base: usize) -> std::result::Result<NormalizerSpec, String> {
    let mut spec = NormalizerSpec {
        name: String::new(),
        precompiled_charsmap: Vec::new(),
        add_dummy_prefix: true,
        remove_extra_whitespaces: true,
        escape_whitespaces: true,
    };
    let mut r = Reader::new(
        bytes,
        base,
        "NormalizerSpec",
        &[
            (1, "name"),
            (2, "precompiled_charsmap"),
            (3, "add_dummy_prefix"),
            (4, "remove_extra_whitespaces"),
            (5, "escape_whitespaces"),
        ],
    );
    while let Some((number, at, value)) = r.field()? {
        match (number, value) {
            (1, Value::Bytes(b, _)) => spec.name = string_field(b, "NormalizerSpec", "name", at)?,
            (2, Value::Bytes(b, _)) => spec.precompiled_charsmap = b.to_vec(),
            (3, Value::Varint(v)) => spec.add_dummy_prefix = v != 0,
            (4, Value::Varint(v)) => spec.remove_extra_whitespaces = v != 0,
            (5, Value::Varint(v)) => spec.escape_whitespaces = v != 0,
            (1, _) => return Err(wrong_type("NormalizerSpec", "name", at)),
            (2, _) => return Err(wrong_type("NormalizerSpec", "precompiled_charsmap", at)),
            (3, _) => return Err(wrong_type("NormalizerSpec", "add_dummy_prefix", at)),
            (4, _) => return Err(wrong_type("NormalizerSpec", "remove_extra_whitespaces", at)),
            (5, _) => return Err(wrong_type("NormalizerSpec", "escape_whitespaces", at)),
            _ => {}
        }
    }
    Ok(spec)
}

// ---- the tokenizer --------------------------------------------------------------------

/// A `tokenizers` tokenizer that segments text as MarianTokenizer does with `source`
/// (SentencePiece's Viterbi segmentation over its pieces and scores, after its normalizer)
/// and gives ids in our order: `vocab[id]` is the piece of our id `id` ([`super::vocab::renumber`]:
/// pad 0, `<s>` 1, eos 2), `unk` our id of `<unk>`. No post-processor: the model code adds
/// EOS.
///
/// Marian's vocabulary joins two `.spm` models; pieces that `source` lacks (the other
/// language's, language codes, the specials) get scores that keep the Viterbi search off
/// them wherever a piece of `source` can spell the text (see [`foreign_score`]), so they
/// only turn up for characters `source` cannot spell, where MarianTokenizer also finds
/// them: it looks SentencePiece's unknown stretch up in vocab.json.
pub fn marian_tokenizer(source: &SentencePiece, vocab: &[String], unk: u32) -> Result<Tokenizer> {
    if source.model_type != UNIGRAM {
        return Err(source.error(format!(
            "trainer_spec.model_type is {} (2 BPE, 3 word, 4 char); only unigram (1) models are supported",
            source.model_type
        )));
    }
    let bytes = source.byte_fallback;
    if bytes && let Some(b) = (0..=255u8).find(|b| !vocab.contains(&format!("<0x{b:02X}>"))) {
        return Err(source.error(format!(
            "trainer_spec.byte_fallback is set but vocab.json has no byte piece <0x{b:02X}>"
        )));
    }
    if source.treat_whitespace_as_suffix {
        return Err(source.error(
            "trainer_spec.treat_whitespace_as_suffix is set: word boundaries at the end of pieces are not supported".into(),
        ));
    }
    let spec = &source.normalizer;
    if !spec.escape_whitespaces {
        return Err(source.error(
            "normalizer_spec.escape_whitespaces is off: pieces with bare spaces are not supported"
                .into(),
        ));
    }
    if vocab.get(unk as usize).is_none() {
        return Err(source.error(format!(
            "unk id {unk} is outside the vocabulary of {}",
            vocab.len()
        )));
    }

    let known: HashMap<&str, &Piece> = source
        .pieces
        .iter()
        .filter(|p| matches!(p.kind, PieceType::Normal | PieceType::UserDefined))
        .map(|p| (p.piece.as_str(), p))
        .collect();
    let min_known = known
        .values()
        .map(|p| f64::from(p.score))
        .fold(f64::INFINITY, f64::min);
    if !min_known.is_finite() {
        return Err(source.error("no normal pieces with finite scores".into()));
    }
    let scored: Vec<(String, f64)> = vocab
        .iter()
        .map(|piece| match known.get(piece.as_str()) {
            Some(p) if piece.as_str() != vocab[unk as usize] => (piece.clone(), f64::from(p.score)),
            _ if bytes
                && !is_byte_piece(piece)
                && !SPECIAL_TOKENS.contains(&piece.as_str())
                && !is_language_code(piece) =>
            {
                (
                    format!("{UNREACHABLE}{piece}"),
                    foreign_score(piece, min_known),
                )
            }
            _ => (piece.clone(), foreign_score(piece, min_known)),
        })
        .collect();
    let model = Unigram::from(scored, Some(unk as usize), bytes)
        .map_err(|e| source.error(format!("cannot build the unigram model: {e}")))?;

    let regex = |pattern: &str, content: &str| -> Result<Replace> {
        Replace::new(ReplacePattern::Regex(pattern.into()), content)
            .map_err(|e| source.error(format!("replace /{pattern}/: {e}")))
    };
    let literal = |pattern: &str, content: &str| -> Result<Replace> {
        Replace::new(pattern, content)
            .map_err(|e| source.error(format!("replace {pattern:?}: {e}")))
    };
    // SentencePiece's order (convert_slow_tokenizer.py's build_tokenizer_from_spm_proto):
    // the charsmap, then its whitespace handling, which counts only U+0020 (after the
    // charsmap has mapped tabs and the like to it).
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if !spec.precompiled_charsmap.is_empty() {
        let precompiled = Precompiled::from(&spec.precompiled_charsmap).map_err(|e| {
            source.error(format!(
                "normalizer_spec.precompiled_charsmap ({:?}): {e}",
                spec.name
            ))
        })?;
        normalizers.push(precompiled.into());
    }
    if spec.remove_extra_whitespaces {
        normalizers.push(regex(r"\A +| +\z", "")?.into());
        normalizers.push(regex(" {2,}", " ")?.into());
    }
    normalizers.push(literal(" ", "▁")?.into());
    if !bytes {
        normalizers.push(unknown_stretches(source, vocab)?.into());
    }
    if spec.add_dummy_prefix {
        // SentencePiece prefixes "▁" even to text that starts with a literal "▁"; the
        // Metaspace pre-tokenizer does not, so double it here.
        normalizers.push(regex(r"\A▁", "▁▁")?.into());
    }
    let prepend = if spec.add_dummy_prefix {
        // Every stretch between added tokens is its own SentencePiece call in
        // MarianTokenizer, each with its dummy prefix.
        PrependScheme::Always
    } else {
        PrependScheme::Never
    };
    // MarianTokenizer's decode: SentencePiece's pieces joined, "▁" as a space, and the
    // whole string `.strip()`ped (a trailing "▁" piece leaves no space either).
    let mut decoders: Vec<DecoderWrapper> = Vec::new();
    if bytes {
        decoders.push(literal(UNREACHABLE, "")?.into());
        decoders.push(ByteFallback::new().into());
    }
    decoders.extend([
        literal("▁", " ")?.into(),
        Fuse::new().into(),
        regex(r"\A\s+|\s+\z", "")?.into(),
    ]);

    let mut tokenizer = Tokenizer::new(model);
    tokenizer
        .with_normalizer(Some(NormalizerSequence::new(normalizers)))
        .with_pre_tokenizer(Some(Metaspace::new('▁', prepend, false)))
        .with_decoder(Some(DecoderSequence::new(decoders)));
    // MarianTokenizer splits its special tokens (pad, eos, unk: our ids 0, 2 and `unk`) out
    // of the text before SentencePiece sees it, and decode(skip_special_tokens) drops them.
    // `<s>` (our 1), which Marian does not have, is left to the unigram model, where its
    // score keeps it off wherever `source` can spell "<s>", as MarianTokenizer spells it.
    let specials: Vec<AddedToken> = [0, 2, unk as usize]
        .iter()
        .filter_map(|&id| vocab.get(id))
        .map(|piece| AddedToken::from(piece.clone(), true))
        .collect();
    tokenizer.add_special_tokens(&specials);
    // Language codes stay pieces of the unigram model (scored off the search like the
    // other foreign pieces): MarianTokenizer takes one off the very front of the text
    // before SentencePiece (remove_language_code), which `transduce::Tokenizer::encode`
    // does for vocabularies that hold codes, and spells a code anywhere else as text.
    for p in source
        .pieces
        .iter()
        .filter(|p| p.kind == PieceType::UserDefined)
    {
        // SentencePiece emits user-defined pieces whole wherever they occur.
        if vocab.contains(&p.piece) {
            tokenizer.add_tokens(&[AddedToken::from(p.piece.clone(), false)]);
        }
    }
    Ok(tokenizer)
}

/// Marks, in a byte-fallback model, the pieces `source` does not have: SentencePiece spells
/// what `source` cannot in bytes, so MarianTokenizer never looks another piece up, and the
/// unigram model must not reach one either. A piece that starts with a bare space matches no
/// normalized text (every space is "▁" by then); decoding drops the mark.
const UNREACHABLE: &str = " ";

/// Is `piece` one of SentencePiece's byte pieces (`<0x41>`)?
fn is_byte_piece(piece: &str) -> bool {
    piece.len() == 6
        && piece.starts_with("<0x")
        && piece.ends_with('>')
        && piece[3..5].bytes().all(|c| c.is_ascii_hexdigit())
}

/// The score of a piece `source` does not have: below every piece of `source` for each
/// character it spans (SentencePiece's own unknown-piece score per character), less one more
/// per piece. So wherever `source` can spell a character the search keeps to `source`'s
/// pieces, and over a stretch `source` cannot spell one piece covering all of it beats
/// several: as MarianTokenizer, which looks the stretch up in vocab.json as one string.
fn foreign_score(piece: &str, min_known: f64) -> f64 {
    let per_char = min_known - 10.0;
    per_char * piece.chars().count() as f64 - 1.0
}

/// MarianTokenizer's unknown characters. SentencePiece gives a maximal stretch of
/// characters `source` has no piece for as one unknown piece, its text, and MarianTokenizer
/// looks that text up in vocab.json: the other language's piece if there is one, else
/// `<unk>`. A unigram model cannot look up a whole stretch: it would spell "ßß" with two
/// "ß" pieces, where MarianTokenizer gives one `<unk>`. So this normalizer step replaces
/// each stretch that is not itself a vocabulary piece by one character no piece contains,
/// which the model can only spell as `<unk>`; a stretch that is a piece stays, and the
/// model spells it with that one piece (see [`foreign_score`]).
fn unknown_stretches(source: &SentencePiece, vocab: &[String]) -> Result<Replace> {
    // The characters `source` spells: those with a one-character piece (SentencePiece
    // inserts an unknown node exactly where no such piece starts).
    let mut known: Vec<char> = source
        .pieces
        .iter()
        .filter(|p| matches!(p.kind, PieceType::Normal | PieceType::UserDefined))
        .filter_map(|p| {
            let mut chars = p.piece.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            }
        })
        .collect();
    known.sort_unstable();
    known.dedup();
    if known.is_empty() {
        return Err(source.error("no one-character pieces: not a usable unigram model".into()));
    }
    let escape = |c: char| format!("\\x{{{:x}}}", c as u32);
    let class: String = known.iter().map(|&c| escape(c)).collect();
    let mut whole: Vec<&String> = vocab
        .iter()
        .filter(|p| !p.is_empty() && p.chars().all(|c| known.binary_search(&c).is_err()))
        .collect();
    // Longest first, so a longer piece is tried before its prefix.
    whole.sort_by_key(|p| std::cmp::Reverse(p.chars().count()));
    let pieces: Vec<String> = whole
        .iter()
        .map(|p| p.chars().map(escape).collect())
        .collect();
    // At the start of a stretch (no unknown character before it, one at it; the cheap
    // checks come first, as most positions fail them), unless the stretch is one of those
    // pieces, the whole stretch.
    let pattern = if pieces.is_empty() {
        format!("[^{class}]+")
    } else {
        format!(
            "(?<![^{class}])(?=[^{class}])(?!(?:{})(?![^{class}]))[^{class}]+",
            pieces.join("|")
        )
    };
    let used: std::collections::HashSet<char> = vocab.iter().flat_map(|p| p.chars()).collect();
    let placeholder = ('\u{e000}'..='\u{f8ff}')
        .find(|c| !used.contains(c))
        .ok_or_else(|| source.error("every private-use character is in a piece".into()))?;
    Replace::new(ReplacePattern::Regex(pattern), placeholder.to_string())
        .map_err(|e| source.error(format!("the unknown-stretch pattern: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{fixture, ids};
    use serde_json::Value as Json;
    use std::path::{Path, PathBuf};

    /// The fixtures folder.
    fn fixtures() -> PathBuf {
        fixture("")
    }

    fn json(path: &Path) -> Json {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// vocab.json's (piece, Marian id) entries.
    fn vocab_json(folder: &Path) -> Vec<(String, u32)> {
        let bytes = std::fs::read(folder.join("vocab.json")).expect("vocab.json");
        crate::vocab::parse_vocab(&bytes).expect("a vocabulary")
    }

    struct Converted {
        tokenizer: Tokenizer,
        /// ours[marian id]
        ours: Vec<u32>,
    }

    /// The tokenizer of fixture folder `model` built from its `spm` file.
    fn convert_in(model: &str, spm: &str) -> Converted {
        let folder = fixtures().join(model);
        let entries = vocab_json(&folder);
        let id = |piece: &str| entries.iter().find(|(p, _)| p == piece).unwrap().1;
        let order = crate::vocab::renumber(&entries, id("<pad>"), id("</s>"), id("<unk>"))
            .unwrap()
            .pieces;
        // ours[m]: the id our tokenizer gives the text of Marian id m (its piece's place in
        // our order; Marian's `<pad>` is our PAD there).
        let mut ours = vec![0; entries.len()];
        for (piece, m) in &entries {
            ours[*m as usize] = order.iter().position(|p| p == piece).unwrap() as u32;
        }
        let spm = SentencePiece::parse(&std::fs::read(folder.join(spm)).unwrap(), spm).unwrap();
        let tokenizer = marian_tokenizer(&spm, &order, 3).unwrap();
        Converted { tokenizer, ours }
    }

    fn convert(spm: &str) -> Converted {
        convert_in("swish", spm)
    }

    /// The tokenizer as bundles load it (our wrapper: a leading language code, byte pieces).
    fn loaded(converted: &Converted) -> transduce::Tokenizer {
        let file = converted.tokenizer.to_string(false).unwrap();
        transduce::Tokenizer::from_bytes(file.as_bytes()).unwrap()
    }

    /// Compares our ids with MarianTokenizer's (mapped to our order, its appended `</s>`
    /// removed) on every string of one side of tokenization.json; returns the agreement.
    fn agreement(model: &str, side: &str, spm: &str) -> (usize, Vec<String>) {
        let converted = convert_in(model, spm);
        let loaded = loaded(&converted);
        // The 2020 fixtures share one file at the top; tc/ has its own.
        let reference = match model {
            "tc" => json(&fixtures().join("tc/tokenization.json")),
            _ => json(&fixtures().join("tokenization.json")),
        };
        let cases = reference[side].as_array().expect("a list of cases");
        let mut differences = Vec::new();
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let mut expected: Vec<u32> = ids(&case["ids"])
                .iter()
                .map(|&m| converted.ours[m as usize])
                .collect();
            assert_eq!(
                expected.pop(),
                Some(2),
                "{text:?}: the reference ends with </s>"
            );
            let got = loaded.encode(text).unwrap();
            if got != expected {
                let pieces = |ids: &[u32]| -> Vec<String> {
                    ids.iter()
                        .map(|&i| converted.tokenizer.id_to_token(i).unwrap_or_default())
                        .collect()
                };
                differences.push(format!(
                    "{text:?}: transformers {:?}, ours {:?}",
                    pieces(&expected),
                    pieces(&got)
                ));
            }
        }
        (cases.len(), differences)
    }

    /// Requires the measured agreement, and that the strings that differ are exactly those
    /// tests/fixtures/marian/README.md explains.
    fn require(model: &str, side: &str, spm: &str, goal: f64, explained: &[&str]) {
        let (n, differences) = agreement(model, side, spm);
        let agree = (n - differences.len()) as f64 / n as f64;
        eprintln!(
            "{side}: {} of {n} strings identical ({:.2}%)",
            n - differences.len(),
            100.0 * agree
        );
        for d in &differences {
            eprintln!("  differs: {d}");
        }
        assert!(
            agree >= goal,
            "{side}: {:.2}% identical, below {:.2}%:\n{}",
            100.0 * agree,
            100.0 * goal,
            differences.join("\n")
        );
        let texts: Vec<String> = differences
            .iter()
            .map(|d| d[..d.find(": transformers").unwrap()].to_string())
            .collect();
        let explained: Vec<String> = explained.iter().map(|t| format!("{t:?}")).collect();
        assert_eq!(
            texts, explained,
            "{side}: the differing strings are not the explained ones"
        );
    }

    #[test]
    fn import_source_ids_match_marian_tokenizer() {
        require("swish", "source", "source.spm", 1.0, &[]);
    }

    /// A byte-fallback model's tokenizer (tc/): text its pieces cannot spell (emoji, CJK,
    /// other scripts, control characters) in bytes, as SentencePiece spells it.
    #[test]
    fn import_byte_fallback_ids_match_marian_tokenizer() {
        // One string differs, as tests/fixtures/marian/README.md explains: "<s>" where the
        // source model spells neither "<" nor ">".
        let cases = 515.0;
        require(
            "tc",
            "source",
            "source.spm",
            (cases - 1.0) / cases,
            &["<s> start"],
        );
        let reference = json(&fixtures().join("tc/tokenization.json"));
        let bytes = reference["source"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["pieces"].as_array().is_some_and(|p| {
                    p.iter()
                        .any(|p| p.as_str().is_some_and(|p| p.starts_with("<0x")))
                })
            })
            .count();
        assert!(
            bytes >= 20,
            "only {bytes} strings of tc/ are spelled with byte pieces"
        );
    }

    /// Byte pieces decode as MarianTokenizer (SentencePiece) decodes them: runs of valid
    /// UTF-8 to their text, each byte of an invalid sequence to one U+FFFD.
    #[test]
    fn import_byte_pieces_decode_as_sentencepiece() {
        let converted = convert_in("tc", "source.spm");
        let loaded = loaded(&converted);
        let reference = json(&fixtures().join("tc/tokenization.json"));
        let cases = reference["decoding"].as_array().unwrap();
        assert!(cases.len() >= 6);
        for case in cases {
            let ours: Vec<u32> = ids(&case["ids"])
                .iter()
                .map(|&m| converted.ours[m as usize])
                .collect();
            assert_eq!(
                loaded.decode(&ours).unwrap(),
                case["text"].as_str().unwrap(),
                "{:?}",
                case["ids"]
            );
        }
    }

    #[test]
    fn import_target_ids_match_marian_tokenizer() {
        require("swish", "target", "target.spm", 1.0, &[]);
    }

    #[test]
    fn import_decoding_generate_outputs_gives_transformers_text() {
        let mut checked = 0;
        for model in ["swish", "relu", "tc"] {
            let converted = convert_in(model, "source.spm");
            let loaded = loaded(&converted);
            let reference = json(&fixtures().join(model).join("reference.json"));
            let runs = ["generate", "max_length_cases"]
                .iter()
                .flat_map(|k| reference[*k].as_array().expect("a list").iter());
            for run in runs {
                for search in ["greedy", "beam4"] {
                    let out = &run[search];
                    let ours: Vec<u32> = ids(&out["ids"])
                        .iter()
                        .map(|&m| converted.ours[m as usize])
                        .collect();
                    let text = loaded.decode(&ours).unwrap();
                    assert_eq!(
                        text,
                        out["text"].as_str().unwrap(),
                        "{model} {search} of {:?}",
                        run["text"]
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            checked >= 3 * 2 * 30,
            "only {checked} outputs in the fixtures"
        );
    }

    /// What the importer ships: tokenizer.json, loaded as our bundles load it, spells and
    /// decodes as the tokenizer built in memory.
    #[test]
    fn import_tokenizer_json_round_trips_through_our_loader() {
        let converted = convert("source.spm");
        let file = converted.tokenizer.to_string(false).unwrap();
        let loaded = transduce::Tokenizer::from_bytes(file.as_bytes()).unwrap();
        assert_eq!(
            loaded.vocab_size(),
            converted.tokenizer.get_vocab_size(true)
        );
        let reference = json(&fixtures().join("tokenization.json"));
        for case in reference["source"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            let ids = converted
                .tokenizer
                .encode(text, false)
                .unwrap()
                .get_ids()
                .to_vec();
            // A leading language code is our wrapper's (MarianTokenizer's rule); the rest is
            // the file's own tokenization.
            if !text.starts_with(">>") {
                assert_eq!(loaded.encode(text).unwrap(), ids, "{text:?}");
            }
            assert_eq!(
                loaded.decode(&ids).unwrap(),
                converted.tokenizer.decode(&ids, true).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn import_spm_reads_the_fixture_models() {
        let folder = fixtures().join("swish");
        let reference = json(&fixtures().join("spm-pieces.json"));
        for name in ["source.spm", "target.spm"] {
            let spm =
                SentencePiece::parse(&std::fs::read(folder.join(name)).unwrap(), name).unwrap();
            let expected = &reference[name];
            assert_eq!(spm.model_type, UNIGRAM);
            assert_eq!(
                spm.normalizer.name,
                expected["normalizer"].as_str().unwrap()
            );
            assert!(spm.normalizer.add_dummy_prefix && spm.normalizer.remove_extra_whitespaces);
            assert_eq!(
                spm.normalizer.precompiled_charsmap.len() as u64,
                expected["charsmap_bytes"].as_u64().unwrap()
            );
            let pieces = expected["pieces"].as_array().unwrap();
            assert_eq!(spm.pieces.len(), pieces.len(), "{name}");
            for (got, want) in spm.pieces.iter().zip(pieces) {
                assert_eq!(got.piece, want[0].as_str().unwrap());
                assert_eq!(got.score, want[1].as_f64().unwrap() as f32, "{}", got.piece);
                let kind = match want[2].as_u64().unwrap() {
                    1 => PieceType::Normal,
                    2 => PieceType::Unknown,
                    3 => PieceType::Control,
                    other => panic!("type {other} in the fixture"),
                };
                assert_eq!(got.kind, kind, "{}", got.piece);
            }
        }
    }

    #[test]
    fn import_spm_bad_bytes_are_errors_naming_the_field() {
        let path = fixtures().join("swish/source.spm");
        let bytes = std::fs::read(&path).unwrap();
        // Cut anywhere: never a panic, always an error that says where.
        for cut in (0..bytes.len())
            .step_by(1009)
            .chain([1, 2, 3, bytes.len() - 1])
        {
            match SentencePiece::parse(&bytes[..cut], "source.spm") {
                Ok(spm) => assert!(cut > 0 && !spm.pieces.is_empty()),
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains("source.spm") && e.contains("not a SentencePiece model"),
                        "{e}"
                    );
                }
            }
        }
        // A truncated length inside the first piece.
        let e = SentencePiece::parse(&bytes[..6], "source.spm")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ModelProto at byte") && e.contains("ModelProto.pieces:"),
            "{e}"
        );
        // Flipped bytes: errors or other models, never a panic.
        for at in (0..bytes.len()).step_by(613) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0xff;
            let _ = SentencePiece::parse(&flipped, "source.spm");
        }
        // A piece string that is not UTF-8.
        let bad_piece = [0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe];
        let e = SentencePiece::parse(&bad_piece, "source.spm")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SentencePiece.piece at byte 2: invalid UTF-8"),
            "{e}"
        );
        // A score sent as a varint.
        let bad_score = [0x0a, 0x05, 0x0a, 0x01, b'a', 0x10, 0x01];
        let e = SentencePiece::parse(&bad_score, "source.spm")
            .unwrap_err()
            .to_string();
        assert!(e.contains("SentencePiece.score"), "{e}");
        // No normalizer_spec.
        let e = SentencePiece::parse(&[0x0a, 0x03, 0x0a, 0x01, b'a'], "source.spm")
            .unwrap_err()
            .to_string();
        assert!(e.contains("normalizer_spec: missing"), "{e}");
    }

    #[test]
    fn import_refuses_models_it_cannot_represent() {
        let folder = fixtures().join("swish");
        let entries = vocab_json(&folder);
        let order = crate::vocab::renumber(&entries, 552, 0, 1).unwrap().pieces;
        let spm = SentencePiece::parse(
            &std::fs::read(folder.join("source.spm")).unwrap(),
            "source.spm",
        )
        .unwrap();
        let mut bpe = spm.clone();
        bpe.model_type = 2;
        let e = marian_tokenizer(&bpe, &order, 3).unwrap_err().to_string();
        assert!(
            e.contains("source.spm") && e.contains("model_type is 2"),
            "{e}"
        );
        let mut bytes = spm.clone();
        bytes.byte_fallback = true;
        let e = marian_tokenizer(&bytes, &order, 3).unwrap_err().to_string();
        assert!(
            e.contains("byte_fallback") && e.contains("no byte piece <0x00>"),
            "{e}"
        );
        let mut charsmap = spm.clone();
        charsmap.normalizer.precompiled_charsmap.truncate(3);
        let e = marian_tokenizer(&charsmap, &order, 3)
            .unwrap_err()
            .to_string();
        assert!(e.contains("precompiled_charsmap"), "{e}");
        let e = marian_tokenizer(&spm, &order, order.len() as u32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the vocabulary"), "{e}");
    }
}
