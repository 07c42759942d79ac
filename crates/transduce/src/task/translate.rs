//! Translation (§6.1): text in, text out, through the shared tokenizer and either search.
//!
//! Long input is cut into sentences first ([`split_sentences`]): the model was trained on
//! single sentences, and a sentence at a time lets a caller show partial results.

use crate::bundle::Bundle;
use crate::decode::{self, DecodeOptions};
use crate::error::Result;

/// Best output ids for each source (ids without BOS/EOS): greedy for `beam <= 1`, beam
/// search otherwise. Every device read is awaited, so this runs in the browser too.
pub async fn best_outputs_async(
    bundle: &Bundle,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
) -> Result<Vec<Vec<u32>>> {
    decode::best_outputs_async(bundle.scorer(), sources, options, None).await
}

/// One translated sentence: source and output text with their token strings (the labels
/// of an attention heat map).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Translation {
    pub source: String,
    pub target: String,
    pub source_ids: Vec<u32>,
    pub target_ids: Vec<u32>,
}

/// Translates one sentence. Empty (or all-whitespace) text gives an empty translation.
pub async fn translate_sentence_async(
    bundle: &Bundle,
    text: &str,
    options: &DecodeOptions,
) -> Result<Translation> {
    let source = text.trim();
    let source_ids = bundle.tokenizer.encode(source)?;
    if source_ids.is_empty() {
        return Ok(Translation {
            source: source.to_string(),
            target: String::new(),
            source_ids,
            target_ids: Vec::new(),
        });
    }
    // A sentence longer than the model's positions is an error from check_length,
    // never a silent cut.
    let target_ids = best_outputs_async(bundle, std::slice::from_ref(&source_ids), options)
        .await?
        .pop()
        .unwrap_or_default();
    Ok(Translation {
        source: source.to_string(),
        target: bundle.tokenizer.decode(&target_ids)?,
        source_ids,
        target_ids,
    })
}

/// Byte ranges of the sentences of `text`, in order, covering every non-space character.
///
/// A sentence ends after `.`, `!`, `?` or `…` (with any closing quotes or brackets) that
/// is followed by whitespace, and at every line break. Abbreviations such as "Mr." may
/// split a sentence in two; the model then translates two fragments, never loses text.
pub fn split_sentences(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut chars = text.char_indices().peekable();
    let mut push = |start: &mut Option<usize>, end: usize| {
        if let Some(s) = start.take() {
            let piece = &text[s..end];
            let trimmed = piece.trim_end();
            if !trimmed.is_empty() {
                out.push(s..s + trimmed.len());
            }
        }
    };
    while let Some((i, c)) = chars.next() {
        if c == '\n' || c == '\r' {
            push(&mut start, i);
            continue;
        }
        if start.is_none() {
            if c.is_whitespace() {
                continue;
            }
            start = Some(i);
        }
        if matches!(c, '.' | '!' | '?' | '…') {
            // Take closing punctuation that belongs to the sentence.
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if matches!(
                    d,
                    '.' | '!' | '?' | '…' | '"' | '\'' | ')' | ']' | '»' | '”' | '’'
                ) {
                    end = j + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            match chars.peek() {
                Some(&(_, d)) if d.is_whitespace() => push(&mut start, end),
                None => push(&mut start, end),
                _ => {}
            }
        }
    }
    push(&mut start, text.len());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&str> {
        split_sentences(text)
            .into_iter()
            .map(|r| &text[r])
            .collect()
    }

    #[test]
    fn splits_on_sentence_ends_and_lines() {
        assert_eq!(
            pieces("A man sleeps. A dog runs!  Why? \"Yes.\" Last one"),
            [
                "A man sleeps.",
                "A dog runs!",
                "Why?",
                "\"Yes.\"",
                "Last one"
            ]
        );
        assert_eq!(pieces("one\ntwo\r\n\nthree"), ["one", "two", "three"]);
        assert_eq!(pieces("3.5 apples."), ["3.5 apples."]);
        assert!(pieces("   \n ").is_empty());
    }

    #[test]
    fn never_loses_text() {
        let text = "Hello there. ¿Qué? Ünïcödé… fine!! end";
        let kept: String = pieces(text).concat().split_whitespace().collect();
        let all: String = text.split_whitespace().collect();
        assert_eq!(kept, all);
    }
}
