//! The model's weights in GPU buffers, uploaded once from the host decoder's arrays.
//!
//! Matrices and embedding tables are stored in the narrowest form that holds every weight
//! exactly, so the GPU computes with the very values the host decoder's f32 arithmetic does:
//! - int8 with one scale per output column (per vocabulary row for the tables) when every
//!   weight is `q·scale` (the int8 bundles the page ships): a quarter of f32's memory and
//!   bandwidth; the shaders widen four packed weights at a time and scale the sum once;
//! - else f16 when the device has `shader-f16` and every weight is an f16 (f16 bundles);
//! - else f32.
//!
//! Biases, LayerNorm and learned positions stay f32.

use std::collections::HashMap;

use transduce::HostModel;
use transduce::host::int8::Int8Matrix;
use transduce::host::matrix::{Matrix, transpose};
use transduce::host::{DecoderLayer, EncoderLayer, Norm, TableForm};

use crate::device::Gpu;

/// How matrices and embedding tables are held on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightStorage {
    F32,
    /// Needs `shader-f16`.
    F16,
    /// Four weights per `u32`, with per-column scales (shaders.rs says where).
    Int8,
}

impl std::fmt::Display for WeightStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WeightStorage::F32 => "f32",
            WeightStorage::F16 => "f16",
            WeightStorage::Int8 => "int8",
        })
    }
}

/// A weight matrix `[k, n]` and its bias (zeros where the layer has none). `w` is `[⌈k/4⌉,
/// n]` words of four weights, inputs 4i..4i+3 of a column, so that a kernel's load brings
/// four: vec4s of f32 or f16 (zero past `k`), or in int8 storage four bytes, lowest first,
/// and then `b` holds the `n` biases followed by the `n` column scales.
pub(crate) struct Linear {
    pub k: usize,
    pub n: usize,
    pub w: wgpu::Buffer,
    pub b: wgpu::Buffer,
}

pub(crate) struct LayerNorm {
    pub gamma: wgpu::Buffer,
    pub beta: wgpu::Buffer,
}

pub(crate) struct EncoderWeights {
    pub qkv: Linear,
    pub o: Linear,
    pub attn_norm: LayerNorm,
    pub fc1: Linear,
    pub fc2: Linear,
    pub ffn_norm: LayerNorm,
}

pub(crate) struct DecoderWeights {
    pub qkv: Linear,
    pub o: Linear,
    pub self_norm: LayerNorm,
    pub cross_q: Linear,
    pub cross_kv: Linear,
    pub cross_o: Linear,
    pub cross_norm: LayerNorm,
    pub fc1: Linear,
    pub fc2: Linear,
    pub ffn_norm: LayerNorm,
}

pub(crate) struct Weights {
    /// `[vocab, d_model]`; in int8 storage `[vocab, d_model/4]` words followed by the
    /// `vocab` row scales (as f32 bits).
    pub src_embedding: wgpu::Buffer,
    pub tgt_embedding: wgpu::Buffer,
    /// The pre-softmax projection `[d_model, vocab]` (the table transposed, so a thread's
    /// neighbours read its neighbouring columns).
    pub output: Linear,
    pub encoder: Vec<EncoderWeights>,
    pub decoder: Vec<DecoderWeights>,
    pub storage: WeightStorage,
    /// Bytes uploaded.
    pub bytes: u64,
}

/// Every value survives a round trip through f16.
fn f16_exact(values: &[f32]) -> bool {
    values
        .iter()
        .all(|&v| half::f16::from_f32(v).to_f32().to_bits() == v.to_bits())
}

/// Per column of a row-major `[k, n]` matrix: the scale `s` and integers `q` (`[n, k]`,
/// one row per column) with `q·s` equal to every weight, if there are such (an int8
/// bundle's weights). The scale is searched next to max|w|/127, where the bundle writer put it.
fn int8_exact(values: &[f32], k: usize, n: usize) -> Option<(Vec<i8>, Vec<f32>)> {
    if !k.is_multiple_of(4) {
        return None;
    }
    let mut q = vec![0i8; n * k];
    let mut scales = Vec::with_capacity(n);
    for j in 0..n {
        let column = (0..k).map(|i| values[i * n + j]);
        let max = column.clone().fold(0.0f32, |m, v| m.max(v.abs()));
        if !max.is_finite() {
            return None;
        }
        let row = &mut q[j * k..(j + 1) * k];
        let fits = |s: f32, row: &mut [i8]| {
            column.clone().zip(row.iter_mut()).all(|(v, q)| {
                let r = if s == 0.0 { 0.0 } else { (v / s).round() };
                *q = r as i8;
                r.abs() <= 127.0 && r * s == v
            })
        };
        let guess = max / 127.0;
        let s = [0i32, 1, -1, 2, -2]
            .into_iter()
            .map(|d| f32::from_bits(guess.to_bits().wrapping_add_signed(d)))
            .find(|&s| s.is_finite() && s >= 0.0 && fits(s, row))?;
        scales.push(s);
    }
    Some((q, scales))
}

/// Word rows `rows` of a form `[n, k]` (`k` a multiple of 4) packed as `[k/4, n]` words
/// (word (i, j) holds row j's bytes 4i..4i+4, lowest first), appended to `out` as bytes.
fn pack_word_rows(
    form: &Form,
    k: usize,
    n: usize,
    rows: std::ops::Range<usize>,
    out: &mut Vec<u8>,
) {
    for i in rows {
        for j in 0..n {
            out.extend((0..4).map(|t| form.at(k, j, 4 * i + t) as u8));
        }
    }
}

/// Row-major `[k, n]` values as `[⌈k/4⌉, n]` words of four (word (i, j) holds rows
/// 4i..4i+3 of column j, zero past `k`), flattened.
fn pack_words(values: &[f32], k: usize, n: usize) -> Vec<f32> {
    let mut words = vec![0.0f32; k.div_ceil(4) * n * 4];
    for (row, values) in values.chunks_exact(n.max(1)).enumerate().take(k) {
        for (j, &v) in values.iter().enumerate() {
            words[((row / 4) * n + j) * 4 + row % 4] = v;
        }
    }
    words
}

/// Where an int8 form comes from: a layer's matrix (by its address in the host model), an
/// embedding table, or the output projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Matrix(usize),
    SrcTable,
    TgtTable,
    Output,
}

fn matrix_source(m: &Matrix) -> Source {
    Source::Matrix(m as *const Matrix as usize)
}

/// An int8 form: `[n, k]` rows and their scales, found in f32 values ([`int8_exact`]), or
/// the host model's own (read from an int8 bundle), packed straight from it.
enum Form<'a> {
    Rows(Vec<i8>, Vec<f32>),
    /// A matrix `[k, n]`, per output column.
    Held(&'a Int8Matrix),
    /// A table's int8 rows `[vocab, d]` and their scales.
    Table(&'a [i8], &'a [f32]),
}

impl Form<'_> {
    /// Byte `i` of row `j` (`[n, k]`: row j is output column j, or table row j).
    fn at(&self, k: usize, j: usize, i: usize) -> i8 {
        match self {
            Form::Rows(q, _) => q[j * k + i],
            Form::Held(m) => m.at(i, j),
            Form::Table(rows, _) => rows[j * k + i],
        }
    }

    fn scales(&self) -> Vec<f32> {
        match self {
            Form::Rows(_, s) => s.clone(),
            Form::Table(_, s) => s.to_vec(),
            Form::Held(m) => (0..m.n).map(|j| m.scale(j)).collect(),
        }
    }
}

/// The int8 forms of every matrix and table, found once when the storage is chosen and
/// uploaded from there.
type Int8Forms<'a> = HashMap<Source, Form<'a>>;

/// Bytes of a packed piece uploaded at once.
const PIECE: usize = 1 << 20;

struct Uploader<'a, 'h> {
    gpu: &'a Gpu,
    storage: WeightStorage,
    /// Empty unless the storage is int8.
    int8: Int8Forms<'h>,
    bytes: u64,
}

impl Uploader<'_, '_> {
    fn buffer(&mut self, bytes: &[u8]) -> wgpu::Buffer {
        self.bytes += bytes.len() as u64;
        self.gpu.storage_buffer(bytes)
    }

    fn floats(&mut self, values: &[f32]) -> wgpu::Buffer {
        self.buffer(bytemuck::cast_slice(values))
    }

    fn halves(&mut self, values: &[f32]) -> wgpu::Buffer {
        let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
        // Bindings are sized in multiples of 4 bytes (vec4<f16> words are 8 already).
        let mut bytes = bytemuck::cast_slice::<half::f16, u8>(&halves).to_vec();
        bytes.resize(bytes.len().next_multiple_of(4), 0);
        self.buffer(&bytes)
    }

    fn linear(&mut self, m: &Matrix) -> Linear {
        self.linear_from(
            m.rows,
            m.cols,
            m.bias.as_deref(),
            || m.data.clone(),
            matrix_source(m),
        )
    }

    /// A matrix `[k, n]` with `bias`: its f32 values from `values` (f32 and f16 storage), or
    /// its int8 form found under `source`.
    fn linear_from(
        &mut self,
        k: usize,
        n: usize,
        bias: Option<&[f32]>,
        values: impl FnOnce() -> Vec<f32>,
        source: Source,
    ) -> Linear {
        let mut bias = bias.map_or_else(|| vec![0.0; n], <[f32]>::to_vec);
        let w = match self.storage {
            WeightStorage::F32 => self.floats(&pack_words(&values(), k, n)),
            WeightStorage::F16 => self.halves(&pack_words(&values(), k, n)),
            WeightStorage::Int8 => {
                let form = self.int8.remove(&source).expect("found by Weights::upload");
                bias.extend_from_slice(&form.scales());
                // `[k/4, n]` words: word (i, j) holds row j's bytes 4i..4i+4, lowest first,
                // packed and uploaded a piece of whole word rows at a time.
                let row_bytes = 4 * n;
                let rows_per_piece = (PIECE / row_bytes.max(1)).max(1);
                self.bytes += (k / 4 * row_bytes) as u64;
                self.gpu
                    .storage_buffer_in_pieces(k / 4 * row_bytes, |write| {
                        let mut piece: Vec<u8> = Vec::with_capacity(rows_per_piece * row_bytes);
                        for i0 in (0..k / 4).step_by(rows_per_piece) {
                            piece.clear();
                            pack_word_rows(
                                &form,
                                k,
                                n,
                                i0..(i0 + rows_per_piece).min(k / 4),
                                &mut piece,
                            );
                            write(i0 * row_bytes, &piece);
                        }
                    })
            }
        };
        Linear {
            k,
            n,
            w,
            b: self.floats(&bias),
        }
    }

    /// An embedding table `[vocab, d]`: f32, or int8 rows (each row's bytes, four to a
    /// word) then their scales.
    fn table(
        &mut self,
        f32_values: &[f32],
        source: Source,
        vocab: usize,
        d: usize,
    ) -> wgpu::Buffer {
        if self.storage != WeightStorage::Int8 {
            return self.floats(f32_values);
        }
        let form = &self.int8[&source];
        let rows_per_piece = (PIECE / d.max(1)).max(1);
        let len = vocab * d + 4 * vocab;
        self.bytes += len as u64;
        self.gpu.storage_buffer_in_pieces(len, |write| {
            let mut piece: Vec<u8> = Vec::with_capacity(rows_per_piece * d);
            for v0 in (0..vocab).step_by(rows_per_piece) {
                piece.clear();
                for v in v0..(v0 + rows_per_piece).min(vocab) {
                    piece.extend((0..d).map(|i| form.at(d, v, i) as u8));
                }
                write(v0 * d, &piece);
            }
            let scales: Vec<u8> = form
                .scales()
                .iter()
                .flat_map(|s| s.to_bits().to_le_bytes())
                .collect();
            write(vocab * d, &scales);
        })
    }

    fn norm(&mut self, n: &Norm) -> LayerNorm {
        LayerNorm {
            gamma: self.floats(&n.gamma),
            beta: self.floats(&n.beta),
        }
    }
}

fn matrices(host: &HostModel) -> impl Iterator<Item = &Matrix> {
    let enc = host
        .encoder_layers()
        .iter()
        .flat_map(|l: &EncoderLayer| [&l.qkv, &l.o, &l.fc1, &l.fc2]);
    let dec = host.decoder_layers().iter().flat_map(|l: &DecoderLayer| {
        [
            &l.qkv,
            &l.o,
            &l.cross_q,
            &l.cross_kv,
            &l.cross_o,
            &l.fc1,
            &l.fc2,
        ]
    });
    enc.chain(dec)
}

/// An int8 form held by the host model itself (read from an int8 bundle), when the packing
/// takes it (`k` a multiple of 4).
fn held(int8: &Int8Matrix) -> Option<Form<'_>> {
    int8.k.is_multiple_of(4).then_some(Form::Held(int8))
}

fn exact<'a>(values: &[f32], k: usize, n: usize) -> Option<Form<'a>> {
    int8_exact(values, k, n).map(|(q, s)| Form::Rows(q, s))
}

/// The int8 forms of every matrix and table of `host`, if each has one: taken from the host
/// model where it holds its weights in int8 only, else found in the f32 values
/// ([`int8_exact`]).
fn int8_forms(host: &HostModel) -> Option<Int8Forms<'_>> {
    let c = host.config();
    let (vocab, d) = (c.vocab_size, c.d_model);
    let mut forms = Int8Forms::new();
    for m in matrices(host) {
        let form = match &m.int8 {
            Some(int8) if !m.has_f32() => held(int8)?,
            _ => exact(&m.data, m.rows, m.cols)?,
        };
        forms.insert(matrix_source(m), form);
    }
    // The projection `[d, vocab]`: its columns are the output table's rows.
    let output = || match host.output_int8() {
        Some(int8) if host.output_table().is_empty() => held(int8),
        _ => exact(&transpose(host.output_table(), vocab, d), d, vocab),
    };
    let (src, tgt) = host.table_forms();
    for (source, form) in [(Source::SrcTable, src), (Source::TgtTable, tgt)] {
        let found = match form {
            TableForm::Output => output()?,
            TableForm::Int8 { rows, scales } if d.is_multiple_of(4) => Form::Table(rows, scales),
            TableForm::Int8 { .. } => return None,
            // A table's rows are the columns of its transpose `[d, vocab]`.
            TableForm::F32(table) => exact(&transpose(table, vocab, d), d, vocab)?,
        };
        forms.insert(source, found);
    }
    forms.insert(Source::Output, output()?);
    Some(forms)
}

/// The narrowest storage that holds every weight of `host` exactly (module docs), with
/// the int8 forms when it is int8.
fn storage<'h>(
    host: &'h HostModel,
    output_table: &[f32],
    f16: bool,
) -> (WeightStorage, Int8Forms<'h>) {
    if let Some(forms) = int8_forms(host) {
        (WeightStorage::Int8, forms)
    } else if f16 && f16_exact(output_table) && matrices(host).all(|m| f16_exact(&m.data)) {
        (WeightStorage::F16, Int8Forms::new())
    } else {
        (WeightStorage::F32, Int8Forms::new())
    }
}

/// Whether the two tables are one (shared source and target embeddings, §3.4).
fn same_table(a: TableForm, b: TableForm) -> bool {
    match (a, b) {
        (TableForm::F32(x), TableForm::F32(y)) => std::ptr::eq(x, y),
        (TableForm::Int8 { rows: x, .. }, TableForm::Int8 { rows: y, .. }) => std::ptr::eq(x, y),
        (TableForm::Output, TableForm::Output) => true,
        _ => false,
    }
}

impl Weights {
    /// Uploads `host`'s weights in the narrowest exact storage (f16 only if `f16`: the
    /// device has `shader-f16`). A model held in int8 only is uploaded from its integers,
    /// with no f32 copy (the int8 storage holds them as they are).
    pub(crate) fn upload(gpu: &Gpu, host: &HostModel, f16: bool) -> Weights {
        let forms = int8_forms(host);
        // Held in int8 but not packable as such (a width not a multiple of 4): widen a copy.
        let expanded;
        let host = if forms.is_none() && !host.has_f32() {
            expanded = host.expanded();
            &*expanded
        } else {
            host
        };
        let c = host.config();
        let (vocab, d) = (c.vocab_size, c.d_model);
        let (storage, int8) = match forms {
            Some(forms) => (WeightStorage::Int8, forms),
            None => storage(host, host.output_table(), f16),
        };
        let mut up = Uploader {
            gpu,
            storage,
            int8,
            bytes: 0,
        };
        let (src_form, tgt_form) = host.table_forms();
        let (src, tgt) = host.embeddings();
        let src_embedding = up.table(src, Source::SrcTable, vocab, d);
        let tgt_embedding = if same_table(src_form, tgt_form) {
            src_embedding.clone()
        } else {
            up.table(tgt, Source::TgtTable, vocab, d)
        };
        // The projection is the output table transposed: its columns are the table's rows.
        let output = up.linear_from(
            d,
            vocab,
            host.output_bias(),
            || transpose(host.output_table(), vocab, d),
            Source::Output,
        );
        let encoder = host
            .encoder_layers()
            .iter()
            .map(|l| EncoderWeights {
                qkv: up.linear(&l.qkv),
                o: up.linear(&l.o),
                attn_norm: up.norm(&l.attn_norm),
                fc1: up.linear(&l.fc1),
                fc2: up.linear(&l.fc2),
                ffn_norm: up.norm(&l.ffn_norm),
            })
            .collect();
        let decoder = host
            .decoder_layers()
            .iter()
            .map(|l| DecoderWeights {
                qkv: up.linear(&l.qkv),
                o: up.linear(&l.o),
                self_norm: up.norm(&l.self_norm),
                cross_q: up.linear(&l.cross_q),
                cross_kv: up.linear(&l.cross_kv),
                cross_o: up.linear(&l.cross_o),
                cross_norm: up.norm(&l.cross_norm),
                fc1: up.linear(&l.fc1),
                fc2: up.linear(&l.fc2),
                ffn_norm: up.norm(&l.ffn_norm),
            })
            .collect();
        Weights {
            src_embedding,
            tgt_embedding,
            output,
            encoder,
            decoder,
            storage,
            bytes: up.bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_exact_finds_the_integers_and_scales_of_q_times_scale() {
        use transduce::host::int8::quantize_rows;
        // A [k, n] matrix, its columns quantized as the bundle writer does (per row of the
        // transpose), and those dequantized: q·s.
        let quantized = |k: usize, n: usize| {
            let w: Vec<f32> = (0..k * n)
                .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.013)
                .collect();
            let (q, s) = quantize_rows(&transpose(&w, k, n), k);
            let dequantized: Vec<f32> = (0..k * n)
                .map(|i| q[(i % n) * k + i / n] as f32 * s[i % n])
                .collect();
            (w, q, s, dequantized)
        };
        let (w, q, s, dequantized) = quantized(8, 5);
        assert_eq!(int8_exact(&dequantized, 8, 5), Some((q, s)));
        // Weights that are not q·s are not int8; nor is a k the shaders' words do not divide.
        assert_eq!(int8_exact(&w, 8, 5), None);
        let (_, _, _, odd) = quantized(6, 5);
        assert_eq!(int8_exact(&odd, 6, 5), None);
    }

    #[test]
    fn float_words_hold_four_rows_of_a_column_zero_past_k() {
        // [k = 5, n = 2]: column 0 is 1..5, column 1 is 10..50.
        let m = [1.0, 10.0, 2.0, 20.0, 3.0, 30.0, 4.0, 40.0, 5.0, 50.0];
        assert_eq!(
            pack_words(&m, 5, 2),
            [
                1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0, 40.0, 5.0, 0.0, 0.0, 0.0, 50.0, 0.0, 0.0, 0.0
            ]
        );
    }

    #[test]
    fn packed_words_hold_four_inputs_of_a_column_lowest_byte_first() {
        // q [n = 2, k = 4]: column 0 is 1, -2, 3, -128; column 1 is 127, 0, -1, 5.
        let q = [1i8, -2, 3, -128, 127, 0, -1, 5];
        let mut bytes = Vec::new();
        pack_word_rows(
            &Form::Rows(q.to_vec(), vec![1.0; 2]),
            4,
            2,
            0..1,
            &mut bytes,
        );
        let words: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(words, vec![0x80_03_FE_01, 0x05_FF_00_7F]);
    }
}
