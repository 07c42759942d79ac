//! The model's weights in GPU buffers, uploaded once from the host decoder's arrays.
//!
//! Matrices are stored in f16 when the device has `shader-f16` and every weight is exactly
//! an f16 (as in the f16 bundles the page ships): half the memory and bandwidth, and the
//! same values the host decoder computes with. Biases, LayerNorm and embeddings stay f32.

use transduce::HostModel;
use transduce::host::kernels::Matrix;
use transduce::host::{DecoderLayer, EncoderLayer, Norm};

use crate::device::Gpu;

/// A weight matrix `[k, n]` and its bias (zeros where the layer has none).
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
    pub src_embedding: wgpu::Buffer,
    pub tgt_embedding: wgpu::Buffer,
    /// The pre-softmax projection `[d_model, vocab]` (the table transposed, so a thread's
    /// neighbours read its neighbouring columns).
    pub output: Linear,
    pub encoder: Vec<EncoderWeights>,
    pub decoder: Vec<DecoderWeights>,
    /// Matrices are f16.
    pub f16: bool,
    /// Bytes uploaded.
    pub bytes: u64,
}

/// Every value survives a round trip through f16.
fn f16_exact(values: &[f32]) -> bool {
    values
        .iter()
        .all(|&v| half::f16::from_f32(v).to_f32().to_bits() == v.to_bits())
}

struct Uploader<'a> {
    gpu: &'a Gpu,
    f16: bool,
    bytes: u64,
}

impl Uploader<'_> {
    fn buffer(&mut self, bytes: &[u8]) -> wgpu::Buffer {
        self.bytes += bytes.len() as u64;
        self.gpu.storage_buffer(bytes)
    }

    fn floats(&mut self, values: &[f32]) -> wgpu::Buffer {
        self.buffer(bytemuck::cast_slice(values))
    }

    fn matrix_values(&mut self, values: &[f32]) -> wgpu::Buffer {
        if self.f16 {
            let halves: Vec<half::f16> = values.iter().map(|&v| half::f16::from_f32(v)).collect();
            // WGSL's array<f16> has a 2-byte stride; pad to 4 bytes for the binding size.
            let mut bytes = bytemuck::cast_slice::<half::f16, u8>(&halves).to_vec();
            bytes.resize(bytes.len().next_multiple_of(4), 0);
            self.buffer(&bytes)
        } else {
            self.floats(values)
        }
    }

    fn linear(&mut self, m: &Matrix) -> Linear {
        let zeros;
        let bias = match &m.bias {
            Some(b) => b.as_slice(),
            None => {
                zeros = vec![0.0; m.cols];
                &zeros
            }
        };
        Linear {
            k: m.rows,
            n: m.cols,
            w: self.matrix_values(&m.data),
            b: self.floats(bias),
        }
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

impl Weights {
    /// Uploads `host`'s weights; matrices in f16 if `f16` is allowed and loses nothing.
    pub(crate) fn upload(gpu: &Gpu, host: &HostModel, f16: bool) -> Weights {
        let f16 =
            f16 && f16_exact(host.output_table()) && matrices(host).all(|m| f16_exact(&m.data));
        let mut up = Uploader { gpu, f16, bytes: 0 };
        let (src, tgt) = host.embeddings();
        let src_embedding = up.floats(src);
        let tgt_embedding = if std::ptr::eq(src, tgt) {
            src_embedding.clone()
        } else {
            up.floats(tgt)
        };
        let c = host.config();
        let (vocab, d) = (c.vocab_size, c.d_model);
        let table = host.output_table();
        let mut transposed = vec![0.0f32; vocab * d];
        for v in 0..vocab {
            for i in 0..d {
                transposed[i * vocab + v] = table[v * d + i];
            }
        }
        let output = up.linear(&Matrix::new(d, vocab, transposed, None));
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
            f16,
            bytes: up.bytes,
        }
    }
}
