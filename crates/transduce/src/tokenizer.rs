//! A thin wrapper over Hugging Face `tokenizers`: one shared BPE vocabulary for source and
//! target (§5.1), SentencePiece-style word boundaries (`▁`) so detokenization is exact, and
//! the four special tokens at fixed ids.

use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::normalizers::unicode::NFKC;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::{AddedToken, PostProcessorWrapper, TokenizerImpl};

use crate::error::{Error, Result};

/// Padding: fills short sequences in a batch; never attended to.
pub const PAD: u32 = 0;
/// Beginning of sentence: the first decoder input.
pub const BOS: u32 = 1;
/// End of sentence: ends every target.
pub const EOS: u32 = 2;
/// Unknown: anything the vocabulary cannot spell.
pub const UNK: u32 = 3;
/// The special tokens, in id order.
pub const SPECIAL_TOKENS: [&str; 4] = ["<pad>", "<s>", "</s>", "<unk>"];

/// A BPE tokenizer with the special tokens at ids 0–3.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// A Marian tokenizer (a unigram model, or a vocabulary of language codes such as
    /// `>>fra<<`): text that starts with a code gets it as one token ([`Tokenizer::encode`]).
    language_codes: bool,
    /// The vocabulary holds SentencePiece's 256 byte pieces (`<0x00>` … `<0xFF>`, a
    /// `--byte_fallback` model's): text no piece spells is spelled in bytes, and decoding
    /// turns runs of them back into text as SentencePiece does ([`Tokenizer::decode`]).
    byte_pieces: bool,
}

/// Is this a Marian language code such as `>>fra<<`?
pub fn is_language_code(token: &str) -> bool {
    token.len() > 4 && token.starts_with(">>") && token.ends_with("<<")
}

/// SentencePiece's name for the byte piece of `b`.
fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The byte a SentencePiece byte piece (`<0x41>`) stands for.
fn byte_of_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2
        && hex
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase()))
    .then(|| u8::from_str_radix(hex, 16).ok())
    .flatten()
}

/// The text of a run of byte pieces as SentencePiece decodes it: UTF-8, with one U+FFFD
/// for each byte that does not start a valid sequence there.
fn sentencepiece_text(mut bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len());
    while !bytes.is_empty() {
        match std::str::from_utf8(bytes) {
            Ok(valid) => {
                text.push_str(valid);
                break;
            }
            Err(e) => {
                let (valid, rest) = bytes.split_at(e.valid_up_to());
                text.push_str(std::str::from_utf8(valid).expect("checked valid"));
                text.push(char::REPLACEMENT_CHARACTER);
                bytes = &rest[1..];
            }
        }
    }
    text
}

/// A run of byte pieces as a token for the decoder chain, which reads "▁" as a space and
/// drops bare spaces (the import's mark of pieces the source model cannot reach): a space
/// the bytes spell goes in as "▁", so that it comes out as one.
fn byte_run(bytes: &[u8]) -> String {
    sentencepiece_text(bytes).replace(' ', "▁")
}

impl Tokenizer {
    /// Parses `tokenizer.json` and checks the special tokens sit at their fixed ids.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        // UTF-8 and syntax first: the tokenizers crate panics (rather than erring) on some
        // malformed JSON inside a `decoder` object, and in wasm a panic kills the module.
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let line = 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            Error::Tokenizer(format!("cannot parse: line {line}: {e}"))
        })?;
        serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| {
            Error::Tokenizer(format!(
                "cannot parse: line {} column {}: {e}",
                e.line(),
                e.column()
            ))
        })?;
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| Error::Tokenizer(format!("cannot parse: {e}")))?;
        for (id, token) in SPECIAL_TOKENS.iter().enumerate() {
            match inner.token_to_id(token) {
                Some(found) if found == id as u32 => {}
                Some(found) => {
                    return Err(Error::Tokenizer(format!(
                        "special token {token} has id {found}, expected {id}"
                    )));
                }
                None => {
                    return Err(Error::Tokenizer(format!(
                        "special token {token} is missing"
                    )));
                }
            }
        }
        // SentencePiece (unigram) tokenizers are Marian imports: MarianTokenizer takes a
        // leading code off the text whether or not its vocabulary holds any.
        let language_codes = matches!(inner.get_model(), tokenizers::ModelWrapper::Unigram(_))
            || inner
                .get_vocab(true)
                .keys()
                .any(|token| is_language_code(token));
        let byte_pieces = (0..=255u8).all(|b| inner.token_to_id(&byte_piece(b)).is_some());
        Ok(Tokenizer {
            inner,
            language_codes,
            byte_pieces,
        })
    }

    /// Learns a shared BPE vocabulary of at most `vocab_size` tokens from sentences of both
    /// languages (§5.1 uses one source–target vocabulary of about 37,000 tokens).
    pub fn train<I, S>(sentences: I, vocab_size: usize) -> Result<Self>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
    {
        Self::train_with_tokens(sentences, vocab_size, &[])
    }

    /// As [`Tokenizer::train`], then adds `tokens` as whole tokens after the learned
    /// vocabulary: parsing (§6.3) writes its trees with bracket tokens such as `(NP` and
    /// `)NP`, which must never be split into pieces. They only match as whole words, so a
    /// source word that merely contains one is tokenized as usual.
    pub fn train_with_tokens<I, S>(
        sentences: I,
        vocab_size: usize,
        tokens: &[String],
    ) -> Result<Self>
    where
        I: Iterator<Item = S> + Send,
        S: AsRef<str> + Send,
    {
        let specials: Vec<AddedToken> = SPECIAL_TOKENS
            .iter()
            .map(|t| AddedToken::from(t.to_string(), true))
            .collect();
        let mut trainer = BpeTrainerBuilder::new()
            .show_progress(false)
            .vocab_size(vocab_size)
            .min_frequency(2)
            .special_tokens(specials)
            .build();
        let model = BPE::builder()
            .unk_token(SPECIAL_TOKENS[UNK as usize].to_string())
            .build()
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        let metaspace = Metaspace::new('▁', PrependScheme::Always, true);
        let mut tokenizer: TokenizerImpl<BPE, NFKC, Metaspace, PostProcessorWrapper, Metaspace> =
            TokenizerImpl::new(model);
        tokenizer
            .with_normalizer(Some(NFKC))
            .with_pre_tokenizer(Some(metaspace.clone()))
            .with_decoder(Some(metaspace));
        tokenizer
            .train(&mut trainer, sentences)
            .map_err(|e| Error::Tokenizer(format!("training failed: {e}")))?;
        let added: Vec<AddedToken> = tokens
            .iter()
            .map(|t| AddedToken::from(t.clone(), false).single_word(true))
            .collect();
        tokenizer.add_tokens(&added);
        // The post-processor slot stays empty: BOS/EOS are added by the model code.
        let inner: tokenizers::Tokenizer = tokenizer.into();
        let json = inner
            .to_string(false)
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Self::from_bytes(json.as_bytes())
    }

    /// Serializes to `tokenizer.json`.
    pub fn to_json(&self) -> Result<String> {
        self.inner
            .to_string(true)
            .map_err(|e| Error::Tokenizer(e.to_string()))
    }

    /// Number of tokens, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Text to token ids, without BOS/EOS.
    ///
    /// With a Marian tokenizer (an imported OPUS-MT model's), text that starts
    /// with `>>…<<` gets that code as one token (`<unk>` if the vocabulary lacks it) and the
    /// rest is tokenized on its own: MarianTokenizer's `remove_language_code`, which looks
    /// only at the very start; a code anywhere else is spelled as any text is.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        if self.language_codes
            && text.starts_with(">>")
            && let Some(end) = text.find("<<")
        {
            let (code, rest) = text.split_at(end + 2);
            let mut ids = vec![self.inner.token_to_id(code).unwrap_or(UNK)];
            ids.extend(self.spell(rest)?);
            return Ok(ids);
        }
        self.spell(text)
    }

    /// The tokenizer's own ids of `text`.
    fn spell(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| Error::Input(format!("cannot tokenize: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Token ids to text; special tokens are dropped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let failed = |e: tokenizers::Error| Error::Input(format!("cannot detokenize: {e}"));
        if !self.byte_pieces {
            return self.inner.decode(ids, true).map_err(failed);
        }
        // As `tokenizers` decodes (added tokens first, special ones dropped, unknown ids
        // skipped), except that each run of byte pieces becomes its text first, by
        // SentencePiece's rule rather than `tokenizers`' ByteFallback decoder's, which
        // makes every byte of a run with one invalid sequence in it a U+FFFD.
        let added = self.inner.get_added_vocabulary();
        let mut tokens: Vec<String> = Vec::with_capacity(ids.len());
        let mut bytes: Vec<u8> = Vec::new();
        for &id in ids {
            let Some(token) = self.inner.id_to_token(id) else {
                continue;
            };
            if added.is_special_token(&token) {
                continue;
            }
            match byte_of_piece(&token) {
                Some(b) => bytes.push(b),
                None => {
                    if !bytes.is_empty() {
                        tokens.push(byte_run(&std::mem::take(&mut bytes)));
                    }
                    tokens.push(token);
                }
            }
        }
        if !bytes.is_empty() {
            tokens.push(byte_run(&bytes));
        }
        match self.inner.get_decoder() {
            Some(decoder) => tokenizers::Decoder::decode(decoder, tokens).map_err(failed),
            None => Ok(tokens.join(" ")),
        }
    }

    /// The surface string of each token id (for attention heat-map labels).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The surface string of every id below `vocab_size` (`""` for ids without a token).
    pub fn id_strings(&self, vocab_size: usize) -> Vec<String> {
        (0..vocab_size as u32)
            .map(|id| self.id_to_token(id).unwrap_or_default())
            .collect()
    }

    /// The language codes (`>>fra<<` …) the vocabulary holds, sorted: the targets of a model
    /// of many targets, each chosen by putting its code first. Only a Marian tokenizer takes
    /// a leading code as one token ([`Tokenizer::encode`]); others have none.
    pub fn language_tokens(&self) -> Vec<String> {
        if !self.language_codes {
            return Vec::new();
        }
        let mut tokens: Vec<String> = self
            .inner
            .get_vocab(true)
            .into_keys()
            .filter(|t| is_language_code(t))
            .collect();
        tokens.sort();
        tokens
    }

    /// The id of a token string, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Vec<&'static str> {
        vec![
            "Two young men are playing football.",
            "Zwei junge Männer spielen Fußball.",
            "A dog runs through the grass.",
            "Ein Hund rennt durch das Gras.",
            "Two dogs are playing in the grass.",
            "Zwei Hunde spielen im Gras.",
        ]
    }

    #[test]
    fn specials_at_fixed_ids_and_exact_round_trip() {
        let tok = Tokenizer::train(corpus().into_iter(), 200).unwrap();
        for (id, t) in SPECIAL_TOKENS.iter().enumerate() {
            assert_eq!(tok.token_to_id(t), Some(id as u32));
        }
        for s in corpus() {
            let ids = tok.encode(s).unwrap();
            assert!(ids.iter().all(|&i| i > UNK), "{s}: {ids:?}");
            assert_eq!(tok.decode(&ids).unwrap(), s);
        }
        // Shared vocabulary: subwords of both languages in one table.
        assert!(tok.vocab_size() <= 200);
        let json = tok.to_json().unwrap();
        let back = Tokenizer::from_bytes(json.as_bytes()).unwrap();
        assert_eq!(
            back.encode("Zwei Hunde").unwrap(),
            tok.encode("Zwei Hunde").unwrap()
        );
    }

    /// SentencePiece's decoding of byte pieces, computed by hand from UTF-8: valid runs to
    /// their characters, one U+FFFD per byte that starts no valid sequence.
    #[test]
    fn byte_runs_decode_as_sentencepiece() {
        let r = char::REPLACEMENT_CHARACTER;
        assert_eq!(sentencepiece_text(&[0xF0, 0x9F, 0x98, 0x80]), "😀");
        // An emoji cut after three bytes: three replacements, not one.
        assert_eq!(
            sentencepiece_text(&[0xF0, 0x9F, 0x98]),
            format!("{r}{r}{r}")
        );
        assert_eq!(sentencepiece_text(&[0x61, 0xFF, 0x62]), format!("a{r}b"));
        assert_eq!(
            sentencepiece_text(&[0xE6, 0x9D, 0xB1, 0xFF, 0xE4]),
            format!("東{r}{r}")
        );
        assert_eq!(byte_run(b" e"), "▁e");
        assert_eq!(byte_of_piece("<0x0A>"), Some(10));
        assert_eq!(byte_of_piece("<0x0a>"), None);
        assert_eq!(byte_of_piece("<0x100>"), None);
        assert_eq!(byte_of_piece(&byte_piece(0xFF)), Some(0xFF));
    }

    #[test]
    fn unseen_characters_become_unk() {
        let tok = Tokenizer::train(corpus().into_iter(), 200).unwrap();
        let ids = tok.encode("Q").unwrap();
        assert!(ids.contains(&UNK), "{ids:?}");
    }

    #[test]
    fn bad_tokenizer_json_is_an_error() {
        let err = Tokenizer::from_bytes(b"{not json").unwrap_err();
        assert!(err.to_string().starts_with("tokenizer.json"), "{err}");
        // Found by fuzzing: the tokenizers crate panics on these inside a `decoder`
        // object (a syntax error; a key that is not UTF-8). Both must be errors.
        let json = Tokenizer::train(corpus().into_iter(), 200)
            .unwrap()
            .to_json()
            .unwrap();
        let at = json.find("\"decoder\": {").expect("a decoder object") + 13;
        let mut syntax = json.clone().into_bytes();
        syntax.splice(at..at, *b"\"x\": [,");
        let mut not_utf8 = json.into_bytes();
        not_utf8.splice(at..at, *b"\"spli\xff\": true,");
        for (bad, why) in [(syntax, "line"), (not_utf8, "invalid utf-8")] {
            let err = Tokenizer::from_bytes(&bad).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
    }
}
