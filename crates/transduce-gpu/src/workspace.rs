//! One shape class's buffers and bind groups, and the recording of the encoder pass and
//! of a decoder step (§3.1, §6.1).
//!
//! One file on purpose: the buffers a shape class allocates and the dispatches that bind
//! them are two halves of one layout (each dispatch names buffers by the fields made here);
//! split apart, a change to one would silently desynchronise the other.
//!
//! A shape class is (sources, source rows, decoder rows, positions, candidates per row):
//! its buffers and bind groups are made once and reused by every step and by later batches
//! that fit. A step is one command encoder and one submit: the history of each row (beam
//! reordering as an index), then embedding, the decoder layers, the output projection, the
//! log-softmax and the top-k, then the copy of the candidates to a mappable buffer.

use bytemuck::{Pod, Zeroable};
use transduce::{Error, Result};

use crate::resident::Resident;
use crate::shaders::{self, AttentionLayout, Depth, Keys, Store};
use crate::weights::{LayerNorm, Linear};

/// Mirrors `Params` in common.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Params {
    pub rows: u32,
    pub t: u32,
    pub flags: u32,
    pub pad: u32,
}

/// Mirrors `Row` in common.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Row {
    pub token: u32,
    pub src: u32,
    pub pos: u32,
    pub parent: u32,
    pub focus: i32,
    pub limit: u32,
}

/// Mirrors `Source` in common.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Source {
    pub offset: u32,
    pub len: u32,
}

/// Mirrors `Candidate` in select_part.wgsl and select_merge.wgsl.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub(crate) struct Candidate {
    pub log_prob: f32,
    pub id: u32,
}

/// The id of "no candidate left".
pub(crate) const NONE: u32 = u32::MAX;

impl Candidate {
    /// Greedy's token and log-probability: EOS with −∞ when no token was left.
    pub(crate) fn choice(&self) -> (u32, f64) {
        match self.id {
            NONE => (transduce::tokenizer::EOS, f64::NEG_INFINITY),
            id => (id, self.log_prob as f64),
        }
    }
}

/// A row's `limit` when the host's masks apply the length limit.
pub(crate) const NO_LIMIT: u32 = u32::MAX;

/// The sizes a workspace was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub sources: usize,
    pub source_rows: usize,
    pub rows: usize,
    /// Positions per row (the longest output, EOS included).
    pub cap: usize,
    /// Candidates per row.
    pub k: usize,
    /// Rows of the position tables: the longest source or output.
    pub positions: usize,
}

impl Shape {
    /// A workspace of this shape serves a batch of `other`'s.
    pub(crate) fn fits(&self, other: &Shape) -> bool {
        self.sources >= other.sources
            && self.source_rows >= other.source_rows
            && self.rows >= other.rows
            && self.cap >= other.cap
            && self.positions >= other.positions
            && self.k == other.k
    }
}

/// A recorded dispatch: pipeline, bind group, and how its grid follows the row count.
struct Dispatch {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    grid: Grid,
    depth: Depth,
    /// What it computes, for [`Workspace::profile_step`]'s table.
    name: &'static str,
    /// The same computation for [`shaders::MANY_ROWS`] rows or more, where it differs
    /// (the products' wide geometry).
    wide: Option<Box<Dispatch>>,
}

impl Dispatch {
    fn named(mut self, name: &'static str) -> Dispatch {
        self.name = name;
        self
    }

    /// What runs for a step of `rows` rows.
    fn for_rows(&self, rows: u32) -> &Dispatch {
        match &self.wide {
            Some(wide) if rows >= shaders::MANY_ROWS => wide,
            _ => self,
        }
    }
}

#[derive(Clone, Copy)]
enum Grid {
    /// One workgroup per row.
    Rows,
    /// `(x, ceil(rows / y))`: column blocks × row blocks.
    Blocks(u32, u32),
    /// `(heads, rows)`.
    Heads(u32),
    /// One thread per (row, position): `ceil(rows·cap / 64)`.
    History(u32),
}

impl Grid {
    fn size(self, rows: u32) -> (u32, u32, u32) {
        match self {
            Grid::Rows => (rows, 1, 1),
            Grid::Blocks(x, y) => (x, rows.div_ceil(y), 1),
            Grid::Heads(h) => (h, rows, 1),
            Grid::History(cap) => ((rows * cap).div_ceil(shaders::WG), 1, 1),
        }
    }
}

/// What the decoder counted, for `transduce bench` and docs/BENCHMARKS.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Decoder steps run.
    pub steps: u64,
    /// Kernel dispatches of those steps.
    pub dispatches: u64,
    /// Queue submits of those steps.
    pub submits: u64,
    /// Bytes read back to the host by those steps.
    pub readback_bytes: u64,
    /// Bytes written to the GPU by those steps (rows, masks, parameters).
    pub upload_bytes: u64,
    /// Encoder passes (one per batch) and their dispatches.
    pub encoder_passes: u64,
    pub encoder_dispatches: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.steps += o.steps;
        self.dispatches += o.dispatches;
        self.submits += o.submits;
        self.readback_bytes += o.readback_bytes;
        self.upload_bytes += o.upload_bytes;
        self.encoder_passes += o.encoder_passes;
        self.encoder_dispatches += o.encoder_dispatches;
    }
}

impl Counts {
    /// Per decoder step: (dispatches, submits, readback bytes).
    pub fn per_step(&self) -> (f64, f64, f64) {
        let s = self.steps.max(1) as f64;
        (
            self.dispatches as f64 / s,
            self.submits as f64 / s,
            self.readback_bytes as f64 / s,
        )
    }
}

pub(crate) struct Workspace {
    pub shape: Shape,
    enc_params: wgpu::Buffer,
    dec_params: wgpu::Buffer,
    enc_rows: wgpu::Buffer,
    dec_rows: wgpu::Buffer,
    sources: wgpu::Buffer,
    masks: wgpu::Buffer,
    history: wgpu::Buffer,
    next_history: wgpu::Buffer,
    /// The rows greedy's top-k writes for the next step.
    next_rows: wgpu::Buffer,
    candidates: wgpu::Buffer,
    /// Two, so that a step's candidates can be read while the next step runs; each holds
    /// the candidates of up to [`GREEDY_GROUP`] steps submitted together.
    staging: [wgpu::Buffer; 2],
    /// The `Params` of each step of a group, copied into `dec_params` before each step.
    group_params: wgpu::Buffer,
    /// The staging buffer the next submit copies its candidates to (they alternate, so the
    /// one in flight is never the one being read).
    next_slot: std::cell::Cell<usize>,
    encoder: Vec<Dispatch>,
    history_step: Dispatch,
    step: Vec<Dispatch>,
    /// Mask words per row.
    words: usize,
}

fn storage(gpu: &crate::Gpu, bytes: usize, extra: wgpu::BufferUsages) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        // Bindings must not be empty, and some shaders read them as vec4s.
        size: (bytes.max(16) as u64).next_multiple_of(16),
        usage: wgpu::BufferUsages::STORAGE | extra,
        mapped_at_creation: false,
    })
}

fn uniform(gpu: &crate::Gpu) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: std::mem::size_of::<Params>() as u64,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

fn bind(
    gpu: &crate::Gpu,
    pipeline: &wgpu::ComputePipeline,
    buffers: &[&wgpu::Buffer],
    grid: Grid,
    depth: Depth,
) -> Dispatch {
    let layout = pipeline.get_bind_group_layout(0);
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &layout,
        entries: &entries,
    });
    Dispatch {
        pipeline: pipeline.clone(),
        bind_group,
        grid,
        depth,
        name: "",
        wide: None,
    }
}

fn record(pass: &mut wgpu::ComputePass<'_>, dispatches: &[Dispatch], rows: u32) {
    for d in dispatches {
        let d = d.for_rows(rows);
        let (x, y, z) = d.grid.size(rows);
        pass.set_pipeline(&d.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

/// The buffers only the dispatches bind (activations, the caches, the position tables):
/// the bind groups keep them alive, so the workspace does not.
struct Scratch {
    /// The encoder's output (§3.1).
    memory: wgpu::Buffer,
    /// The decoder rows' activations.
    x: wgpu::Buffer,
    qkv: wgpu::Buffer,
    context: wgpu::Buffer,
    hidden: wgpu::Buffer,
    /// An output projection's result, before the residual and LayerNorm.
    projected: wgpu::Buffer,
    logits: wgpu::Buffer,
    /// Each decoder layer's keys and values of the sources.
    cross: Vec<wgpu::Buffer>,
    /// Each decoder layer's keys and values of the positions so far.
    caches: Vec<wgpu::Buffer>,
    /// The source's and the target's position tables.
    positions: (wgpu::Buffer, wgpu::Buffer),
}

impl Scratch {
    fn new(model: &Resident, shape: Shape) -> Scratch {
        let gpu = &model.gpu;
        let c = &model.config;
        let (hk, hv) = (c.n_heads * c.d_k, c.n_heads * c.d_v);
        let (rows, srows, cap) = (shape.rows, shape.source_rows, shape.cap);
        let f32s = |n: usize| n * 4;
        let none = wgpu::BufferUsages::empty();
        let biggest = rows.max(srows);
        let layers = model.weights.decoder.len();
        let positions = {
            let (src, tgt) = model.position_tables(shape.positions);
            (model.upload(&src), model.upload(&tgt))
        };
        Scratch {
            memory: storage(gpu, f32s(srows * c.d_model), none),
            x: storage(gpu, f32s(rows * c.d_model), none),
            qkv: storage(gpu, f32s(biggest * (hk + hk + hv)), none),
            context: storage(gpu, f32s(biggest * hv), none),
            hidden: storage(gpu, f32s(biggest * c.d_ff), none),
            projected: storage(gpu, f32s(biggest * c.d_model), none),
            logits: storage(gpu, f32s(rows * c.vocab_size), none),
            cross: (0..layers)
                .map(|_| storage(gpu, f32s(srows * (hk + hv)), none))
                .collect(),
            caches: (0..layers)
                .map(|_| storage(gpu, f32s(rows * cap * (hk + hv)), none))
                .collect(),
            positions,
        }
    }
}

/// What a pass's dispatches are made from: the model's shaders, the shape class, and the
/// buffers every layer binds. The shapes of dispatch a layer is made of: products,
/// residual + LayerNorm after a product, attention.
struct Binder<'a> {
    model: &'a Resident,
    shape: Shape,
    sources: &'a wgpu::Buffer,
    history: &'a wgpu::Buffer,
    scratch: &'a Scratch,
}

impl Binder<'_> {
    /// A product over `rows` rows. Products also get the wide geometry for batches of many
    /// rows (shaders.rs) where this workspace can hold that many.
    fn linear(
        &self,
        (params, rows): (&wgpu::Buffer, usize),
        l: &Linear,
        store: Store,
        input: &wgpu::Buffer,
        out: &[&wgpu::Buffer],
    ) -> Dispatch {
        let mut buffers = vec![params, input, &l.w, &l.b];
        buffers.extend_from_slice(out);
        let geometry = |wide: bool| {
            let grid = Grid::Blocks(shaders::linear_blocks(l.k, l.n, wide), shaders::LINEAR_ROWS);
            bind(
                &self.model.gpu,
                &self.model.shaders.linear(l.k, l.n, store, wide),
                &buffers,
                grid,
                Depth::linear(l.k, wide),
            )
        };
        let mut dispatch = geometry(false);
        if rows >= shaders::MANY_ROWS as usize {
            dispatch.wide = Some(Box::new(geometry(true)));
        }
        dispatch
    }

    /// The output projection, then the residual and LayerNorm: two dispatches.
    fn add_norm(
        &self,
        pass: (&wgpu::Buffer, usize),
        l: &Linear,
        norm: &LayerNorm,
        input: &wgpu::Buffer,
        res: &wgpu::Buffer,
    ) -> [Dispatch; 2] {
        let projected = &self.scratch.projected;
        let product = self.linear(pass, l, Store::Plain, input, &[projected]);
        let buffers = [pass.0, projected, &norm.gamma, &norm.beta, res];
        let pipeline = self.model.shaders.norm(l.n);
        let norm = bind(
            &self.model.gpu,
            &pipeline,
            &buffers,
            Grid::Rows,
            Depth::norm(l.n),
        );
        [product, norm]
    }

    /// An attention pipeline over `keys`, with its depth.
    fn attention(&self, layout: AttentionLayout, keys: Keys) -> (wgpu::ComputePipeline, Depth) {
        let c = &self.model.config;
        let pipeline = self
            .model
            .shaders
            .attention(c.n_heads, c.d_k, c.d_v, layout, keys);
        (pipeline, Depth::attention(c.d_k, c.d_v, keys))
    }

    fn attend(
        &self,
        params: &wgpu::Buffer,
        (pipeline, depth): &(wgpu::ComputePipeline, Depth),
        rows: &wgpu::Buffer,
        q: &wgpu::Buffer,
        kv: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Dispatch {
        let buffers = [params, rows, self.sources, self.history, q, kv, out];
        let heads = Grid::Heads(self.model.config.n_heads as u32);
        bind(&self.model.gpu, pipeline, &buffers, heads, *depth)
    }

    /// The FFN's inner product stores through the model's non-linearity (§3.3).
    fn ffn(&self) -> Store {
        match self.model.config.activation {
            transduce::config::Activation::Relu => Store::Relu,
            transduce::config::Activation::Swish => Store::Swish,
        }
    }

    fn embed(&self) -> wgpu::ComputePipeline {
        let c = &self.model.config;
        let scale = (c.d_model as f64).sqrt() as f32;
        self.model.shaders.embed(c.d_model, c.vocab_size, scale)
    }

    /// The encoder pass (§3.1), then each decoder layer's keys and values of the sources.
    fn encoder_pass(&self, params: &wgpu::Buffer, enc_rows: &wgpu::Buffer) -> Vec<Dispatch> {
        let (c, w, s) = (&self.model.config, &self.model.weights, self.scratch);
        let (hk, hv) = (c.n_heads * c.d_k, c.n_heads * c.d_v);
        let width = hk + hk + hv;
        let embedding = [
            params,
            enc_rows,
            &w.src_embedding,
            &s.positions.0,
            self.sources,
            &s.positions.0,
            &s.memory,
        ];
        let embed = self.embed();
        let mut encoder = vec![bind(
            &self.model.gpu,
            &embed,
            &embedding,
            Grid::Rows,
            Depth::embed(c.d_model),
        )];
        let ffn = self.ffn();
        let attention = self.attention(layout(width, width, hk, 2 * hk), Keys::Source);
        // The encoder's products run over the source rows.
        let p = (params, self.shape.source_rows);
        for l in &w.encoder {
            encoder.push(self.linear(p, &l.qkv, Store::Plain, &s.memory, &[&s.qkv]));
            encoder.push(self.attend(params, &attention, enc_rows, &s.qkv, &s.qkv, &s.context));
            encoder.extend(self.add_norm(p, &l.o, &l.attn_norm, &s.context, &s.memory));
            encoder.push(self.linear(p, &l.fc1, ffn, &s.memory, &[&s.hidden]));
            encoder.extend(self.add_norm(p, &l.fc2, &l.ffn_norm, &s.hidden, &s.memory));
        }
        for (l, kv) in w.decoder.iter().zip(&s.cross) {
            encoder.push(self.linear(p, &l.cross_kv, Store::Plain, &s.memory, &[kv]));
        }
        encoder
    }

    /// The decoder step (§3.1): embedding, then in each layer masked self-attention over
    /// the cache, encoder–decoder attention and the FFN.
    fn decoder_layers(&self, params: &wgpu::Buffer, dec_rows: &wgpu::Buffer) -> Vec<Dispatch> {
        let (c, w, s) = (&self.model.config, &self.model.weights, self.scratch);
        let (hk, hv, cap) = (c.n_heads * c.d_k, c.n_heads * c.d_v, self.shape.cap as u32);
        let embedding = [
            params,
            dec_rows,
            &w.tgt_embedding,
            &s.positions.1,
            self.sources,
            &s.memory,
            &s.x,
        ];
        let embed = self.embed();
        let mut step = vec![
            bind(
                &self.model.gpu,
                &embed,
                &embedding,
                Grid::Rows,
                Depth::embed(c.d_model),
            )
            .named("embedding"),
        ];
        let kv_layout = layout(hk, hk + hv, 0, hk);
        let self_attention = self.attention(kv_layout, Keys::Cache { cap });
        let cross_attention = self.attention(kv_layout, Keys::Source);
        let split = Store::Split { q: hk as u32, cap };
        let ffn = self.ffn();
        let p = (params, self.shape.rows);
        for ((l, kv), cache) in w.decoder.iter().zip(&s.cross).zip(&s.caches) {
            let qkv_product = self.linear(p, &l.qkv, split, &s.x, &[&s.qkv, cache]);
            step.push(qkv_product.named("self Q/K/V"));
            let a = self.attend(params, &self_attention, dec_rows, &s.qkv, cache, &s.context);
            step.push(a.named("self-attention"));
            let [o, n] = self.add_norm(p, &l.o, &l.self_norm, &s.context, &s.x);
            step.extend([o.named("self out"), n.named("self residual + norm")]);
            let q = self.linear(p, &l.cross_q, Store::Plain, &s.x, &[&s.qkv]);
            step.push(q.named("cross Q"));
            let a = self.attend(params, &cross_attention, dec_rows, &s.qkv, kv, &s.context);
            step.push(a.named("cross-attention"));
            let [o, n] = self.add_norm(p, &l.cross_o, &l.cross_norm, &s.context, &s.x);
            step.extend([o.named("cross out"), n.named("cross residual + norm")]);
            let f = self.linear(p, &l.fc1, ffn, &s.x, &[&s.hidden]);
            step.push(f.named(match ffn {
                Store::Swish => "FFN inner (swish)",
                _ => "FFN inner (ReLU)",
            }));
            let [f, n] = self.add_norm(p, &l.fc2, &l.ffn_norm, &s.hidden, &s.x);
            step.extend([f.named("FFN outer"), n.named("FFN residual + norm")]);
        }
        step
    }

    /// The output projection (§3.4), then the top-k over many workgroups per row (parts of
    /// the vocabulary) and one workgroup per row merging the parts.
    fn output_and_top_k(
        &self,
        params: &wgpu::Buffer,
        (dec_rows, masks): (&wgpu::Buffer, &wgpu::Buffer),
        (candidates, next_rows): (&wgpu::Buffer, &wgpu::Buffer),
    ) -> [Dispatch; 3] {
        let (gpu, k, s) = (&self.model.gpu, &self.model.shaders, self.scratch);
        let (vocab, rows, top) = (self.model.config.vocab_size, self.shape.rows, self.shape.k);
        let p = (params, rows);
        let output = self.linear(
            p,
            &self.model.weights.output,
            Store::Plain,
            &s.x,
            &[&s.logits],
        );
        let parts = shaders::select_parts(vocab);
        let none = wgpu::BufferUsages::empty();
        let part_stats = storage(gpu, rows * parts * 8, none);
        let part_best = storage(
            gpu,
            rows * parts * top * std::mem::size_of::<Candidate>(),
            none,
        );
        let part = bind(
            gpu,
            &k.select_part(vocab, top),
            &[params, &s.logits, masks, dec_rows, &part_stats, &part_best],
            Grid::Heads(parts as u32),
            Depth::select_part(vocab),
        );
        let merge = bind(
            gpu,
            &k.select_merge(vocab, top),
            &[
                params,
                &part_stats,
                &part_best,
                candidates,
                dec_rows,
                next_rows,
            ],
            Grid::Rows,
            Depth::select_merge(vocab, top),
        );
        [
            output.named("output projection"),
            part.named("log-softmax + top-k"),
            merge.named("top-k merge"),
        ]
    }
}

/// Where an attention's queries, keys and values sit in the rows it reads.
fn layout(qs: usize, kvs: usize, ko: usize, vo: usize) -> AttentionLayout {
    AttentionLayout {
        qs: qs as u32,
        qo: 0,
        kvs: kvs as u32,
        ko: ko as u32,
        vo: vo as u32,
    }
}

impl Workspace {
    /// Buffers and bind groups for batches of `shape` on `model`.
    pub(crate) fn new(model: &Resident, shape: Shape) -> Result<Workspace> {
        let gpu = &model.gpu;
        let max_rows = gpu.limits().max_compute_workgroups_per_dimension as usize;
        if shape.rows > max_rows || shape.source_rows > max_rows {
            return Err(Error::Input(format!(
                "a batch of {} decoder rows over {} source tokens is more than the GPU \
                 decoder runs at once ({max_rows}): decode it in smaller batches",
                shape.rows, shape.source_rows
            )));
        }
        let (rows, srows, cap) = (shape.rows, shape.source_rows, shape.cap);
        let dst = wgpu::BufferUsages::COPY_DST;
        let src = wgpu::BufferUsages::COPY_SRC;
        let enc_params = uniform(gpu);
        let dec_params = uniform(gpu);
        let enc_rows = storage(gpu, srows * std::mem::size_of::<Row>(), dst);
        let dec_rows = storage(gpu, rows * std::mem::size_of::<Row>(), dst);
        let sources = storage(gpu, shape.sources * std::mem::size_of::<Source>(), dst);
        let words = model.config.vocab_size.div_ceil(32);
        let masks = storage(gpu, rows * words * 4, dst);
        let history = storage(gpu, rows * cap * 4, dst);
        let next_history = storage(gpu, rows * cap * 4, src);
        let cand_bytes = rows * shape.k * std::mem::size_of::<Candidate>();
        let candidates = storage(gpu, cand_bytes, src);
        let next_rows = storage(gpu, rows * std::mem::size_of::<Row>(), src);
        let staging = [(); 2].map(|_| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: ((GREEDY_GROUP * cand_bytes).max(4) as u64).next_multiple_of(4),
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        });
        let group_params = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: (GREEDY_GROUP * std::mem::size_of::<Params>()) as u64,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });

        let scratch = Scratch::new(model, shape);
        let binder = Binder {
            model,
            shape,
            sources: &sources,
            history: &history,
            scratch: &scratch,
        };
        let encoder = binder.encoder_pass(&enc_params, &enc_rows);
        // A step: the history of each row (beam reordering as an index), the layers, the
        // output projection and the top-k.
        let history_step = bind(
            gpu,
            &model.shaders.history(cap as u32),
            &[&dec_params, &dec_rows, &history, &next_history],
            Grid::History(cap as u32),
            Depth::history(),
        )
        .named("history");
        let mut step = binder.decoder_layers(&dec_params, &dec_rows);
        step.extend(binder.output_and_top_k(
            &dec_params,
            (&dec_rows, &masks),
            (&candidates, &next_rows),
        ));
        Ok(Workspace {
            shape,
            enc_params,
            dec_params,
            enc_rows,
            dec_rows,
            sources,
            masks,
            history,
            next_history,
            next_rows,
            candidates,
            staging,
            group_params,
            next_slot: std::cell::Cell::new(0),
            encoder,
            history_step,
            step,
            words,
        })
    }

    /// Mask words per row.
    /// The decoder step's serial depth ([`Depth`]) at position `t` with a source of
    /// `source_len` tokens: the sum over the step's dispatches, the history's included.
    pub(crate) fn step_depth(&self, t: u64, source_len: u64) -> u64 {
        std::iter::once(&self.history_step)
            .chain(&self.step)
            .map(|d| d.depth.at(t, source_len))
            .sum()
    }

    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// Runs the encoder over `sources` (one submit, nothing read back).
    pub(crate) fn encode(&self, model: &Resident, sources: &[Vec<u32>], counts: &mut Counts) {
        let gpu = &model.gpu;
        let mut table = Vec::with_capacity(sources.len());
        let mut rows = Vec::new();
        for (s, src) in sources.iter().enumerate() {
            table.push(Source {
                offset: rows.len() as u32,
                len: src.len() as u32,
            });
            rows.extend(src.iter().enumerate().map(|(i, &token)| Row {
                token,
                src: s as u32,
                pos: i as u32,
                parent: 0,
                focus: -1,
                limit: NO_LIMIT,
            }));
        }
        let n = rows.len() as u32;
        gpu.queue
            .write_buffer(&self.sources, 0, bytemuck::cast_slice(&table));
        gpu.queue
            .write_buffer(&self.enc_rows, 0, bytemuck::cast_slice(&rows));
        let params = Params {
            rows: n,
            ..Params::default()
        };
        gpu.queue
            .write_buffer(&self.enc_params, 0, bytemuck::bytes_of(&params));
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            record(&mut pass, &self.encoder, n);
        }
        gpu.queue.submit([encoder.finish()]);
        counts.encoder_passes += 1;
        counts.encoder_dispatches += self.encoder.len() as u64;
    }

    /// One decoder step at position `t` over `rows`, with each row's allowed-token mask
    /// (`masks`: `rows × words` bits, empty when no row is restricted). Returns each row's
    /// `shape.k` best candidates.
    pub(crate) async fn step(
        &self,
        model: &Resident,
        t: usize,
        rows: &[Row],
        masks: &[u32],
        counts: &mut Counts,
    ) -> Result<Vec<Candidate>> {
        let step = self.submit(model, t, Input::Host(rows), masks, counts);
        self.read(model, step).await
    }

    /// Records and submits the step at position `t` (nothing is read): its candidates go to
    /// the staging buffer the previous submit did not use.
    pub(crate) fn submit(
        &self,
        model: &Resident,
        t: usize,
        input: Input<'_>,
        masks: &[u32],
        counts: &mut Counts,
    ) -> Submitted {
        self.submit_group(model, t, 1, input, masks, counts)
    }

    /// Records `steps` consecutive steps from position `t` in one submit (nothing is read):
    /// each step after the first takes its rows from the one before (greedy's choices,
    /// written by the GPU), so `steps > 1` only for greedy without masks. Their candidates
    /// go to the staging buffer the previous submit did not use, one step after another,
    /// read back together.
    pub(crate) fn submit_group(
        &self,
        model: &Resident,
        t: usize,
        steps: usize,
        input: Input<'_>,
        masks: &[u32],
        counts: &mut Counts,
    ) -> Submitted {
        assert!(
            (1..=GREEDY_GROUP).contains(&steps) && (steps == 1 || masks.is_empty()),
            "a group is 1 to {GREEDY_GROUP} unmasked steps"
        );
        let gpu = &model.gpu;
        let n = match input {
            Input::Host(rows) => rows.len(),
            Input::Gpu(n) => n,
        };
        let params: Vec<Params> = (t..t + steps)
            .map(|t| Params {
                rows: n as u32,
                t: t as u32,
                flags: u32::from(!masks.is_empty()),
                pad: 0,
            })
            .collect();
        let params_bytes = std::mem::size_of::<Params>() as u64;
        if steps == 1 {
            gpu.queue
                .write_buffer(&self.dec_params, 0, bytemuck::cast_slice(&params));
        } else {
            gpu.queue
                .write_buffer(&self.group_params, 0, bytemuck::cast_slice(&params));
        }
        let mut uploaded = std::mem::size_of_val(params.as_slice());
        let row_bytes = (n * std::mem::size_of::<Row>()) as u64;
        if let Input::Host(rows) = input {
            gpu.queue
                .write_buffer(&self.dec_rows, 0, bytemuck::cast_slice(rows));
            uploaded += std::mem::size_of_val(rows);
        }
        if !masks.is_empty() {
            gpu.queue
                .write_buffer(&self.masks, 0, bytemuck::cast_slice(masks));
            uploaded += std::mem::size_of_val(masks);
        }
        let history_bytes = (n * self.shape.cap * 4) as u64;
        let cand_bytes = (n * self.shape.k * std::mem::size_of::<Candidate>()) as u64;
        let slot = self.next_slot.get();
        self.next_slot.set(1 - slot);
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for i in 0..steps {
            if steps > 1 {
                let at = i as u64 * params_bytes;
                encoder.copy_buffer_to_buffer(
                    &self.group_params,
                    at,
                    &self.dec_params,
                    0,
                    params_bytes,
                );
            }
            if i > 0 || matches!(input, Input::Gpu(_)) {
                encoder.copy_buffer_to_buffer(&self.next_rows, 0, &self.dec_rows, 0, row_bytes);
            }
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                record(
                    &mut pass,
                    std::slice::from_ref(&self.history_step),
                    n as u32,
                );
            }
            encoder.copy_buffer_to_buffer(&self.next_history, 0, &self.history, 0, history_bytes);
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                record(&mut pass, &self.step, n as u32);
            }
            let at = i as u64 * cand_bytes;
            encoder.copy_buffer_to_buffer(&self.candidates, 0, &self.staging[slot], at, cand_bytes);
        }
        let index = gpu.queue.submit([encoder.finish()]);
        let steps = steps as u64;
        counts.steps += steps;
        counts.submits += 1;
        counts.dispatches += steps * (1 + self.step.len() as u64);
        counts.readback_bytes += steps * cand_bytes;
        counts.upload_bytes += uploaded as u64;
        Submitted {
            slot,
            bytes: steps * cand_bytes,
            index,
        }
    }

    /// One decoder step at position `t` over `rows` with each dispatch in its own compute
    /// pass between two GPU timestamps: each dispatch's name and nanoseconds, in order.
    /// Needs a device with `timestamp-query` ([`crate::Gpu`] asks for it natively).
    pub(crate) async fn profile_step(
        &self,
        model: &Resident,
        t: usize,
        rows: &[Row],
    ) -> Result<Vec<(&'static str, f64, u64)>> {
        let gpu = &model.gpu;
        let n = rows.len();
        let params = Params {
            rows: n as u32,
            t: t as u32,
            flags: 0,
            pad: 0,
        };
        gpu.queue
            .write_buffer(&self.dec_params, 0, bytemuck::bytes_of(&params));
        gpu.queue
            .write_buffer(&self.dec_rows, 0, bytemuck::cast_slice(rows));
        let dispatches: Vec<&Dispatch> = std::iter::once(&self.history_step)
            .chain(&self.step)
            .collect();
        let count = 2 * dispatches.len() as u32;
        let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count,
        });
        let bytes = 8 * count as u64;
        let buffer = |usage| {
            gpu.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        let resolved = buffer(wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC);
        let readback = buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST);
        let history_bytes = (n * self.shape.cap * 4) as u64;
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (i, d) in dispatches.iter().enumerate() {
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: None,
                    timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                        query_set: &queries,
                        beginning_of_pass_write_index: Some(2 * i as u32),
                        end_of_pass_write_index: Some(2 * i as u32 + 1),
                    }),
                });
                record(&mut pass, std::slice::from_ref(*d), n as u32);
            }
            if i == 0 {
                // As a recorded step does: the history, then its copy into place.
                encoder.copy_buffer_to_buffer(
                    &self.next_history,
                    0,
                    &self.history,
                    0,
                    history_bytes,
                );
            }
        }
        encoder.resolve_query_set(&queries, 0..count, &resolved, 0);
        encoder.copy_buffer_to_buffer(&resolved, 0, &readback, 0, bytes);
        let index = gpu.queue.submit([encoder.finish()]);
        let raw = gpu.read(&readback, bytes, index).await?;
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(&raw);
        let period = gpu.queue.get_timestamp_period() as f64;
        Ok(dispatches
            .iter()
            .zip(ticks.chunks_exact(2))
            .map(|(d, pair)| {
                let ns = pair[1].saturating_sub(pair[0]) as f64 * period;
                let depth = d.for_rows(n as u32).depth;
                (d.name, ns, depth.at(t as u64, shaders::DEPTH_SOURCE as u64))
            })
            .collect())
    }

    /// A submitted step's candidates (`shape.k` per row).
    pub(crate) async fn read(&self, model: &Resident, step: Submitted) -> Result<Vec<Candidate>> {
        let bytes = model
            .gpu
            .read(&self.staging[step.slot], step.bytes, step.index)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}

/// Where a step's input rows come from.
#[derive(Clone, Copy)]
pub(crate) enum Input<'a> {
    /// Written by the host.
    Host(&'a [Row]),
    /// The previous step's greedy choices for its `n` rows, written by the GPU.
    Gpu(usize),
}

/// Greedy steps recorded in one submit and read back together at most: each group is one
/// round trip (a submit and a `mapAsync`), which in browsers costs more than a small
/// model's step (Chrome about 0.5 ms, Firefox's poll up to 100 ms). A sentence that ends
/// inside a group has the group's later steps computed and ignored.
pub(crate) const GREEDY_GROUP: usize = 4;

/// A step, or a group of steps, in flight.
pub(crate) struct Submitted {
    slot: usize,
    bytes: u64,
    index: wgpu::SubmissionIndex,
}
