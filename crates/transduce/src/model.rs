//! The encoder–decoder Transformer (§3): embeddings, stacks, output projection, and the
//! three ways to run it — training (full teacher-forced pass), encoding once, and cached
//! decoder steps.

use burn::module::{ModuleMapper, Param, ParamId};
use burn::nn::{Embedding, EmbeddingConfig, Initializer, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::module::{embedding, linear};

use crate::attention::KvCache;
use crate::config::{ModelConfig, Positional};
use crate::dropout::Dropout;
use crate::embedding::sinusoid;
use crate::error::{Error, Result};
use crate::layers::{DecoderLayer, EncoderLayer};
use crate::positionwise::positionwise;
use crate::precision::{Precision, apply_linear};
use crate::tokenizer::PAD;

/// The encoder stack.
#[derive(Module, Debug)]
pub struct Encoder {
    pub layers: Vec<EncoderLayer>,
}

/// The decoder stack.
#[derive(Module, Debug)]
pub struct Decoder {
    pub layers: Vec<DecoderLayer>,
}

/// The Transformer of "Attention Is All You Need".
#[derive(Module, Debug)]
pub struct Transformer {
    /// Shared embedding (§3.4) — or the target embedding when `share_embeddings` is off.
    pub embedding: Embedding,
    /// Source embedding when untied.
    pub src_embedding: Option<Embedding>,
    /// Pre-softmax projection when untied; otherwise the embedding matrix is reused.
    pub output: Option<Linear>,
    /// Learned positions (Table 3 row E), one table per stack.
    pub src_positions: Option<Embedding>,
    pub tgt_positions: Option<Embedding>,
    pub encoder: Encoder,
    pub decoder: Decoder,
    /// Added to the output logits (`output_bias` models: Marian's `final_logits_bias`).
    /// Last in the module so the other parameters keep their ids ([`NumberParams`]).
    pub output_bias: Option<Param<Tensor<1>>>,
    dropout: Dropout,
    #[module(skip)]
    config: ModelConfig,
    /// The type activations are computed in ([`crate::precision`]); f32 unless the trainer
    /// asks for half precision.
    #[module(skip)]
    precision: Precision,
    /// Whether the fused kernels may run (the norms, the attention, the loss; see
    /// [`crate::ops::fused`]): on unless the trainer turns them off to compare
    /// (`--no-fused-layers`). Carried by the model, not the process, so that every call
    /// that chooses is handed it.
    #[module(skip)]
    fused: bool,
}

/// The encoder's output for a batch, with its padding mask.
#[derive(Clone, Debug)]
pub struct Memory {
    /// `[b, s, d_model]`
    pub states: Tensor<3>,
    /// True at source padding, `[b, 1, 1, s]`.
    pub blocked: Tensor<4, Bool>,
}

impl Memory {
    /// Keeps (or repeats) batch rows.
    pub fn select(&self, rows: Tensor<1, Int>) -> Memory {
        Memory {
            states: self.states.clone().select(0, rows.clone()),
            blocked: self.blocked.clone().select(0, rows),
        }
    }
}

/// Per-layer caches of an incremental decode (§6.1 decoding, one token per step).
#[derive(Clone, Debug)]
pub struct DecoderState {
    /// Self-attention keys/values of positions decoded so far, per layer.
    pub self_kv: Vec<Option<KvCache>>,
    /// Encoder–decoder keys/values, computed once, per layer.
    pub cross_kv: Vec<KvCache>,
    /// Source padding, `[b, 1, 1, s]`.
    pub blocked: Tensor<4, Bool>,
    /// Encoder states `[b, s, d_model]`, kept for word focus only.
    pub memory: Option<Tensor<3>>,
    /// Number of target positions already fed.
    pub position: usize,
}

impl DecoderState {
    /// Reorders batch rows of every cache (beam search re-ranking, finished sentences).
    pub fn select(&self, rows: Tensor<1, Int>) -> DecoderState {
        DecoderState {
            self_kv: self
                .self_kv
                .iter()
                .map(|kv| kv.as_ref().map(|kv| kv.select(rows.clone())))
                .collect(),
            cross_kv: self
                .cross_kv
                .iter()
                .map(|kv| kv.select(rows.clone()))
                .collect(),
            blocked: self.blocked.clone().select(0, rows.clone()),
            memory: self.memory.as_ref().map(|m| m.clone().select(0, rows)),
            position: self.position,
        }
    }

    /// Rows in the batch.
    pub fn batch_size(&self) -> usize {
        self.blocked.dims()[0]
    }
}

/// Attention weights of a teacher-forced pass, every layer and head (Figures 3–5).
pub struct AttentionMaps {
    /// Per encoder layer, `[b, h, s, s]`.
    pub encoder_self: Vec<Tensor<4>>,
    /// Per decoder layer, `[b, h, t, t]`.
    pub decoder_self: Vec<Tensor<4>>,
    /// Per decoder layer, `[b, h, t, s]`.
    pub cross: Vec<Tensor<4>>,
}

fn embedding_table(rows: usize, d_model: usize, device: &Device) -> Embedding {
    // N(0, d_model^-0.5): after the √d_model scale of §3.4 the inputs have unit variance.
    EmbeddingConfig::new(rows, d_model)
        .with_initializer(Initializer::Normal {
            mean: 0.0,
            std: (d_model as f64).powf(-0.5),
        })
        .init(device)
}

/// Gives parameters ids by their place in the module tree, so that optimizer state saved
/// in a checkpoint finds its parameters again in a model rebuilt from the same config.
/// Visiting in order also initializes the (lazy) parameters in a fixed order, so a seeded
/// device always yields the same weights.
struct NumberParams {
    next: u64,
    /// Draw the initial values now (else they stay lazy).
    draw: bool,
}

impl ModuleMapper for NumberParams {
    fn map_float<const D: usize>(&mut self, mut param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        self.next += 1;
        if !self.draw {
            param.id = ParamId::from(self.next);
            return param;
        }
        let (_, value, mapper) = param.consume();
        Param::from_mapped_value(ParamId::from(self.next), value, mapper)
    }
}

/// Token ids `[b, t]` as an int tensor.
pub fn token_tensor(rows: &[Vec<u32>], device: &Device) -> Result<Tensor<2, Int>> {
    let t = rows.iter().map(Vec::len).max().unwrap_or(0);
    if rows.is_empty() || t == 0 {
        return Err(Error::Input("empty batch".into()));
    }
    let mut data = Vec::with_capacity(rows.len() * t);
    for row in rows {
        data.extend(row.iter().map(|&id| id as i32));
        data.extend(std::iter::repeat_n(PAD as i32, t - row.len()));
    }
    Ok(Tensor::from_data(
        TensorData::new(data, [rows.len(), t]),
        device,
    ))
}

impl Transformer {
    /// The model's modules, parameters lazy and not yet numbered.
    fn unnumbered(config: &ModelConfig, device: &Device) -> Result<Self> {
        config.validate()?;
        let d = config.d_model;
        let untied = !config.share_embeddings;
        let learned = config.positional == Positional::Learned;
        let model = Transformer {
            embedding: embedding_table(config.vocab_size, d, device),
            src_embedding: untied.then(|| embedding_table(config.vocab_size, d, device)),
            output: untied.then(|| {
                LinearConfig::new(d, config.vocab_size)
                    .with_bias(false)
                    .with_initializer(Initializer::XavierUniform { gain: 1.0 })
                    .init(device)
            }),
            src_positions: learned.then(|| embedding_table(config.max_len, d, device)),
            tgt_positions: learned.then(|| embedding_table(config.max_len, d, device)),
            encoder: Encoder {
                layers: (0..config.n_layers)
                    .map(|_| EncoderLayer::new(config, device))
                    .collect(),
            },
            decoder: Decoder {
                layers: (0..config.decoder_depth())
                    .map(|_| DecoderLayer::new(config, device))
                    .collect(),
            },
            output_bias: config
                .output_bias
                .then(|| Initializer::Zeros.init([config.vocab_size], device)),
            dropout: Dropout::new(config.dropout),
            config: config.clone(),
            precision: Precision::F32,
            fused: true,
        };
        Ok(model)
    }

    /// A model for `config` with initial weights drawn (deterministically on a seeded
    /// device: see [`NumberParams`]).
    pub fn new(config: &ModelConfig, device: &Device) -> Result<Self> {
        Ok(Self::unnumbered(config, device)?.map(&mut NumberParams {
            next: 0,
            draw: true,
        }))
    }

    /// A model for `config` whose weights are about to be loaded: the same parameter ids
    /// as [`Transformer::new`], but no initial values drawn (they would be replaced).
    pub fn to_load(config: &ModelConfig, device: &Device) -> Result<Self> {
        Ok(Self::unnumbered(config, device)?.map(&mut NumberParams {
            next: 0,
            draw: false,
        }))
    }

    /// The hyper-parameters this model was built with.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The same model computing its activations in `precision` (the parameters stay as
    /// they are: see [`crate::precision`]).
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The precision of the activations.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The same model with the fused kernels allowed (the default) or not: without them the
    /// norms, the attention and the loss run as burn's primitives (the same values to
    /// rounding), to measure what the kernels give or rule them out.
    pub fn with_fused(mut self, fused: bool) -> Self {
        self.fused = fused;
        self
    }

    /// Whether the fused kernels may run ([`Transformer::with_fused`]); the loss
    /// ([`crate::train::loss::label_smoothed`]) is handed it by the caller.
    pub fn fused(&self) -> bool {
        self.fused
    }

    /// The device holding the weights.
    pub fn device(&self) -> Device {
        self.embedding.weight.val().device()
    }

    /// Fails when a sequence is longer than the model can place (learned positions).
    pub fn check_length(&self, len: usize) -> Result<()> {
        self.config.check_length(len)
    }

    /// Embedding × √d_model + positional encoding (§3.4, §3.5), before dropout.
    fn embed(
        &self,
        tokens: Tensor<2, Int>,
        table: &Embedding,
        positions: Option<&Embedding>,
        start: usize,
    ) -> Tensor<3> {
        let [b, t] = tokens.dims();
        let d = self.config.d_model;
        let device = tokens.device();
        let x = embedding(table.weight.val(), tokens)
            .cast(self.precision.dtype())
            .mul_scalar((d as f64).sqrt());
        let pos = match positions {
            Some(learned) => {
                let ids = Tensor::<1, Int>::arange(start as i64..(start + t) as i64, &device)
                    .reshape([1, t]);
                embedding(learned.weight.val(), ids)
            }
            // The full pass's table is kept on the device; a cached decoder step's is made.
            None if start == 0 => crate::constants::sinusoid(t, d, &device),
            None => sinusoid(start, t, d, &device),
        };
        let pos = pos.cast(x.dtype());
        x + pos.expand([b, t, d])
    }

    /// Decoder inputs: embedded target tokens plus, for word-focus models, the encoder
    /// state each position is aligned to; then dropout (§5.4).
    ///
    /// `focus` `[b, t]` holds source positions; a position outside `0..s` (the source's
    /// padded length) adds nothing: the slots are all filled. Selecting by a one-hot
    /// product rather than a gather keeps it one matmul on every backend.
    fn decoder_input(
        &self,
        tokens: Tensor<2, Int>,
        start: usize,
        memory: Option<&Tensor<3>>,
        focus: Option<Tensor<2, Int>>,
    ) -> Tensor<3> {
        let y = self.embed(tokens, &self.embedding, self.tgt_positions.as_ref(), start);
        let y = match (memory, focus) {
            (Some(states), Some(focus)) if self.config.word_focus => {
                let [b, t] = focus.dims();
                let s = states.dims()[1];
                let columns = Tensor::<1, Int>::arange(0..s as i64, &focus.device())
                    .reshape([1, 1, s])
                    .expand([b, t, s]);
                let one_hot = focus.unsqueeze_dim::<3>(2).expand([b, t, s]).equal(columns);
                y + one_hot.float().cast(states.dtype()).matmul(states.clone())
            }
            _ => y,
        };
        self.dropout.forward(y)
    }

    /// Runs the encoder once over source ids `[b, s]` (PAD-padded).
    pub fn encode(&self, src: Tensor<2, Int>) -> Memory {
        self.encode_inner(src, false).0
    }

    fn encode_inner(&self, src: Tensor<2, Int>, need_weights: bool) -> (Memory, Vec<Tensor<4>>) {
        let [b, s] = src.dims();
        let blocked = src.clone().equal_elem(PAD as i64).reshape([b, 1, 1, s]);
        let table = self.src_embedding.as_ref().unwrap_or(&self.embedding);
        let x = self.embed(src, table, self.src_positions.as_ref(), 0);
        let mut x = self.dropout.forward(x);
        let mut weights = Vec::new();
        for layer in &self.encoder.layers {
            let (y, w) = layer.forward(x, &blocked, need_weights, self.fused);
            x = y;
            weights.extend(w);
        }
        (Memory { states: x, blocked }, weights)
    }

    /// Pre-softmax logits from decoder states: h · Eᵀ with the shared matrix (§3.4), plus
    /// the output bias of models that have one.
    pub fn project(&self, h: Tensor<3>) -> Tensor<3> {
        positionwise(h, |h| {
            let dtype = h.dtype();
            let logits = match &self.output {
                Some(output) => apply_linear(output, h),
                None => linear(h, self.embedding.weight.val().transpose().cast(dtype), None),
            };
            match &self.output_bias {
                Some(bias) => logits + bias.val().cast(dtype).unsqueeze_dim(0),
                None => logits,
            }
        })
    }

    /// Teacher-forced decoder pass over target inputs `[b, t]` (BOS + shifted target);
    /// returns logits `[b, t, vocab]`.
    pub fn decode(&self, memory: &Memory, tgt_in: Tensor<2, Int>) -> Tensor<3> {
        self.decode_inner(memory, tgt_in, None, false).0
    }

    /// [`Transformer::decode`] with word focus `[b, t]` (source positions; see
    /// [`crate::task::focus`]). Models without `word_focus` ignore it.
    pub fn decode_focused(
        &self,
        memory: &Memory,
        tgt_in: Tensor<2, Int>,
        focus: Option<Tensor<2, Int>>,
    ) -> Tensor<3> {
        self.decode_inner(memory, tgt_in, focus, false).0
    }

    fn decode_inner(
        &self,
        memory: &Memory,
        tgt_in: Tensor<2, Int>,
        focus: Option<Tensor<2, Int>>,
        need_weights: bool,
    ) -> (Tensor<3>, Vec<Tensor<4>>, Vec<Tensor<4>>) {
        let t = tgt_in.dims()[1];
        let device = tgt_in.device();
        let mut y = self.decoder_input(tgt_in, 0, Some(&memory.states), focus);
        let future = crate::constants::causal_mask(t, &device);
        let (mut self_w, mut cross_w) = (Vec::new(), Vec::new());
        for layer in &self.decoder.layers {
            let self_kv = layer.self_attn.project_kv(y.clone());
            let cross_kv = layer.cross_attn.project_kv(memory.states.clone());
            let (out, w) = layer.forward(
                y,
                &self_kv,
                Some(future.clone()),
                &cross_kv,
                &memory.blocked,
                need_weights,
                self.fused,
            );
            y = out;
            if let Some(w) = w {
                self_w.push(w.self_attn);
                cross_w.push(w.cross_attn);
            }
        }
        (self.project(y), self_w, cross_w)
    }

    /// The training forward pass: logits `[b, t, vocab]` for source `[b, s]` and target
    /// inputs `[b, t]`.
    pub fn forward(&self, src: Tensor<2, Int>, tgt_in: Tensor<2, Int>) -> Tensor<3> {
        self.forward_focused(src, tgt_in, None)
    }

    /// [`Transformer::forward`] with word focus `[b, t]` for word-focus models.
    pub fn forward_focused(
        &self,
        src: Tensor<2, Int>,
        tgt_in: Tensor<2, Int>,
        focus: Option<Tensor<2, Int>>,
    ) -> Tensor<3> {
        let memory = self.encode(src);
        self.decode_focused(&memory, tgt_in, focus)
    }

    /// Every attention weight of a teacher-forced pass, for heat maps.
    pub fn attention_maps(
        &self,
        src: Tensor<2, Int>,
        tgt_in: Tensor<2, Int>,
        focus: Option<Tensor<2, Int>>,
    ) -> AttentionMaps {
        let (memory, encoder_self) = self.encode_inner(src, true);
        let (_, decoder_self, cross) = self.decode_inner(&memory, tgt_in, focus, true);
        AttentionMaps {
            encoder_self,
            decoder_self,
            cross,
        }
    }

    /// Prepares incremental decoding: cross-attention keys/values are computed here, once.
    pub fn start_decoding(&self, memory: &Memory) -> DecoderState {
        DecoderState {
            self_kv: vec![None; self.decoder.layers.len()],
            cross_kv: self
                .decoder
                .layers
                .iter()
                .map(|layer| layer.cross_attn.project_kv(memory.states.clone()))
                .collect(),
            blocked: memory.blocked.clone(),
            memory: self.config.word_focus.then(|| memory.states.clone()),
            position: 0,
        }
    }

    /// Feeds one token per row (`[b]`), appending its keys/values to the caches, and
    /// returns next-token logits `[b, vocab]`.
    pub fn decode_step(&self, state: &mut DecoderState, tokens: Tensor<1, Int>) -> Tensor<2> {
        self.decode_step_focused(state, tokens, None)
    }

    /// [`Transformer::decode_step`] with each row's word focus (`[b]`, source positions)
    /// for word-focus models.
    pub fn decode_step_focused(
        &self,
        state: &mut DecoderState,
        tokens: Tensor<1, Int>,
        focus: Option<Tensor<1, Int>>,
    ) -> Tensor<2> {
        let [b] = tokens.dims();
        let mut y = self.decoder_input(
            tokens.reshape([b, 1]),
            state.position,
            state.memory.as_ref(),
            focus.map(|f| f.reshape([b, 1])),
        );
        for (i, layer) in self.decoder.layers.iter().enumerate() {
            let new = layer.self_attn.project_kv(y.clone());
            let kv = match state.self_kv[i].take() {
                Some(cache) => cache.append(new),
                None => new,
            };
            // The newest position may see every cached one: no mask needed.
            let (out, _) = layer.forward(
                y,
                &kv,
                None,
                &state.cross_kv[i],
                &state.blocked,
                false,
                self.fused,
            );
            state.self_kv[i] = Some(kv);
            y = out;
        }
        state.position += 1;
        self.project(y).reshape([b, self.config.vocab_size])
    }
}
