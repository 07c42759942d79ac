//! Marian's tensors in our layout: renamed, their vocabulary rows renumbered
//! ([`super::vocab`]) and their model dimension permuted so that our interleaved sinusoids
//! (§3.5) are Marian's halves.
//!
//! Marian's positions put the sines of every frequency first and the cosines after them
//! (`MarianSinusoidalPositionalEmbedding`); ours interleave them, PE(pos, 2i) = sin and
//! PE(pos, 2i+1) = cos. Every operation of the model treats the d_model coordinates of the
//! residual stream alike (the norms reduce over all of them, the projections read or write
//! all of them), so renaming coordinate `i` of Marian's to `perm⁻¹(i)` of ours in every
//! tensor that touches the stream gives the same function, with our positions. No decoder
//! needs to know about the other layout.

use std::borrow::Cow;
use std::collections::HashMap;

use safetensors::{Dtype, View};
use transduce::WeightDtype;
use transduce::bundle::SCALE_SUFFIX;

use crate::tensors::Tensors;

/// Why the weights cannot be imported: the tensor and what is wrong with it.
pub type WeightError = String;

/// Our coordinate `j` of the residual stream is Marian's `perm[j]`: sines (Marian's first
/// half) at even coordinates, cosines (its second half) at odd ones.
pub fn stream_permutation(d: usize) -> Vec<usize> {
    (0..d)
        .map(|j| if j % 2 == 0 { j / 2 } else { d / 2 + j / 2 })
        .collect()
}

/// What the tensor mapping needs to know.
pub struct Layout<'a> {
    pub d_model: usize,
    pub d_ff: usize,
    /// The encoder's and the decoder's depths.
    pub layers: (usize, usize),
    /// For each of our vocabulary ids, the Marian id whose rows it takes.
    pub rows: &'a [Option<u32>],
    pub tied: bool,
}

/// How one of our tensors is made from Marian's (each op names the Marian tensor it reads).
enum Op {
    /// A table `[vocab, d]`: rows renumbered (our PAD row zero), columns permuted.
    Table(String),
    /// The output bias renumbered, from Marian's `final_logits_bias` (zero without one).
    OutputBias(Option<String>),
    /// A linear weight `[out, in]` reading the stream: its columns permuted.
    ReadsStream(String),
    /// A linear weight `[out, in]` writing the stream: its rows permuted.
    WritesStream(String),
    /// A vector over the stream (a norm, an output bias): permuted.
    Stream(String),
    /// As stored.
    Copy(String),
}

/// One of our stored tensors (the names and layouts of [`transduce::bundle::save_weights`]:
/// linear weights `[out, in]`, norms as `weight`/`bias`), and how it is made.
struct Planned {
    name: String,
    shape: Vec<usize>,
    op: Op,
}

/// Our tensors, checked against Marian's (every one present with its expected shape)
/// before anything is computed.
pub struct Plan<'a> {
    tensors: Vec<Planned>,
    marian: &'a Tensors<'a>,
    perm: Vec<usize>,
    rows: Vec<Option<u32>>,
    d: usize,
}

impl<'a> Plan<'a> {
    pub fn new(marian: &'a Tensors<'a>, layout: &Layout) -> Result<Self, WeightError> {
        let d = layout.d_model;
        let marian_vocab = layout.rows.iter().flatten().count();
        let ours_vocab = layout.rows.len();
        let mut tensors = Vec::new();
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let with_prefix = |name: &str| [format!("model.{name}"), name.to_string()];
        let shared = marian
            .find(
                &names(&[
                    "model.shared.weight",
                    "model.encoder.embed_tokens.weight",
                    "model.decoder.embed_tokens.weight",
                    "shared.weight",
                ]),
                &[marian_vocab, d],
            )?
            .to_string();
        tensors.push(Planned {
            name: "embedding.weight".into(),
            shape: vec![ours_vocab, d],
            op: Op::Table(shared.clone()),
        });
        if !layout.tied {
            // Untied output: our three tables (§3.4 untied) — source and target embedding are
            // still Marian's one shared matrix; the projection is lm_head.
            tensors.push(Planned {
                name: "src_embedding.weight".into(),
                shape: vec![ours_vocab, d],
                op: Op::Table(shared),
            });
            let head = marian.find(&names(&["lm_head.weight"]), &[marian_vocab, d])?;
            tensors.push(Planned {
                name: "output.weight".into(),
                shape: vec![ours_vocab, d],
                op: Op::Table(head.to_string()),
            });
        }
        let bias_names = names(&["final_logits_bias", "model.final_logits_bias"]);
        let bias = match marian.find(&bias_names, &[1, marian_vocab]) {
            Ok(name) => Some(name.to_string()),
            Err(_) if !marian.names().any(|k| k.ends_with("final_logits_bias")) => None,
            Err(e) => return Err(e),
        };
        tensors.push(Planned {
            name: "output_bias".into(),
            shape: vec![ours_vocab],
            op: Op::OutputBias(bias),
        });

        let (encoder_layers, decoder_layers) = layout.layers;
        for (stack, depth) in [("encoder", encoder_layers), ("decoder", decoder_layers)] {
            for i in 0..depth {
                let at = |n: &str| format!("{stack}.layers.{i}.{n}");
                let mut add =
                    |ours: String, marian_name: String, shape: Vec<usize>, op: fn(String) -> Op| {
                        let found = marian.find(&with_prefix(&marian_name), &shape)?.to_string();
                        tensors.push(Planned {
                            name: ours,
                            shape,
                            op: op(found),
                        });
                        Ok::<(), WeightError>(())
                    };
                let mut attentions = vec![("self_attn", "self_attn")];
                if stack == "decoder" {
                    attentions.push(("encoder_attn", "cross_attn"));
                }
                for (theirs, ours) in attentions {
                    // Q, K, V read the stream (columns); O writes it (rows and bias).
                    for (m, o) in [("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")] {
                        add(
                            at(&format!("{ours}.{o}.weight")),
                            at(&format!("{theirs}.{m}.weight")),
                            vec![d, d],
                            Op::ReadsStream,
                        )?;
                        add(
                            at(&format!("{ours}.{o}.bias")),
                            at(&format!("{theirs}.{m}.bias")),
                            vec![d],
                            Op::Copy,
                        )?;
                    }
                    add(
                        at(&format!("{ours}.o.weight")),
                        at(&format!("{theirs}.out_proj.weight")),
                        vec![d, d],
                        Op::WritesStream,
                    )?;
                    add(
                        at(&format!("{ours}.o.bias")),
                        at(&format!("{theirs}.out_proj.bias")),
                        vec![d],
                        Op::Stream,
                    )?;
                }
                let mut norms = vec![("self_attn_layer_norm", "self_attn_norm")];
                if stack == "decoder" {
                    norms.push(("encoder_attn_layer_norm", "cross_attn_norm"));
                }
                norms.push(("final_layer_norm", "ffn_norm"));
                for (theirs, ours) in norms {
                    for part in ["weight", "bias"] {
                        add(
                            at(&format!("{ours}.{part}")),
                            at(&format!("{theirs}.{part}")),
                            vec![d],
                            Op::Stream,
                        )?;
                    }
                }
                let f = layout.d_ff;
                add(
                    at("ffn.fc1.weight"),
                    at("fc1.weight"),
                    vec![f, d],
                    Op::ReadsStream,
                )?;
                add(at("ffn.fc1.bias"), at("fc1.bias"), vec![f], Op::Copy)?;
                add(
                    at("ffn.fc2.weight"),
                    at("fc2.weight"),
                    vec![d, f],
                    Op::WritesStream,
                )?;
                add(at("ffn.fc2.bias"), at("fc2.bias"), vec![d], Op::Stream)?;
            }
        }
        check_positions(marian, d)?;
        Ok(Plan {
            tensors,
            marian,
            perm: stream_permutation(d),
            rows: layout.rows.to_vec(),
            d,
        })
    }

    /// The values of one of our tensors, in its stored layout.
    fn values(&self, planned: &Planned) -> Vec<f32> {
        let (d, perm) = (self.d, &self.perm);
        let marian = self.marian;
        match &planned.op {
            Op::Table(name) => {
                let values = marian.values(name);
                let mut t = vec![0.0; self.rows.len() * d];
                for (ours, m) in self.rows.iter().enumerate() {
                    if let Some(m) = m {
                        let row = &values[*m as usize * d..][..d];
                        for (j, &p) in perm.iter().enumerate() {
                            t[ours * d + j] = row[p];
                        }
                    }
                }
                t
            }
            Op::OutputBias(name) => {
                // Our PAD is never emitted; its logit must also stay out of the softmax's sum
                // as it is not in Marian's (`<s>` already carries Marian's padding logit), so
                // its bias is far below any logit: e^(−10⁴) is 0 in f32.
                let bias = name.as_deref().map(|n| marian.values(n));
                self.rows
                    .iter()
                    .map(|m| match m {
                        None => PAD_LOGIT_BIAS,
                        Some(m) => bias.as_ref().map_or(0.0, |b| b[*m as usize]),
                    })
                    .collect()
            }
            Op::ReadsStream(name) => {
                let values = marian.values(name);
                let rows = planned.shape[0];
                let mut out = Vec::with_capacity(rows * d);
                for r in 0..rows {
                    out.extend(perm.iter().map(|&p| values[r * d + p]));
                }
                out
            }
            Op::WritesStream(name) => {
                let values = marian.values(name);
                let cols = planned.shape[1];
                perm.iter()
                    .flat_map(|&p| values[p * cols..(p + 1) * cols].iter().copied())
                    .collect()
            }
            Op::Stream(name) => {
                let values = marian.values(name);
                perm.iter().map(|&p| values[p]).collect()
            }
            Op::Copy(name) => marian.values(name),
        }
    }

    /// Our weights file in `dtype`, written as [`transduce::bundle::save_weights`] writes a
    /// model's: in int8 the matrices and embeddings (every 2-D tensor here) as int8 rows on
    /// their own scales, the rest in f32. One tensor is computed at a time, as the file is
    /// written.
    pub fn write(&self, dtype: WeightDtype) -> Result<Vec<u8>, WeightError> {
        let mut views: Vec<(String, Lazy)> = Vec::new();
        for planned in &self.tensors {
            let quantized = dtype == WeightDtype::Int8 && planned.shape.len() == 2;
            if quantized {
                views.push((
                    format!("{}{SCALE_SUFFIX}", planned.name),
                    Lazy {
                        plan: self,
                        planned,
                        part: Part::Scales,
                    },
                ));
                views.push((
                    planned.name.clone(),
                    Lazy {
                        plan: self,
                        planned,
                        part: Part::Int8,
                    },
                ));
            } else if dtype == WeightDtype::F16 {
                views.push((
                    planned.name.clone(),
                    Lazy {
                        plan: self,
                        planned,
                        part: Part::F16,
                    },
                ));
            } else {
                views.push((
                    planned.name.clone(),
                    Lazy {
                        plan: self,
                        planned,
                        part: Part::F32,
                    },
                ));
            }
        }
        let metadata = HashMap::from([("format".to_string(), "transduce".to_string())]);
        safetensors::serialize(views, Some(metadata)).map_err(|e| e.to_string())
    }
}

#[derive(Clone, Copy)]
enum Part {
    F32,
    F16,
    Int8,
    Scales,
}

/// A tensor of the weights file, computed only when the writer asks for its bytes.
struct Lazy<'p> {
    plan: &'p Plan<'p>,
    planned: &'p Planned,
    part: Part,
}

impl View for Lazy<'_> {
    fn dtype(&self) -> Dtype {
        match self.part {
            Part::F32 | Part::Scales => Dtype::F32,
            Part::F16 => Dtype::F16,
            Part::Int8 => Dtype::I8,
        }
    }

    fn shape(&self) -> &[usize] {
        match self.part {
            Part::Scales => &self.planned.shape[..1],
            _ => &self.planned.shape,
        }
    }

    fn data(&self) -> Cow<'_, [u8]> {
        let values = self.plan.values(self.planned);
        let bytes = match self.part {
            Part::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            Part::F16 => values
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect(),
            Part::Int8 | Part::Scales => {
                let (q, scales) =
                    transduce::host::int8::quantize_rows(&values, self.planned.shape[1]);
                match self.part {
                    Part::Int8 => q.iter().map(|&v| v as u8).collect(),
                    _ => scales.iter().flat_map(|v| v.to_le_bytes()).collect(),
                }
            }
        };
        Cow::Owned(bytes)
    }

    fn data_len(&self) -> usize {
        let n: usize = self.shape().iter().product();
        n * match self.part {
            Part::F32 | Part::Scales => 4,
            Part::F16 => 2,
            Part::Int8 => 1,
        }
    }
}

/// The bias that keeps our PAD's logit out of the softmax.
pub const PAD_LOGIT_BIAS: f32 = -1.0e4;

/// Where a checkpoint stores its position table, it must be Marian's sinusoids (sines then
/// cosines): a model whose positions are anything else is refused, not mis-read.
fn check_positions(marian: &Tensors, d: usize) -> Result<(), WeightError> {
    for name in [
        "model.encoder.embed_positions.weight",
        "model.decoder.embed_positions.weight",
    ] {
        let Some(tensor) = marian.raw(name) else {
            continue;
        };
        let shape = &tensor.shape;
        if shape.len() != 2 || shape[1] != d {
            return Err(format!(
                "tensor {name} has shape {shape:?}, expected [positions, {d}]"
            ));
        }
        let rows = shape[0].min(64);
        let values =
            crate::tensors::to_f32(tensor.dtype, &tensor.data[..rows * d * tensor.dtype.size()]);
        let ours = transduce::embedding::sinusoid_table(0, rows, d);
        let perm = stream_permutation(d);
        for pos in 0..rows {
            for (j, &p) in perm.iter().enumerate() {
                let (theirs, mine) = (values[pos * d + p], ours[pos * d + j]);
                if (theirs - mine).abs() > 1e-4 {
                    return Err(format!(
                        "tensor {name} is not Marian's sinusoids (position {pos}, coordinate {p}: \
                         {theirs}, expected {mine}): learned positions cannot be imported"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_permutation_turns_marian_halves_into_our_interleaving() {
        // Marian's table: column i < d/2 is sin(pos·ω_i), column d/2 + i is cos(pos·ω_i).
        let d = 8;
        let ours = transduce::embedding::sinusoid_table(0, 5, d);
        let marian: Vec<f32> = (0..5)
            .flat_map(|pos| {
                (0..d).map(move |c| {
                    let i = c % (d / 2);
                    let angle = pos as f64 / 10_000f64.powf(2.0 * i as f64 / d as f64);
                    (if c < d / 2 { angle.sin() } else { angle.cos() }) as f32
                })
            })
            .collect();
        let perm = stream_permutation(d);
        for pos in 0..5 {
            for j in 0..d {
                assert!((ours[pos * d + j] - marian[pos * d + perm[j]]).abs() < 1e-6);
            }
        }
        let mut seen = perm.clone();
        seen.sort();
        assert_eq!(seen, (0..d).collect::<Vec<_>>());
    }
}
