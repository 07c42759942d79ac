//! Decoding on the CPU without a tensor framework in the loop (§6.1 inference).
//!
//! burn runs a decoder step as some eighty tensor operations, each allocating its output
//! and dispatching a kernel; for the demo's small models that per-operation cost, not the
//! arithmetic, was most of a step. Here the trained weights are copied once into plain
//! `f32` arrays and the encoder and the cached decoder step are written over them:
//! Q/K/V projected by one fused product, the key/value cache preallocated and written in
//! place, encoder–decoder keys and values computed once per source and shared by its beams
//! (never copied on re-ranking), sources kept unpadded, and the output's log-softmax done
//! in one pass per row. The arithmetic is the model's, term for term: the decoding
//! tests run both paths and get the same outputs.
//!
//! Used for models on burn's CPU backend (native and wasm); other backends decode through
//! [`crate::model::Transformer`] on their device.

pub mod int8;
pub mod isa;
pub mod matrix;
pub mod rows;
mod state;
mod stored;

pub use state::HostState;

use burn::module::Param;
use burn::nn::{Embedding, LayerNorm, Linear};
use burn::prelude::*;

use crate::attention::MultiHeadAttention;
use crate::config::{Activation, ModelConfig, Positional};
use crate::embedding::sinusoid_table;
use crate::error::{Error, Result};
use crate::model::Transformer;
use matrix::{Matrix, Projection};

/// LayerNorm's gain and bias.
#[derive(Clone, Debug)]
pub struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// Encoder layer (§3.1): self-attention with Q, K and V as one product, then the FFN.
#[derive(Clone, Debug)]
pub struct EncoderLayer {
    /// `[d_model, h·d_k + h·d_k + h·d_v]`: Q, K and V side by side.
    pub qkv: Matrix,
    pub o: Matrix,
    pub attn_norm: Norm,
    pub fc1: Matrix,
    pub fc2: Matrix,
    pub ffn_norm: Norm,
}

/// Decoder layer (§3.1): masked self-attention (fused Q/K/V), encoder–decoder attention
/// (queries per step; keys and values fused, computed once per source), FFN.
#[derive(Clone, Debug)]
pub struct DecoderLayer {
    /// `[d_model, h·d_k + h·d_k + h·d_v]`: Q, K and V side by side.
    pub qkv: Matrix,
    pub o: Matrix,
    pub self_norm: Norm,
    pub cross_q: Matrix,
    /// `[d_model, h·d_k + h·d_v]`: K and V side by side.
    pub cross_kv: Matrix,
    pub cross_o: Matrix,
    pub cross_norm: Norm,
    pub fc1: Matrix,
    pub fc2: Matrix,
    pub ffn_norm: Norm,
}

/// An embedding table `[vocab, d_model]` (§3.4).
#[derive(Clone, Debug)]
enum Table {
    F32(Vec<f32>),
    /// int8 rows and their scales, as an int8 bundle stores them (rows widened on lookup).
    Int8 {
        rows: Vec<i8>,
        scales: Vec<f32>,
    },
    /// The rows of the output projection, held in int8 only: the tied table (§3.4) is
    /// stored once.
    Output,
}

/// How an embedding table is stored ([`HostModel::table_forms`]).
#[derive(Clone, Copy, Debug)]
pub enum TableForm<'a> {
    F32(&'a [f32]),
    /// int8 rows `[vocab, d_model]` and one scale per row.
    Int8 {
        rows: &'a [i8],
        scales: &'a [f32],
    },
    /// The rows of the output projection's int8 form (the tied table, stored once).
    Output,
}

/// A trained Transformer's weights in host memory, ready to decode on the CPU.
#[derive(Clone, Debug)]
pub struct HostModel {
    config: ModelConfig,
    /// Target (shared) embedding `[vocab, d_model]`.
    embedding: Table,
    src_embedding: Option<Table>,
    /// Pre-softmax projection `[d_model, vocab]`: the untied one, or a transposed copy of
    /// the shared embedding (§3.4).
    output: Projection,
    /// Added to the logits (`output_bias` models).
    output_bias: Option<Vec<f32>>,
    src_positions: Option<Vec<f32>>,
    tgt_positions: Option<Vec<f32>>,
    /// Sinusoid rows for the first positions (§3.5); later ones are computed when needed.
    sinusoid: Vec<f32>,
    encoder: Vec<EncoderLayer>,
    decoder: Vec<DecoderLayer>,
}

fn values<const D: usize>(param: &Param<Tensor<D>>) -> Result<Vec<f32>> {
    param
        .val()
        .into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| Error::Device(format!("{e:?}")))
}

fn matrix(linear: &Linear) -> Result<Matrix> {
    let [rows, cols] = linear.weight.val().dims();
    Ok(Matrix::new(
        rows,
        cols,
        values(&linear.weight)?,
        linear.bias.as_ref().map(values).transpose()?,
    ))
}

/// Side-by-side columns of matrices with the same rows: `[rows, Σ cols]`.
fn concat(parts: &[&Linear]) -> Result<Matrix> {
    let parts: Vec<Matrix> = parts.iter().map(|l| matrix(l)).collect::<Result<_>>()?;
    let rows = parts[0].rows;
    let cols = parts.iter().map(|m| m.cols).sum();
    let mut data = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for m in &parts {
            data.extend_from_slice(&m.data[r * m.cols..(r + 1) * m.cols]);
        }
    }
    let bias = if parts.iter().all(|m| m.bias.is_some()) {
        Some(parts.iter().flat_map(|m| m.bias.clone().unwrap()).collect())
    } else {
        None
    };
    Ok(Matrix::new(rows, cols, data, bias))
}

fn norm(layer_norm: &LayerNorm) -> Result<Norm> {
    let gamma = values(&layer_norm.gamma)?;
    let beta = match &layer_norm.beta {
        Some(beta) => values(beta)?,
        None => vec![0.0; gamma.len()],
    };
    Ok(Norm { gamma, beta })
}

fn table(embedding: &Embedding) -> Result<Vec<f32>> {
    values(&embedding.weight)
}

fn self_attention(attn: &MultiHeadAttention) -> Result<(Matrix, Matrix)> {
    Ok((concat(&[&attn.q, &attn.k, &attn.v])?, matrix(&attn.o)?))
}

/// Rows of the sinusoid table kept ready: longer outputs are rare and computed per step.
const SINUSOID_ROWS: usize = 1024;

impl HostModel {
    /// Copies a model's weights to host memory (on the CPU backend this is a copy of
    /// memory it already holds).
    pub fn new(model: &Transformer) -> Result<Self> {
        let config = model.config().clone();
        let encoder = model
            .encoder
            .layers
            .iter()
            .map(|l| {
                let (qkv, o) = self_attention(&l.self_attn)?;
                Ok(EncoderLayer {
                    qkv,
                    o,
                    attn_norm: norm(&l.self_attn_norm)?,
                    fc1: matrix(&l.ffn.fc1)?,
                    fc2: matrix(&l.ffn.fc2)?,
                    ffn_norm: norm(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?;
        let decoder = model
            .decoder
            .layers
            .iter()
            .map(|l| {
                let (qkv, o) = self_attention(&l.self_attn)?;
                Ok(DecoderLayer {
                    qkv,
                    o,
                    self_norm: norm(&l.self_attn_norm)?,
                    cross_q: matrix(&l.cross_attn.q)?,
                    cross_kv: concat(&[&l.cross_attn.k, &l.cross_attn.v])?,
                    cross_o: matrix(&l.cross_attn.o)?,
                    cross_norm: norm(&l.cross_attn_norm)?,
                    fc1: matrix(&l.ffn.fc1)?,
                    fc2: matrix(&l.ffn.fc2)?,
                    ffn_norm: norm(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?;
        let sinusoid = match config.positional {
            Positional::Sinusoid => sinusoid_table(0, SINUSOID_ROWS, config.d_model),
            Positional::Learned => Vec::new(),
        };
        let embedding = table(&model.embedding)?;
        let output = match &model.output {
            Some(output) => {
                // Linear weights are `[d_model, vocab]`: transposed to the table layout.
                let m = matrix(output)?;
                Projection::from_table(
                    matrix::transpose(&m.data, m.rows, m.cols),
                    config.vocab_size,
                )
            }
            None => Projection::from_table(embedding.clone(), config.vocab_size),
        };
        Ok(HostModel {
            embedding: Table::F32(embedding),
            src_embedding: model
                .src_embedding
                .as_ref()
                .map(|e| table(e).map(Table::F32))
                .transpose()?,
            output,
            output_bias: model.output_bias.as_ref().map(values).transpose()?,
            src_positions: model.src_positions.as_ref().map(table).transpose()?,
            tgt_positions: model.tgt_positions.as_ref().map(table).transpose()?,
            sinusoid,
            encoder,
            decoder,
            config,
        })
    }

    /// Switches the products to int8 (weights per output column, activations per row on
    /// the fly; [`int8`]): every projection of the encoder and decoder and the output
    /// projection. Embedding lookups, attention over the caches, LayerNorm and softmax stay
    /// f32. Weights read from an int8 bundle are `q·s` exactly, so quantizing them again
    /// gives back the stored integers.
    pub fn quantize(&mut self) {
        self.layer_matrices().for_each(Matrix::quantize);
        self.output.quantize();
    }

    /// Back to f32 products over the same weights (for an int8 bundle: `q·scale`, exactly
    /// what a GPU or burn decodes with). A model read in int8 only ([`HostModel::from_int8`])
    /// keeps its int8 arrays and multiplies them in f32 ([`int8::Int8Matrix::apply_widened`]);
    /// its tables are widened row by row on lookup, as before: no f32 copy of any weight.
    pub fn dequantize(&mut self) {
        self.layer_matrices().for_each(Matrix::dequantize);
        self.output.dequantize();
    }

    /// Every f32 array held (widened from the int8 forms where need be), with f32 products.
    pub fn materialize(&mut self) {
        self.layer_matrices().for_each(Matrix::materialize);
        self.output.materialize();
        let d = self.config.d_model;
        for table in std::iter::once(&mut self.embedding).chain(self.src_embedding.as_mut()) {
            match table {
                Table::F32(_) => {}
                Table::Int8 { rows, scales } => {
                    let values = rows
                        .chunks_exact(d.max(1))
                        .zip(scales.iter())
                        .flat_map(|(row, &s)| row.iter().map(move |&q| q as f32 * s))
                        .collect();
                    *table = Table::F32(values);
                }
                Table::Output => *table = Table::F32(self.output.table().to_vec()),
            }
        }
    }

    /// The embedding tables' stored forms (source, target), for a GPU decoder to upload
    /// from without widening: f32 values, int8 rows with their scales, or the rows of the
    /// output projection's int8 form ([`HostModel::output_int8`]).
    pub fn table_forms(&self) -> (TableForm<'_>, TableForm<'_>) {
        fn form(t: &Table) -> TableForm<'_> {
            match t {
                Table::F32(values) => TableForm::F32(values),
                Table::Int8 { rows, scales } => TableForm::Int8 { rows, scales },
                Table::Output => TableForm::Output,
            }
        }
        let target = form(&self.embedding);
        (self.src_embedding.as_ref().map_or(target, form), target)
    }

    /// The output projection's int8 form `[d_model, vocab]` (per vocabulary row), if it has
    /// one.
    pub fn output_int8(&self) -> Option<&int8::Int8Matrix> {
        self.output.int8()
    }

    /// Whether every f32 array is held (not so for a model read in int8 only, whose
    /// [`HostModel::embeddings`], [`HostModel::output_table`] and matrices' `data` are
    /// then empty).
    pub fn has_f32(&self) -> bool {
        let f32_table = |t: &Table| matches!(t, Table::F32(_));
        f32_table(&self.embedding)
            && self.src_embedding.as_ref().is_none_or(f32_table)
            && !self.output.table().is_empty()
            && self
                .encoder
                .iter()
                .flat_map(|l| [&l.qkv, &l.o, &l.fc1, &l.fc2])
                .chain(self.decoder.iter().flat_map(|l| {
                    [
                        &l.qkv,
                        &l.o,
                        &l.cross_q,
                        &l.cross_kv,
                        &l.cross_o,
                        &l.fc1,
                        &l.fc2,
                    ]
                }))
                .all(Matrix::has_f32)
    }

    /// This model with every f32 array (what a GPU decoder uploads): itself, or a widened
    /// copy (f32 products) of a model read in int8 only.
    pub fn expanded(&self) -> std::borrow::Cow<'_, HostModel> {
        if self.has_f32() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut model = self.clone();
        model.materialize();
        std::borrow::Cow::Owned(model)
    }

    /// Whether the products run in int8 ([`HostModel::quantize`]).
    pub fn is_int8(&self) -> bool {
        self.output.is_int8()
    }

    /// Every projection matrix of the encoder and decoder layers.
    fn layer_matrices(&mut self) -> impl Iterator<Item = &mut Matrix> {
        let encoder = self
            .encoder
            .iter_mut()
            .flat_map(|l| [&mut l.qkv, &mut l.o, &mut l.fc1, &mut l.fc2]);
        let decoder = self.decoder.iter_mut().flat_map(|l| {
            [
                &mut l.qkv,
                &mut l.o,
                &mut l.cross_q,
                &mut l.cross_kv,
                &mut l.cross_o,
                &mut l.fc1,
                &mut l.fc2,
            ]
        });
        encoder.chain(decoder)
    }

    /// The hyper-parameters of the model.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The encoder's layers (read by decoders that keep the weights elsewhere, e.g. on a GPU).
    pub fn encoder_layers(&self) -> &[EncoderLayer] {
        &self.encoder
    }

    /// The decoder's layers.
    pub fn decoder_layers(&self) -> &[DecoderLayer] {
        &self.decoder
    }

    /// The source and target embedding tables `[vocab, d_model]` (the same table when
    /// shared, §3.4); empty for a model read in int8 only ([`HostModel::expanded`]).
    pub fn embeddings(&self) -> (&[f32], &[f32]) {
        fn f32_table(t: &Table) -> &[f32] {
            match t {
                Table::F32(values) => values,
                Table::Int8 { .. } | Table::Output => &[],
            }
        }
        let target = f32_table(&self.embedding);
        (
            self.src_embedding.as_ref().map_or(target, f32_table),
            target,
        )
    }

    /// The pre-softmax projection as a table `[vocab, d_model]`: logits are its rows' dot
    /// products with the decoder state.
    pub fn output_table(&self) -> &[f32] {
        self.output.table()
    }

    /// Source and target positions `[rows, d_model]` for positions `0..rows` (§3.5): the
    /// learned tables, or the sinusoids of the first `rows` positions.
    pub fn position_tables(&self, rows: usize) -> (Vec<f32>, Vec<f32>) {
        let d = self.config.d_model;
        let table = |learned: &Option<Vec<f32>>| match learned {
            Some(t) => t[..rows.min(t.len() / d) * d].to_vec(),
            None if rows <= SINUSOID_ROWS => self.sinusoid[..rows * d].to_vec(),
            None => sinusoid_table(0, rows, d),
        };
        (table(&self.src_positions), table(&self.tgt_positions))
    }

    /// Token embeddings × √d_model plus positions `start..` (§3.4, §3.5), appended to `out`.
    fn embed(
        &self,
        table: &Table,
        learned: Option<&[f32]>,
        tokens: &[u32],
        start: usize,
        out: &mut Vec<f32>,
    ) {
        let d = self.config.d_model;
        let scale = (d as f64).sqrt() as f32;
        let mut computed: Vec<f32>;
        let mut widened: Vec<f32> = Vec::new();
        for (i, &token) in tokens.iter().enumerate() {
            let pos = start + i;
            let position: &[f32] = match learned {
                Some(rows) => &rows[pos * d..(pos + 1) * d],
                None if pos < SINUSOID_ROWS => &self.sinusoid[pos * d..(pos + 1) * d],
                None => {
                    computed = sinusoid_table(pos, 1, d);
                    &computed
                }
            };
            let token = token as usize;
            let row: &[f32] = match table {
                Table::F32(values) => &values[token * d..(token + 1) * d],
                Table::Int8 { rows, scales } => {
                    widened.clear();
                    let s = scales[token];
                    widened.extend(
                        rows[token * d..(token + 1) * d]
                            .iter()
                            .map(|&q| q as f32 * s),
                    );
                    &widened
                }
                Table::Output => {
                    widened.resize(d, 0.0);
                    self.output.row(token, &mut widened);
                    &widened
                }
            };
            out.extend(row.iter().zip(position).map(|(e, p)| e * scale + p));
        }
    }

    /// Pre-softmax logits `[rows, vocab]` of decoder states `[rows, d_model]` (§3.4), plus
    /// the output bias of models that have one.
    fn project(&self, x: &[f32], rows: usize, out: &mut Vec<f32>) {
        self.output.apply(x, rows, out);
        if let Some(bias) = &self.output_bias {
            for row in out.chunks_exact_mut(bias.len()) {
                for (v, b) in row.iter_mut().zip(bias) {
                    *v += b;
                }
            }
        }
    }

    /// The output bias `[vocab]` of models that have one.
    pub fn output_bias(&self) -> Option<&[f32]> {
        self.output_bias.as_deref()
    }
}

/// Multi-head attention (§3.2.2) of one query over `n` keys and values.
///
/// `q` holds the query's heads side by side (`h·d_k`); position j's keys and values start
/// at `at(j)` in `cache`: key j of head i is `cache[at(j) + i·d_k..][..d_k]`, its value
/// `cache[at(j) + values + i·d_v..][..d_v]`. Writes the heads' contexts side by side into
/// `out` (`h·d_v`); `scores` is scratch.
///
/// On x86-64 CPUs with AVX2 the same code runs compiled for AVX2 (as
/// [`rows::log_softmax_shift`] does): the same bits, twice the lanes.
#[allow(clippy::too_many_arguments)]
fn attend(
    q: &[f32],
    cache: &[f32],
    values: usize,
    at: impl Fn(usize) -> usize,
    n: usize,
    config: &ModelConfig,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa::avx2() {
        // SAFETY: the CPU has AVX2 (just checked).
        return unsafe { attend_avx2(q, cache, values, at, n, config, scores, out) };
    }
    attend_lanes(q, cache, values, at, n, config, scores, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
fn attend_avx2(
    q: &[f32],
    cache: &[f32],
    values: usize,
    at: impl Fn(usize) -> usize,
    n: usize,
    config: &ModelConfig,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    attend_lanes(q, cache, values, at, n, config, scores, out)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_lanes(
    q: &[f32],
    cache: &[f32],
    values: usize,
    at: impl Fn(usize) -> usize,
    n: usize,
    config: &ModelConfig,
    scores: &mut Vec<f32>,
    out: &mut [f32],
) {
    let (h, d_k, d_v) = (config.n_heads, config.d_k, config.d_v);
    let scale = (d_k as f64).sqrt() as f32;
    out.fill(0.0);
    for head in 0..h {
        let q = &q[head * d_k..(head + 1) * d_k];
        scores.clear();
        scores.extend((0..n).map(|j| rows::dot(q, &cache[at(j) + head * d_k..][..d_k]) / scale));
        rows::softmax(scores);
        let context = &mut out[head * d_v..(head + 1) * d_v];
        for (j, &w) in scores.iter().enumerate() {
            rows::axpy(context, w, &cache[at(j) + values + head * d_v..][..d_v]);
        }
    }
}

/// x ← x + y, then LayerNorm (the residual connection of §3.1, post-norm).
fn add_norm(x: &mut [f32], y: &[f32], norm: &Norm) {
    for (x, y) in x.iter_mut().zip(y) {
        *x += y;
    }
    rows::layer_norm(x, &norm.gamma, &norm.beta);
}

/// FFN(x) = max(0, xW₁ + b₁)W₂ + b₂ (§3.3), or swish in place of max(0, ·) for models
/// that use it, over `rows` rows, into `out`.
fn feed_forward(
    x: &[f32],
    rows: usize,
    layer: (&Matrix, &Matrix, Activation),
    hidden: &mut Vec<f32>,
    out: &mut Vec<f32>,
) {
    let (fc1, fc2, activation) = layer;
    fc1.apply(x, rows, hidden);
    match activation {
        Activation::Relu => {
            for v in hidden.iter_mut() {
                *v = rows::larger(*v, 0.0);
            }
        }
        Activation::Swish => rows::swish(hidden),
    }
    fc2.apply(hidden, rows, out);
}
