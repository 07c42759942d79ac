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

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

/// Why the weights cannot be imported: the tensor and what is wrong with it.
pub type WeightError = String;

/// Marian's tensors by name, as f32 (stored f32, f16 or bf16).
pub struct Tensors {
    tensors: HashMap<String, (Vec<usize>, Vec<f32>)>,
}

impl Tensors {
    /// Reads a safetensors file.
    pub fn from_safetensors(bytes: &[u8]) -> Result<Tensors, WeightError> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| format!("not safetensors: {e}"))?;
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            let values = to_f32(&name, view.dtype(), view.data())?;
            tensors.insert(name, (view.shape().to_vec(), values));
        }
        Ok(Tensors { tensors })
    }

    /// Reads a PyTorch checkpoint (`pytorch_model.bin`: `torch.save`'s zip or legacy
    /// format) through burn-store's reader: no Python involved.
    pub fn from_pytorch(path: &std::path::Path) -> Result<Tensors, WeightError> {
        use pytorch_reader::{DType, PytorchReader};
        let reader =
            PytorchReader::new(path).map_err(|e| format!("not a PyTorch checkpoint: {e}"))?;
        let mut tensors = HashMap::new();
        for (name, tensor) in reader.into_tensors() {
            let dtype = match tensor.dtype() {
                DType::F32 => Dtype::F32,
                DType::F16 => Dtype::F16,
                DType::BF16 => Dtype::BF16,
                // Integer buffers (none in Marian's weights) are not parameters: skipped.
                _ => continue,
            };
            let bytes = tensor.read().map_err(|e| e.to_string())?;
            let values = to_f32(&name, dtype, &bytes)?;
            tensors.insert(name, (tensor.shape().to_vec(), values));
        }
        Ok(Tensors { tensors })
    }

    /// The first of `names` present (checkpoints differ in the `model.` prefix and in which
    /// copy of a tied matrix they keep), with its expected shape.
    fn take(&self, names: &[String], shape: &[usize]) -> Result<&[f32], WeightError> {
        let (name, (found, values)) = names
            .iter()
            .find_map(|n| self.tensors.get(n).map(|t| (n, t)))
            .ok_or_else(|| format!("tensor {} is missing", names[0]))?;
        if found != shape {
            return Err(format!(
                "tensor {name} has shape {found:?}, expected {shape:?}"
            ));
        }
        Ok(values)
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<&[f32], WeightError> {
        self.take(&[format!("model.{name}"), name.to_string()], shape)
    }
}

fn to_f32(name: &str, dtype: Dtype, data: &[u8]) -> Result<Vec<f32>, WeightError> {
    Ok(match dtype {
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        Dtype::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Dtype::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        other => return Err(format!("tensor {name} is {other:?}, not a float type")),
    })
}

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
    pub n_layers: usize,
    /// For each of our vocabulary ids, the Marian id whose rows it takes.
    pub rows: &'a [Option<u32>],
    pub tied: bool,
}

/// Our stored tensors (the names and layouts of [`transduce::bundle::save_weights`]:
/// linear weights `[out, in]`, norms as `weight`/`bias`), as f32 safetensors bytes.
pub fn to_ours(marian: &Tensors, layout: &Layout) -> Result<Vec<u8>, WeightError> {
    let d = layout.d_model;
    let perm = stream_permutation(d);
    let marian_vocab = layout.rows.iter().flatten().count();
    let ours_vocab = layout.rows.len();
    let mut out: Vec<(String, Vec<usize>, Vec<f32>)> = Vec::new();

    // A table `[vocab, d]`: rows renumbered (our PAD row zero), columns permuted.
    let table = |values: &[f32]| -> Vec<f32> {
        let mut t = vec![0.0; ours_vocab * d];
        for (ours, marian) in layout.rows.iter().enumerate() {
            if let Some(m) = marian {
                let row = &values[*m as usize * d..][..d];
                for (j, &p) in perm.iter().enumerate() {
                    t[ours * d + j] = row[p];
                }
            }
        }
        t
    };
    let shared_names: Vec<String> = [
        "model.shared.weight",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
        "shared.weight",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let shared = marian.take(&shared_names, &[marian_vocab, d])?;
    out.push((
        "embedding.weight".into(),
        vec![ours_vocab, d],
        table(shared),
    ));
    if !layout.tied {
        // Untied output: our three tables (§3.4 untied) — source and target embedding are
        // still Marian's one shared matrix; the projection is lm_head.
        out.push((
            "src_embedding.weight".into(),
            vec![ours_vocab, d],
            table(shared),
        ));
        let head = marian.take(&["lm_head.weight".to_string()], &[marian_vocab, d])?;
        out.push(("output.weight".into(), vec![ours_vocab, d], table(head)));
    }
    // The output bias, renumbered. Our PAD is never emitted; its logit must also stay out of
    // the softmax's sum as it is not in Marian's (`<s>` already carries Marian's padding
    // logit), so its bias is far below any logit: e^(−10⁴) is 0 in f32.
    let bias = marian
        .take(
            &[
                "final_logits_bias".to_string(),
                "model.final_logits_bias".to_string(),
            ],
            &[1, marian_vocab],
        )
        .map(<[f32]>::to_vec)
        .or_else(|e| {
            if marian
                .tensors
                .keys()
                .any(|k| k.ends_with("final_logits_bias"))
            {
                Err(e)
            } else {
                Ok(vec![0.0; marian_vocab])
            }
        })?;
    let output_bias = layout
        .rows
        .iter()
        .map(|m| m.map_or(PAD_LOGIT_BIAS, |m| bias[m as usize]))
        .collect();
    out.push(("output_bias".into(), vec![ours_vocab], output_bias));

    // Permutes the stream axis of a linear weight `[out, in]`: its input (`in_stream`) or
    // its output rows.
    let rows_permuted = |values: &[f32], cols: usize| -> Vec<f32> {
        perm.iter()
            .flat_map(|&p| values[p * cols..(p + 1) * cols].iter().copied())
            .collect()
    };
    let cols_permuted = |values: &[f32], rows: usize| -> Vec<f32> {
        (0..rows)
            .flat_map(|r| perm.iter().map(move |&p| values[r * d + p]))
            .collect()
    };
    let vector = |values: &[f32]| -> Vec<f32> { perm.iter().map(|&p| values[p]).collect() };

    for (stack, layers) in [("encoder", layout.n_layers), ("decoder", layout.n_layers)] {
        for i in 0..layers {
            let at = |n: &str| format!("{stack}.layers.{i}.{n}");
            let mut attention = |marian_name: &str, ours: &str| -> Result<(), WeightError> {
                // Q, K, V read the stream (columns); O writes it (rows and bias).
                for (m, o) in [("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")] {
                    let w = marian.get(&at(&format!("{marian_name}.{m}.weight")), &[d, d])?;
                    let b = marian.get(&at(&format!("{marian_name}.{m}.bias")), &[d])?;
                    out.push((
                        at(&format!("{ours}.{o}.weight")),
                        vec![d, d],
                        cols_permuted(w, d),
                    ));
                    out.push((at(&format!("{ours}.{o}.bias")), vec![d], b.to_vec()));
                }
                let w = marian.get(&at(&format!("{marian_name}.out_proj.weight")), &[d, d])?;
                let b = marian.get(&at(&format!("{marian_name}.out_proj.bias")), &[d])?;
                out.push((
                    at(&format!("{ours}.o.weight")),
                    vec![d, d],
                    rows_permuted(w, d),
                ));
                out.push((at(&format!("{ours}.o.bias")), vec![d], vector(b)));
                Ok(())
            };
            attention("self_attn", "self_attn")?;
            if stack == "decoder" {
                attention("encoder_attn", "cross_attn")?;
            }
            let mut norm = |marian_name: &str, ours: &str| -> Result<(), WeightError> {
                for part in ["weight", "bias"] {
                    let v = marian.get(&at(&format!("{marian_name}.{part}")), &[d])?;
                    out.push((at(&format!("{ours}.{part}")), vec![d], vector(v)));
                }
                Ok(())
            };
            norm("self_attn_layer_norm", "self_attn_norm")?;
            if stack == "decoder" {
                norm("encoder_attn_layer_norm", "cross_attn_norm")?;
            }
            norm("final_layer_norm", "ffn_norm")?;
            let f = layout.d_ff;
            let w1 = marian.get(&at("fc1.weight"), &[f, d])?;
            let b1 = marian.get(&at("fc1.bias"), &[f])?;
            let w2 = marian.get(&at("fc2.weight"), &[d, f])?;
            let b2 = marian.get(&at("fc2.bias"), &[d])?;
            out.push((at("ffn.fc1.weight"), vec![f, d], cols_permuted(w1, f)));
            out.push((at("ffn.fc1.bias"), vec![f], b1.to_vec()));
            out.push((at("ffn.fc2.weight"), vec![d, f], rows_permuted(w2, f)));
            out.push((at("ffn.fc2.bias"), vec![d], vector(b2)));
        }
    }
    check_positions(marian, d)?;

    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = out
        .into_iter()
        .map(|(name, shape, values)| {
            let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            (name, shape, bytes)
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(name, shape, data)| {
            TensorView::new(Dtype::F32, shape.clone(), data)
                .map(|v| (name.clone(), v))
                .map_err(|e| format!("{name}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize(views, None).map_err(|e| e.to_string())
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
        let Some((shape, values)) = marian.tensors.get(name) else {
            continue;
        };
        if shape.len() != 2 || shape[1] != d {
            return Err(format!(
                "tensor {name} has shape {shape:?}, expected [positions, {d}]"
            ));
        }
        let rows = shape[0].min(64);
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
