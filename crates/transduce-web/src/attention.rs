//! Attention weights of a teacher-forced pass, read to the host (Figures 3–5).

use serde::Serialize;
use transduce::burn::prelude::*;
use transduce::model::token_tensor;
use transduce::task::focus::WordFocus;
use transduce::tokenizer::BOS;
use transduce::{Bundle, Error, Result};

/// One layer's weights: `data[(head * rows + row) * cols + col]`.
#[derive(Serialize)]
pub struct Layer {
    pub heads: usize,
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attention {
    pub source_tokens: Vec<String>,
    /// Output tokens, EOS last: row `i` is the step that wrote `target_tokens[i]`.
    pub target_tokens: Vec<String>,
    pub encoder_self: Vec<Layer>,
    pub decoder_self: Vec<Layer>,
    pub cross: Vec<Layer>,
}

async fn read(tensors: Vec<Tensor<4>>) -> Result<Vec<Layer>> {
    let mut out = Vec::with_capacity(tensors.len());
    for t in tensors {
        let [_, heads, rows, cols] = t.dims();
        let data = t
            .into_data_async()
            .await
            .map_err(|e| Error::Device(format!("{e:?}")))?
            .try_into_vec_as::<f32>()
            .map_err(|e| Error::Device(format!("{e:?}")))?;
        out.push(Layer {
            heads,
            rows,
            cols,
            data,
        });
    }
    Ok(out)
}

/// Encoder self-, decoder self- and cross-attention of every layer for one pair.
pub async fn maps(
    bundle: &Bundle,
    source_ids: &[u32],
    target_ids: &[u32],
) -> Result<(Vec<Layer>, Vec<Layer>, Vec<Layer>)> {
    if source_ids.is_empty() {
        return Err(Error::Input("no source tokens".into()));
    }
    let vocab = bundle.config.model.vocab_size as u32;
    if let Some(bad) = source_ids.iter().chain(target_ids).find(|&&id| id >= vocab) {
        return Err(Error::Input(format!(
            "token id {bad} is outside the vocabulary"
        )));
    }
    // An int8 bundle decodes without burn's model: attention maps build it here.
    let model = bundle.model()?;
    let device = model.device();
    let mut tgt_in = vec![BOS];
    tgt_in.extend_from_slice(target_ids);
    // A word-focus parser sees the same focus as when it decoded these tokens.
    let focus = bundle
        .config
        .model
        .word_focus
        .then(|| WordFocus::from_vocab(&bundle.tokenizer.id_strings(vocab as usize)))
        .flatten()
        .map(|rule| rule.tensor(&[source_ids], &[&tgt_in], &device));
    let maps = model.attention_maps(
        token_tensor(&[bundle.config.model.source_row(source_ids)], &device)?,
        token_tensor(&[tgt_in], &device)?,
        focus,
    );
    Ok((
        read(maps.encoder_self).await?,
        read(maps.decoder_self).await?,
        read(maps.cross).await?,
    ))
}
