//! The WGSL kernels, their constants filled in per model shape, compiled once.
//!
//! Each kernel is written for the sizes of the model it serves (d_model, heads, d_ff,
//! vocabulary): loops have constant bounds and the compiler unrolls what it can. Only what
//! changes between steps (rows, position) is read from a uniform.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::device::Gpu;
use crate::weights::WeightStorage;

const COMMON: &str = include_str!("kernels/common.wgsl");
const EMBED: &str = include_str!("kernels/embed.wgsl");
const LINEAR: &str = include_str!("kernels/linear.wgsl");
const LINEAR_NORM: &str = include_str!("kernels/linear_norm.wgsl");
const ATTENTION: &str = include_str!("kernels/attention.wgsl");
const HISTORY: &str = include_str!("kernels/history.wgsl");
const SELECT_PART: &str = include_str!("kernels/select_part.wgsl");
const SELECT_MERGE: &str = include_str!("kernels/select_merge.wgsl");

/// Threads per workgroup of every kernel but the top-k selection.
pub(crate) const WG: u32 = 64;
/// Most keys one attention can see: its scores are held in workgroup memory.
pub(crate) const MAX_KEYS: usize = 1024;
/// Rows per workgroup of the plain products.
pub(crate) const LINEAR_ROWS: u32 = 4;
/// Columns per thread of the plain products.
pub(crate) const LINEAR_COLUMNS: u32 = 2;
/// Column lanes × slices of the inner dimension: the plain products' 256 threads.
pub(crate) const LINEAR_LANES: u32 = 32;
pub(crate) const LINEAR_SLICES: u32 = 8;
/// Rows per workgroup of the products followed by LayerNorm.
pub(crate) const NORM_ROWS: u32 = 2;
/// Column lanes × slices of the inner dimension of the products followed by LayerNorm, for
/// rows of `n` columns: the other slices' partial sums of a whole row meet in workgroup
/// memory (`(slices - 1) · n` floats), which must stay within WebGPU's 16 KiB, so wide
/// rows take fewer slices.
pub(crate) fn norm_split(n: usize) -> (u32, u32) {
    if n <= 512 { (32, 8) } else { (64, 4) }
}

/// A kernel's serial depth: the iterations, with loads from global memory, of the longest
/// chain of loops one of its threads runs. At batch 1 a decoder step is bound by latency,
/// not arithmetic, and the sum of its dispatches' depths is what bounds its time
/// (`transduce bench` prints it as `serial depth`). Each kernel's figure is read off its
/// WGSL loops below, next to the kernel it describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Depth {
    Fixed(u64),
    /// An attention over `n` keys (the cache's `t + 1` or the source's length): the
    /// scores, `⌈n / 64⌉ · ⌈DK / 4⌉` loads (four threads share a key), then the weighted
    /// values, `⌈DV / 64⌉ · ⌈n / 4⌉` (four threads share a dimension).
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
                let lanes = (ATTENTION_THREADS / ATTENTION_PARTS) as u64;
                let parts = ATTENTION_PARTS as u64;
                n.div_ceil(score_lanes) * dk.div_ceil(score_parts)
                    + dv.div_ceil(lanes) * n.div_ceil(parts)
            }
        }
    }

    /// `embed.wgsl`: a thread writes every 64th of the `d` columns.
    pub(crate) fn embed(d: usize) -> Depth {
        Depth::Fixed(d.div_ceil(WG as usize) as u64)
    }

    /// `linear.wgsl`: one slice of the inner loop, then the epilogue's stores: `RB × CPT`
    /// pairs shared by the slices (each reading its bias and column scale; the partial
    /// sums come from workgroup memory).
    pub(crate) fn linear(k: usize, storage: WeightStorage) -> Depth {
        let slice = inner_words(k, storage).div_ceil(LINEAR_SLICES as usize) as u64;
        let pairs = (LINEAR_ROWS * LINEAR_COLUMNS).div_ceil(LINEAR_SLICES) as u64;
        Depth::Fixed(slice + pairs)
    }

    /// `linear_norm.wgsl`: one slice of the inner loop, then per row of `RB` the
    /// residual's reads and the writes through γ and β, `N / 256` columns a thread (the
    /// slices' sums and the statistics stay in workgroup memory).
    pub(crate) fn linear_norm(k: usize, n: usize, storage: WeightStorage) -> Depth {
        let (_, slices) = norm_split(n);
        let slice = inner_words(k, storage).div_ceil(slices as usize) as u64;
        let per_thread = n.div_ceil(NORM_THREADS) as u64;
        Depth::Fixed(slice + NORM_ROWS as u64 * 2 * per_thread)
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

    /// `select_part.wgsl`: over its part of the vocabulary, the maximum, the sum of
    /// exponentials, then one pass per candidate, each over every 256th word.
    pub(crate) fn select_part(vocab: usize, k: usize) -> Depth {
        let chunk = vocab.min(SELECT_CHUNK);
        Depth::Fixed((2 + k as u64) * chunk.div_ceil(SELECT_WG) as u64)
    }

    /// `select_merge.wgsl`: the parts' maxima, their sums, then one pass per candidate
    /// over the parts' candidates.
    pub(crate) fn select_merge(vocab: usize, k: usize) -> Depth {
        let parts = select_parts(vocab);
        let stats = 2 * parts.div_ceil(SELECT_WG) as u64;
        Depth::Fixed(stats + k as u64 * (parts * k).div_ceil(SELECT_WG) as u64)
    }
}

/// The products' loop over the inner dimension: `K` values, or `K / 4` words of int8.
fn inner_words(k: usize, storage: WeightStorage) -> usize {
    match storage {
        WeightStorage::Int8 => k / 4,
        _ => k,
    }
}

/// Threads per workgroup of `linear_norm.wgsl`.
const NORM_THREADS: usize = 256;

/// Threads per workgroup of `attention.wgsl`, and the threads that share a key (scores) or
/// an output dimension (values).
const ATTENTION_THREADS: u32 = 256;
const ATTENTION_SCORE_PARTS: u32 = 16;
const ATTENTION_PARTS: u32 = 4;

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

/// The products' weight access for each storage: declarations (`column_scale(j)`, the
/// factor of column `j`'s sum) and the loop over the inner dimension that adds
/// `x[row r, k] · w[k, col0 + c·LANES]` to `acc[r][c]`, for the thread's slice `kb..ke`
/// of the inner dimension (values, or words of int8).
fn weights_access(storage: WeightStorage) -> (&'static str, &'static str) {
    match storage {
        WeightStorage::F32 | WeightStorage::F16 => (
            "fn column_scale(j: u32) -> f32 { return 1.0; }",
            "for (var k = kb; k < ke; k++) {
        var wv: array<f32, CPT>;
        for (var c = 0u; c < CPT; c++) {
            let j = min(col0 + c * LANES, N - 1u);
            wv[c] = f32(w[k * N + j]);
        }
        for (var r = 0u; r < RB; r++) {
            let xv = x[xrow[r] + k];
            for (var c = 0u; c < CPT; c++) {
                acc[r][c] = fma(xv, wv[c], acc[r][c]);
            }
        }
    }",
        ),
        // Word (i, j) holds the int8 weights of inputs 4i..4i+3 of column j; the biases are
        // followed by the column scales (weights.rs). Integers times x are summed, and the
        // sum scaled once.
        WeightStorage::Int8 => (
            "fn column_scale(j: u32) -> f32 { return b[N + j]; }
fn widen(word: u32) -> vec4<f32> {
    let s = bitcast<i32>(word);
    return vec4<f32>(f32((s << 24u) >> 24u), f32((s << 16u) >> 24u), f32((s << 8u) >> 24u), f32(s >> 24u));
}",
            "for (var k4 = kb; k4 < ke; k4++) {
        var wv: array<vec4<f32>, CPT>;
        for (var c = 0u; c < CPT; c++) {
            let j = min(col0 + c * LANES, N - 1u);
            wv[c] = widen(w[k4 * N + j]);
        }
        for (var r = 0u; r < RB; r++) {
            let o = xrow[r] + 4u * k4;
            let xv = vec4<f32>(x[o], x[o + 1u], x[o + 2u], x[o + 3u]);
            for (var c = 0u; c < CPT; c++) {
                acc[r][c] += dot(xv, wv[c]);
            }
        }
    }",
        ),
    }
}

/// A kernel's source: the shared declarations, then `template` with each `{NAME}` replaced.
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

/// Compiled pipelines by source: the same kernel serves every layer of its shape.
pub(crate) struct Kernels {
    gpu: Gpu,
    storage: WeightStorage,
    pipelines: RefCell<HashMap<String, wgpu::ComputePipeline>>,
}

impl Kernels {
    pub(crate) fn new(gpu: &Gpu, storage: WeightStorage) -> Kernels {
        Kernels {
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
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: None,
            source: wgpu::ShaderSource::Wgsl(source.as_str().into()),
        });
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

    /// The products' weight variables and their access (`weights_access`).
    fn weight_vars(&self) -> [(&'static str, String); 3] {
        let (decls, loop_) = weights_access(self.storage);
        let ty = match self.storage {
            WeightStorage::F32 => "f32",
            WeightStorage::F16 => "f16",
            WeightStorage::Int8 => "u32",
        };
        [
            ("WTYPE", ty.to_string()),
            ("WEIGHTS", decls.to_string()),
            ("ACCUMULATE", loop_.to_string()),
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

    /// `x [rows, k] · w [k, n] + b`, then `store`.
    pub(crate) fn linear(&self, k: usize, n: usize, store: Store) -> wgpu::ComputePipeline {
        let (bindings, body) = match store {
            Store::Plain | Store::Relu => (
                "@group(0) @binding(4) var<storage, read_write> out: array<f32>;".to_string(),
                format!(
                    "fn store(row: u32, j: u32, v: f32) {{ out[row * N + j] = {}; }}",
                    if store == Store::Relu {
                        "max(v, 0.0)"
                    } else {
                        "v"
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
        self.pipeline(fill(
            LINEAR,
            &[
                ("K", k.to_string()),
                ("N", n.to_string()),
                ("RB", LINEAR_ROWS.to_string()),
                ("CPT", LINEAR_COLUMNS.to_string()),
                ("LANES", LINEAR_LANES.to_string()),
                ("SLICES", LINEAR_SLICES.to_string()),
                ("KW", inner_words(k, self.storage).to_string()),
                ("BINDINGS", bindings),
                ("STORE", body),
            ]
            .into_iter()
            .chain(self.weight_vars())
            .collect::<Vec<_>>(),
            self.f16(),
        ))
    }

    /// `res = LayerNorm(res + x [rows, k] · w [k, n] + b)`.
    pub(crate) fn linear_norm(&self, k: usize, n: usize) -> wgpu::ComputePipeline {
        self.pipeline(fill(
            LINEAR_NORM,
            &[
                ("K", k.to_string()),
                ("N", n.to_string()),
                ("RB", NORM_ROWS.to_string()),
                ("CPT", (n as u32).div_ceil(norm_split(n).0).to_string()),
                ("LANES", norm_split(n).0.to_string()),
                ("SLICES", norm_split(n).1.to_string()),
                ("KW", inner_words(k, self.storage).to_string()),
            ]
            .into_iter()
            .chain(self.weight_vars())
            .collect::<Vec<_>>(),
            self.f16(),
        ))
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
