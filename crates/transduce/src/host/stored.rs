//! The host decoder read straight from an int8 bundle's tensors, without an f32 copy: the
//! matrices are packed from the stored integers and scales, and the tied embedding is
//! read from the output projection's rows. A 74M-parameter model then takes its int8
//! bytes (about a quarter of f32) in memory where loading through burn held the f32 model
//! twice over (burn's and the host's arrays) before quantizing.

use safetensors::{Dtype, SafeTensors};

use super::int8::Int8Matrix;
use super::matrix::{Matrix, Projection};
use super::{DecoderLayer, EncoderLayer, HostModel, Norm, SINUSOID_ROWS, Table};
use crate::config::{ModelConfig, Positional};
use crate::embedding::sinusoid_table;
use crate::error::Result;
use crate::stored::StoredTensors;

/// Reads tensors by the bundle's names ([`crate::bundle`]: the module tree's paths,
/// linear weights `[out, in]`, LayerNorm's `weight`/`bias`).
struct Reader<'a> {
    file: StoredTensors<'a>,
    config: &'a ModelConfig,
}

impl Reader<'_> {
    fn floats(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        Ok(self.file.floats(name, shape, false)?.0)
    }

    /// `[out, in]` int8 rows of the linear layers `names` stacked (side by side as
    /// columns of `x·W`), with their biases when `bias`.
    fn linear(
        &mut self,
        names: &[&str],
        inputs: usize,
        outputs: &[usize],
        bias: bool,
    ) -> Result<Matrix> {
        let n: usize = outputs.iter().sum();
        let mut rows = Vec::with_capacity(n * inputs);
        let mut scales = Vec::with_capacity(n);
        let mut biases = bias.then(|| Vec::with_capacity(n));
        for (name, &out) in names.iter().zip(outputs) {
            let (q, s) = self.file.int8(&format!("{name}.weight"), out, inputs)?;
            rows.extend_from_slice(q);
            scales.extend(s);
            if let Some(biases) = &mut biases {
                biases.extend(self.floats(&format!("{name}.bias"), &[out])?);
            }
        }
        Ok(Matrix::from_int8(Int8Matrix::from_rows(
            inputs, n, &rows, scales, biases,
        )))
    }

    fn norm(&mut self, name: &str) -> Result<Norm> {
        let d = self.config.d_model;
        Ok(Norm {
            gamma: self.floats(&format!("{name}.weight"), &[d])?,
            beta: self.floats(&format!("{name}.bias"), &[d])?,
        })
    }

    /// Q, K and V side by side, then O, of the attention at `name`.
    fn self_attention(&mut self, name: &str) -> Result<(Matrix, Matrix)> {
        let c = self.config;
        let (d, hk, hv, bias) = (
            c.d_model,
            c.n_heads * c.d_k,
            c.n_heads * c.d_v,
            c.attention_bias,
        );
        let qkv = self.linear(
            &[
                &format!("{name}.q"),
                &format!("{name}.k"),
                &format!("{name}.v"),
            ],
            d,
            &[hk, hk, hv],
            bias,
        )?;
        let o = self.linear(&[&format!("{name}.o")], hv, &[d], bias)?;
        Ok((qkv, o))
    }

    fn feed_forward(&mut self, name: &str) -> Result<(Matrix, Matrix)> {
        let (d, d_ff) = (self.config.d_model, self.config.d_ff);
        Ok((
            self.linear(&[&format!("{name}.fc1")], d, &[d_ff], true)?,
            self.linear(&[&format!("{name}.fc2")], d_ff, &[d], true)?,
        ))
    }

    fn table(&mut self, name: &str, rows: usize) -> Result<Table> {
        let (q, scales) = self.file.int8(name, rows, self.config.d_model)?;
        Ok(Table::Int8 {
            rows: q.to_vec(),
            scales,
        })
    }
}

impl HostModel {
    /// The host decoder of an int8 bundle's weights, read in int8 (products in int8, as
    /// [`HostModel::quantize`] leaves a model): the same integers and scales, so the same
    /// outputs as loading the bundle into burn and quantizing, without ever holding the
    /// f32 model. `None` when the file is not an int8 bundle (a tensor an int8 bundle
    /// quantizes is stored otherwise); errors name the tensor, as
    /// [`crate::bundle::load_weights`]'s do.
    pub fn from_int8(config: &ModelConfig, file: &SafeTensors) -> Result<Option<HostModel>> {
        config.validate()?;
        let file = StoredTensors::new(file);
        let mut linears = vec!["embedding.weight".to_string()];
        if !config.share_embeddings {
            linears.extend(["src_embedding.weight".into(), "output.weight".into()]);
        }
        for (stack, depth) in [
            ("encoder", config.encoder_depth()),
            ("decoder", config.decoder_depth()),
        ] {
            for i in 0..depth {
                linears.extend(
                    ["self_attn.q", "self_attn.k", "ffn.fc1"]
                        .map(|l| format!("{stack}.layers.{i}.{l}.weight")),
                );
            }
        }
        // Spot checks decide; a mixed file fails below with the tensor's name.
        if linears
            .iter()
            .any(|name| file.dtype(name) != Some(Dtype::I8))
        {
            return Ok(None);
        }
        let (vocab, d) = (config.vocab_size, config.d_model);
        let mut r = Reader { file, config };
        let embedding_rows = r.file.int8("embedding.weight", vocab, d)?;
        let (embedding, src_embedding, output) = if config.share_embeddings {
            // The tied projection's columns are the embedding's rows (§3.4).
            let (q, scales) = embedding_rows;
            let output = Int8Matrix::from_rows(d, vocab, q, scales, None);
            (Table::Output, None, Projection::from_int8(output))
        } else {
            let (q, scales) = embedding_rows;
            let embedding = Table::Int8 {
                rows: q.to_vec(),
                scales,
            };
            let src = r.table("src_embedding.weight", vocab)?;
            let (q, scales) = r.file.int8("output.weight", vocab, d)?;
            let output = Int8Matrix::from_rows(d, vocab, q, scales, None);
            (embedding, Some(src), Projection::from_int8(output))
        };
        let (src_positions, tgt_positions) = match config.positional {
            Positional::Learned => (
                Some(r.floats("src_positions.weight", &[config.max_len, d])?),
                Some(r.floats("tgt_positions.weight", &[config.max_len, d])?),
            ),
            Positional::Sinusoid => (None, None),
        };
        let encoder = (0..config.n_layers)
            .map(|i| {
                let at = |part: &str| format!("encoder.layers.{i}.{part}");
                let (qkv, o) = r.self_attention(&at("self_attn"))?;
                let attn_norm = r.norm(&at("self_attn_norm"))?;
                let (fc1, fc2) = r.feed_forward(&at("ffn"))?;
                Ok(EncoderLayer {
                    qkv,
                    o,
                    attn_norm,
                    fc1,
                    fc2,
                    ffn_norm: r.norm(&at("ffn_norm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let decoder = (0..config.decoder_depth())
            .map(|i| {
                let at = |part: &str| format!("decoder.layers.{i}.{part}");
                let c = r.config;
                let (hk, hv, bias) = (c.n_heads * c.d_k, c.n_heads * c.d_v, c.attention_bias);
                let (qkv, o) = r.self_attention(&at("self_attn"))?;
                let self_norm = r.norm(&at("self_attn_norm"))?;
                let cross_q = r.linear(&[&at("cross_attn.q")], d, &[hk], bias)?;
                let cross_kv = r.linear(
                    &[&at("cross_attn.k"), &at("cross_attn.v")],
                    d,
                    &[hk, hv],
                    bias,
                )?;
                let cross_o = r.linear(&[&at("cross_attn.o")], hv, &[d], bias)?;
                let cross_norm = r.norm(&at("cross_attn_norm"))?;
                let (fc1, fc2) = r.feed_forward(&at("ffn"))?;
                Ok(DecoderLayer {
                    qkv,
                    o,
                    self_norm,
                    cross_q,
                    cross_kv,
                    cross_o,
                    cross_norm,
                    fc1,
                    fc2,
                    ffn_norm: r.norm(&at("ffn_norm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output_bias = config
            .output_bias
            .then(|| r.floats("output_bias", &[vocab]))
            .transpose()?;
        r.file.unexpected()?;
        let sinusoid = match config.positional {
            Positional::Sinusoid => sinusoid_table(0, SINUSOID_ROWS, d),
            Positional::Learned => Vec::new(),
        };
        Ok(Some(HostModel {
            config: config.clone(),
            embedding,
            src_embedding,
            output,
            output_bias,
            src_positions,
            tgt_positions,
            sinusoid,
            encoder,
            decoder,
        }))
    }
}
