//! The WGSL shaders, their constants filled in per model shape, compiled once.
//!
//! Each shader is written for the sizes of the model it serves (d_model, heads, d_ff,
//! vocabulary): loops have constant bounds and the compiler unrolls what it can. Only what
//! changes between steps (rows, position) is read from a uniform.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::device::Gpu;
use crate::weights::WeightStorage;

const COMMON: &str = include_str!("shaders/common.wgsl");
const EMBED: &str = include_str!("shaders/embed.wgsl");
const LINEAR: &str = include_str!("shaders/linear.wgsl");
const NORM: &str = include_str!("shaders/norm.wgsl");
const ATTENTION: &str = include_str!("shaders/attention.wgsl");
const HISTORY: &str = include_str!("shaders/history.wgsl");
const SELECT_PART: &str = include_str!("shaders/select_part.wgsl");
const SELECT_MERGE: &str = include_str!("shaders/select_merge.wgsl");

/// Threads per workgroup of the history shader.
pub(crate) const WG: u32 = 64;
/// Most keys one attention can see: its scores are held in workgroup memory.
pub(crate) const MAX_KEYS: usize = 1024;
/// Rows per workgroup of the products.
pub(crate) const LINEAR_ROWS: u32 = 4;
/// Columns per thread of the products.
pub(crate) const LINEAR_COLUMNS: u32 = 2;

/// Rows from which a step's products take the wide geometry ([`linear_split`]).
pub(crate) const MANY_ROWS: u32 = 8;

/// Column lanes × slices of the inner dimension of a product's 256 threads, for `kw`
/// words of inner dimension. With few rows (`wide` false) a product is a matrix–vector
/// product bound by the latency of its loads: as many slices as give a thread at most 4
/// words, between 8 and 32 (each pair's partial sums are added by one thread from
/// workgroup memory). With many rows there are workgroups enough along the rows, and
/// partial sums cost more than they give: 32 lanes × 8 slices, as llama.cpp's WebGPU
/// backend also leaves its matrix–vector kernel for wider batches.
pub(crate) fn linear_split(kw: usize, wide: bool) -> (u32, u32) {
    if wide {
        return (32, 8);
    }
    let slices = kw.div_ceil(4).next_power_of_two().clamp(8, 32) as u32;
    (256 / slices, slices)
}

/// A product's workgroups along its columns: `LANES × CPT` columns each.
pub(crate) fn linear_blocks(k: usize, n: usize, wide: bool) -> u32 {
    let (lanes, _) = linear_split(words(k), wide);
    (n as u32).div_ceil(lanes * LINEAR_COLUMNS)
}

/// Source tokens of [`crate::GpuModel::serial_depth`]'s reference sentence.
pub const DEPTH_SOURCE: usize = 20;
/// The decoder step (1-based) [`crate::GpuModel::serial_depth`] counts: its self-attention
/// reads as many cached positions.
pub const DEPTH_STEP: usize = 20;

/// A shader's serial depth: the iterations, with loads from global memory, of the longest
/// chain of loops one of its threads runs. At batch 1 a decoder step is bound by latency,
/// not arithmetic, and the sum of its dispatches' depths is what bounds its time
/// (`transduce bench` prints it as `serial depth`). Each shader's figure is read off its
/// WGSL loops below, next to the shader it describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Depth {
    Fixed(u64),
    /// An attention over `n` keys (the cache's `t + 1` or the source's length), four
    /// dimensions to a load: the scores, `⌈n / 16⌉ · ⌈⌈DK/4⌉ / 16⌉` (sixteen threads share
    /// a key), then the weighted values, `⌈⌈DV/4⌉ / 16⌉ · ⌈n / 16⌉` (sixteen threads share
    /// four dimensions).
    Attention {
        dk: u64,
        dv: u64,
        keys: Keys,
    },
}

impl Depth {
    /// The depth at decoder position `t` with a source of `source_len` tokens.
    pub(crate) fn at(self, t: u64, source_len: u64) -> u64 {
        match self {
            Depth::Fixed(d) => d,
            Depth::Attention { dk, dv, keys } => {
                let n = match keys {
                    Keys::Source => source_len,
                    Keys::Cache { .. } => t + 1,
                };
                let score_lanes = (ATTENTION_THREADS / ATTENTION_SCORE_PARTS) as u64;
                let score_parts = ATTENTION_SCORE_PARTS as u64;
                let lanes = (ATTENTION_THREADS / ATTENTION_VALUE_PARTS) as u64;
                let parts = ATTENTION_VALUE_PARTS as u64;
                n.div_ceil(score_lanes) * dk.div_ceil(4).div_ceil(score_parts)
                    + dv.div_ceil(4).div_ceil(lanes) * n.div_ceil(parts)
            }
        }
    }

    /// `embed.wgsl`: a thread writes every 256th of the `d` columns.
    pub(crate) fn embed(d: usize) -> Depth {
        Depth::Fixed(d.div_ceil(EMBED_THREADS) as u64)
    }

    /// `linear.wgsl` in the geometry for few rows or many (`wide`): one slice of the inner
    /// loop's words, then the epilogue's stores: `RB × CPT` pairs shared by the slices
    /// (each reading its bias and column scale; the partial sums come from workgroup
    /// memory).
    pub(crate) fn linear(k: usize, wide: bool) -> Depth {
        let kw = words(k);
        let (_, slices) = linear_split(kw, wide);
        let slice = kw.div_ceil(slices as usize) as u64;
        let pairs = (LINEAR_ROWS * LINEAR_COLUMNS).div_ceil(slices) as u64;
        Depth::Fixed(slice + pairs)
    }

    /// `norm.wgsl`: the residual and the product read, then γ, β read and the row written,
    /// `N / 256` columns a thread each (the statistics stay in workgroup memory).
    pub(crate) fn norm(n: usize) -> Depth {
        Depth::Fixed(2 * n.div_ceil(NORM_THREADS) as u64)
    }

    /// `attention.wgsl`.
    pub(crate) fn attention(d_k: usize, d_v: usize, keys: Keys) -> Depth {
        Depth::Attention {
            dk: d_k as u64,
            dv: d_v as u64,
            keys,
        }
    }

    /// `history.wgsl`: one read per thread.
    pub(crate) fn history() -> Depth {
        Depth::Fixed(1)
    }

    /// `select_part.wgsl`: one pass over its part of the vocabulary, every 256th word
    /// (the maximum, the sum and the selection then read registers).
    pub(crate) fn select_part(vocab: usize) -> Depth {
        let chunk = vocab.min(SELECT_CHUNK);
        Depth::Fixed(chunk.div_ceil(SELECT_WG) as u64)
    }

    /// `select_merge.wgsl`: the parts' maxima, their sums, then one pass per candidate
    /// over the parts' candidates.
    pub(crate) fn select_merge(vocab: usize, k: usize) -> Depth {
        let parts = select_parts(vocab);
        let stats = 2 * parts.div_ceil(SELECT_WG) as u64;
        Depth::Fixed(stats + k as u64 * (parts * k).div_ceil(SELECT_WG) as u64)
    }
}

/// The products' words of inner dimension: four inputs of a column to a word (weights.rs).
pub(crate) fn words(k: usize) -> usize {
    k.div_ceil(4)
}

/// Threads per workgroup of `embed.wgsl` and `norm.wgsl`.
const EMBED_THREADS: usize = 256;
const NORM_THREADS: usize = 256;

/// Threads per workgroup of `attention.wgsl`, and the threads that share a key (scores) or
/// four output dimensions (values).
const ATTENTION_THREADS: u32 = 256;
const ATTENTION_SCORE_PARTS: u32 = 16;
const ATTENTION_VALUE_PARTS: u32 = 16;

/// Threads per workgroup of the top-k selection.
const SELECT_WG: usize = 256;

/// Words of the vocabulary per workgroup of the top-k's first pass: four per thread, so
/// that a large vocabulary is spread over many workgroups (37,000 words: 37).
const SELECT_CHUNK: usize = 1024;

/// Workgroups per row of the top-k's first pass.
pub(crate) fn select_parts(vocab: usize) -> usize {
    vocab.div_ceil(SELECT_CHUNK).max(1)
}

/// An f32 as a WGSL literal that reads back to the same value.
pub(crate) fn float(x: f32) -> String {
    format!("{x:e}f")
}

/// The products' weight access for each storage: `column_scale(j)`, the factor of column
/// `j`'s sum, and `weight(i)`, word `i` (four inputs of a column) as a vec4.
fn weights_access(storage: WeightStorage) -> &'static str {
    match storage {
        WeightStorage::F32 => {
            "fn column_scale(j: u32) -> f32 { return 1.0; }
fn weight(i: u32) -> vec4<f32> { return w[i]; }"
        }
        WeightStorage::F16 => {
            "fn column_scale(j: u32) -> f32 { return 1.0; }
fn weight(i: u32) -> vec4<f32> { return vec4<f32>(w[i]); }"
        }
        // Integers times x are summed, and the sum scaled once; the biases are followed by
        // the column scales (weights.rs).
        WeightStorage::Int8 => {
            "fn column_scale(j: u32) -> f32 { return b[N + j]; }
fn weight(i: u32) -> vec4<f32> {
    let s = bitcast<i32>(w[i]);
    return vec4<f32>(f32((s << 24u) >> 24u), f32((s << 16u) >> 24u), f32((s << 8u) >> 24u), f32(s >> 24u));
}"
        }
    }
}

/// WGSL `name(at: u32, n: u32) -> vec4<f32>`: `array[at..at + 4]` with the components
/// from the `n`-th on zero (`n` ≥ 1 values left in the row or head). One per array: WGSL
/// passes no storage arrays to functions.
fn guarded_vec4(name: &str, array: &str) -> String {
    format!(
        "fn {name}(at: u32, n: u32) -> vec4<f32> {{
    return vec4<f32>({array}[at], select({array}[at + 1u], 0.0, n <= 1u), select({array}[at + 2u], 0.0, n <= 2u), select({array}[at + 3u], 0.0, n <= 3u));
}}"
    )
}

/// The products' input `x [rows, K]` at binding 1 and `xload(row, i)`, its inputs
/// `4i..4i+3` of `row` as a vec4: one load where `K` is a multiple of four, else four
/// (zero past `K`, where the weights are zero padding too).
fn x_access(k: usize) -> String {
    if k.is_multiple_of(4) {
        "@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
fn xload(row: u32, i: u32) -> vec4<f32> { return x[row * KW + i]; }"
            .to_string()
    } else {
        format!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;
{}
fn xload(row: u32, i: u32) -> vec4<f32> {{ return x4(row * K + 4u * i, K - 4u * i); }}",
            guarded_vec4("x4", "x")
        )
    }
}

/// The attention's queries (binding 4) and keys and values (binding 5), read four
/// dimensions at a time: `qload(o, i)` is `q[o + 4i ..]`, `kvload(o, i, len)` is
/// `kv[o + 4i ..]` with dimensions past `len` zero. One vec4 load where every offset is a
/// multiple of four, else four loads.
fn attention_access(aligned: bool) -> String {
    if aligned {
        "@group(0) @binding(4) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read> kv: array<vec4<f32>>;
fn qload(o: u32, i: u32) -> vec4<f32> { return q[o / 4u + i]; }
fn kvload(o: u32, i: u32, len: u32) -> vec4<f32> { return kv[o / 4u + i]; }"
            .to_string()
    } else {
        format!(
            "@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> kv: array<f32>;
{}
{}
fn qload(o: u32, i: u32) -> vec4<f32> {{ return q4(o + 4u * i, DK - 4u * i); }}
fn kvload(o: u32, i: u32, len: u32) -> vec4<f32> {{ return kv4(o + 4u * i, len - 4u * i); }}",
            guarded_vec4("q4", "q"),
            guarded_vec4("kv4", "kv")
        )
    }
}

/// A shader's source: the shared declarations, then `template` with each `{NAME}` replaced.
fn fill(template: &str, vars: &[(&str, String)], f16: bool) -> String {
    let mut s = String::new();
    if f16 {
        s.push_str("enable f16;\n");
    }
    s.push_str(COMMON);
    s.push_str(template);
    for (name, value) in vars {
        s = s.replace(&format!("{{{name}}}"), value);
    }
    debug_assert!(
        !s.contains("{K}") && !s.contains("{N}"),
        "unfilled constant"
    );
    s
}

/// What a plain product does with its results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Store {
    /// `out[row, j] = v`.
    Plain,
    /// `out[row, j] = max(0, v)` (the FFN's inner layer, §3.3).
    Relu,
    /// `out[row, j] = v·σ(v)` (the FFN's inner layer of swish models).
    Swish,
    /// Columns `< q` to the queries `[rows, q]`, the rest (keys and values) into the
    /// self-attention cache at the step's position: the decoder's fused Q/K/V product.
    Split { q: u32, cap: u32 },
}

/// Where an attention's keys and values are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Keys {
    /// The rows of the row's source (encoder self-attention, encoder–decoder attention).
    Source,
    /// The decoder's cache, positions `0..=t`, through the row's history (beam reordering).
    Cache { cap: u32 },
}

/// The attention's layout: query stride and offset, key/value stride and offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct AttentionLayout {
    pub qs: u32,
    pub qo: u32,
    pub kvs: u32,
    pub ko: u32,
    pub vo: u32,
}

/// Compiled pipelines by source: the same shader serves every layer of its shape.
pub(crate) struct Shaders {
    gpu: Gpu,
    storage: WeightStorage,
    pipelines: RefCell<HashMap<String, wgpu::ComputePipeline>>,
}

impl Shaders {
    pub(crate) fn new(gpu: &Gpu, storage: WeightStorage) -> Shaders {
        Shaders {
            gpu: gpu.clone(),
            storage,
            pipelines: RefCell::new(HashMap::new()),
        }
    }

    fn pipeline(&self, source: String) -> wgpu::ComputePipeline {
        if let Some(p) = self.pipelines.borrow().get(&source) {
            return p.clone();
        }
        let device = &self.gpu.device;
        let descriptor = wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
        };
        let module = if self.gpu.loop_bounds {
            device.create_shader_module(descriptor)
        } else {
            // Natively naga would otherwise wrap every loop in an iteration counter, which
            // can keep the driver from unrolling the accumulator loops (browsers decide for
            // themselves: the WebGPU backend ignores this). Bounds checks stay on.
            // SAFETY: every loop of these shaders ends: each steps a counter by a positive
            // constant (or halves it) towards a bound fixed when the shader is filled in,
            // or read from the step's parameters or key count, never written in the loop.
            unsafe {
                device.create_shader_module_trusted(
                    descriptor,
                    wgpu::ShaderRuntimeChecks {
                        force_loop_bounding: false,
                        ..wgpu::ShaderRuntimeChecks::checked()
                    },
                )
            }
        };
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        self.pipelines.borrow_mut().insert(source, pipeline.clone());
        pipeline
    }

    fn f16(&self) -> bool {
        self.storage == WeightStorage::F16
    }

    /// The products' weight type and access (`weights_access`).
    fn weight_vars(&self) -> [(&'static str, String); 2] {
        let ty = match self.storage {
            WeightStorage::F32 => "vec4<f32>",
            WeightStorage::F16 => "vec4<f16>",
            WeightStorage::Int8 => "u32",
        };
        [
            ("WTYPE", ty.to_string()),
            ("WEIGHTS", weights_access(self.storage).to_string()),
        ]
    }

    /// Embedding × scale + position (+ focus).
    pub(crate) fn embed(&self, d: usize, vocab: usize, scale: f32) -> wgpu::ComputePipeline {
        // An int8 table is `[vocab, d/4]` words, then the row scales (weights.rs).
        let table = match self.storage {
            WeightStorage::Int8 => format!(
                "@group(0) @binding(2) var<storage, read> table: array<u32>;
fn embedding(v: u32, i: u32) -> f32 {{
    let word = bitcast<i32>(table[v * (D / 4u) + i / 4u]);
    let q = (word << (24u - 8u * (i % 4u))) >> 24u;
    return f32(q) * bitcast<f32>(table[{vocab}u * (D / 4u) + v]);
}}"
            ),
            _ => "@group(0) @binding(2) var<storage, read> table: array<f32>;
fn embedding(v: u32, i: u32) -> f32 { return table[v * D + i]; }"
                .to_string(),
        };
        self.pipeline(fill(
            EMBED,
            &[
                ("TABLE", table),
                ("D", d.to_string()),
                ("SCALE", float(scale)),
            ],
            false,
        ))
    }

    /// `x [rows, k] · w [k, n] + b`, then `store`, for few rows or many (`wide`).
    pub(crate) fn linear(
        &self,
        k: usize,
        n: usize,
        store: Store,
        wide: bool,
    ) -> wgpu::ComputePipeline {
        let (bindings, body) = match store {
            Store::Plain | Store::Relu | Store::Swish => (
                "@group(0) @binding(4) var<storage, read_write> out: array<f32>;".to_string(),
                format!(
                    "fn store(row: u32, j: u32, v: f32) {{ out[row * N + j] = {}; }}",
                    match store {
                        Store::Relu => "max(v, 0.0)",
                        // v / (1 + e^-v), as Activation::apply defines it.
                        Store::Swish => "v / (1.0 + exp(-v))",
                        _ => "v",
                    }
                ),
            ),
            Store::Split { q, cap } => (
                "@group(0) @binding(4) var<storage, read_write> q: array<f32>;\n\
                 @group(0) @binding(5) var<storage, read_write> cache: array<f32>;"
                    .to_string(),
                format!(
                    "fn store(row: u32, j: u32, v: f32) {{\n\
                     \x20   if (j < {q}u) {{ q[row * {q}u + j] = v; }}\n\
                     \x20   else {{ cache[(row * {cap}u + p.t) * (N - {q}u) + j - {q}u] = v; }}\n}}"
                ),
            ),
        };
        let kw = words(k);
        let (lanes, slices) = linear_split(kw, wide);
        self.pipeline(fill(
            LINEAR,
            &[
                ("K", k.to_string()),
                ("N", n.to_string()),
                ("RB", LINEAR_ROWS.to_string()),
                ("CPT", LINEAR_COLUMNS.to_string()),
                ("LANES", lanes.to_string()),
                ("SLICES", slices.to_string()),
                ("KW", kw.to_string()),
                ("XLOAD", x_access(k)),
                ("BINDINGS", bindings),
                ("STORE", body),
            ]
            .into_iter()
            .chain(self.weight_vars())
            .collect::<Vec<_>>(),
            self.f16(),
        ))
    }

    /// `res = LayerNorm(res + y)` over rows of `n`.
    pub(crate) fn norm(&self, n: usize) -> wgpu::ComputePipeline {
        self.pipeline(fill(NORM, &[("N", n.to_string())], false))
    }

    /// Multi-head attention of each row, a workgroup per (head, row).
    pub(crate) fn attention(
        &self,
        heads: usize,
        d_k: usize,
        d_v: usize,
        layout: AttentionLayout,
        keys: Keys,
    ) -> wgpu::ComputePipeline {
        let (entry, cap) = match keys {
            Keys::Source => (
                "fn key_count(r: u32) -> u32 { _ = arrayLength(&history); return sources[rows[r].src].len; }\n\
                 fn key_row(r: u32, j: u32) -> u32 { return sources[rows[r].src].offset + j; }",
                1,
            ),
            Keys::Cache { cap } => (
                "fn key_count(r: u32) -> u32 { _ = arrayLength(&sources); _ = arrayLength(&rows); return p.t + 1u; }\n\
                 fn key_row(r: u32, j: u32) -> u32 { return history[r * CAP + j] * CAP + j; }",
                cap,
            ),
        };
        let scale = (d_k as f64).sqrt() as f32;
        let AttentionLayout {
            qs,
            qo,
            kvs,
            ko,
            vo,
        } = layout;
        let aligned = [d_k as u32, d_v as u32, qs, qo, kvs, ko, vo]
            .iter()
            .all(|v| v.is_multiple_of(4));
        self.pipeline(fill(
            ATTENTION,
            &[
                ("KEYS", format!("{keys:?}")),
                ("ENTRY", entry.to_string()),
                ("H", heads.to_string()),
                ("DK", d_k.to_string()),
                ("DV", d_v.to_string()),
                ("QS", layout.qs.to_string()),
                ("QO", layout.qo.to_string()),
                ("KVS", layout.kvs.to_string()),
                ("KO", layout.ko.to_string()),
                ("VO", layout.vo.to_string()),
                ("CAP", cap.to_string()),
                ("MAXN", MAX_KEYS.to_string()),
                ("SCALE", float(scale)),
                ("LOADS", attention_access(aligned)),
            ],
            false,
        ))
    }

    /// Each row's history of cache rows after beam reordering.
    pub(crate) fn history(&self, cap: u32) -> wgpu::ComputePipeline {
        self.pipeline(fill(HISTORY, &[("CAP", cap.to_string())], false))
    }

    /// Log-softmax and top-k, first pass: each part's statistics and `k` best allowed
    /// tokens.
    pub(crate) fn select_part(&self, vocab: usize, k: usize) -> wgpu::ComputePipeline {
        self.pipeline(fill(
            SELECT_PART,
            &[
                ("V", vocab.to_string()),
                ("KSEL", k.to_string()),
                ("WORDS", vocab.div_ceil(32).to_string()),
                ("PAD", transduce::tokenizer::PAD.to_string()),
                ("BOS", transduce::tokenizer::BOS.to_string()),
                ("EOS", transduce::tokenizer::EOS.to_string()),
                ("CHUNK", SELECT_CHUNK.to_string()),
                ("PARTS", select_parts(vocab).to_string()),
            ],
            false,
        ))
    }

    /// Log-softmax and top-k, second pass: the parts combined into each row's `k` best.
    pub(crate) fn select_merge(&self, vocab: usize, k: usize) -> wgpu::ComputePipeline {
        self.pipeline(fill(
            SELECT_MERGE,
            &[
                ("KSEL", k.to_string()),
                ("PARTS", select_parts(vocab).to_string()),
                ("EOS", transduce::tokenizer::EOS.to_string()),
            ],
            false,
        ))
    }
}
