//! The weights codec: a model's parameters to and from `model.safetensors`, in f32, f16 or
//! int8 with a scale per row (the layout the module doc of `bundle` describes).

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::host::matrix::transpose;
use crate::model::Transformer;
use crate::stored::{Stored, StoredTensors};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::prelude::*;
use burn::tensor::TensorData;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use std::collections::HashMap;

use super::WeightDtype;

/// Walks the module tree keeping the dotted path and the enclosing struct.
#[derive(Default)]
struct Path {
    names: Vec<String>,
    containers: Vec<String>,
}

impl Path {
    fn enter(&mut self, name: &str, container: &str) {
        self.names.push(name.to_string());
        self.containers.push(container.to_string());
    }

    fn exit(&mut self) {
        self.names.pop();
        self.containers.pop();
    }

    /// Whether the tensor at this path is stored in int8 in an int8 bundle: linear weights
    /// and the token embeddings.
    fn quantizable(&self) -> bool {
        let (name, linear) = self.stored();
        linear || name == "embedding.weight" || name == "src_embedding.weight"
    }

    /// The stored name, and whether the tensor is a linear weight (stored transposed).
    fn stored(&self) -> (String, bool) {
        let mut names = self.names.clone();
        let container = self.containers.last().map(String::as_str).unwrap_or("");
        let last = names.last_mut();
        let mut linear = false;
        if let Some(last) = last {
            match (container, last.as_str()) {
                ("Struct:LayerNorm", "gamma") => *last = "weight".into(),
                ("Struct:LayerNorm", "beta") => *last = "bias".into(),
                ("Struct:Linear", "weight") => linear = true,
                _ => {}
            }
        }
        (names.join("."), linear)
    }
}

struct Collector {
    path: Path,
    /// Name, stored shape, values, and whether an int8 bundle quantizes it.
    tensors: Vec<(String, Vec<usize>, Vec<f32>, bool)>,
    error: Option<Error>,
}

impl ModuleVisitor for Collector {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let (name, linear) = self.path.stored();
        let quantizable = self.path.quantizable() && D == 2;
        let tensor = param.val();
        let mut shape = tensor.dims().to_vec();
        let values = match tensor.into_data().try_into_vec_as::<f32>() {
            Ok(v) => v,
            Err(e) => {
                self.error = Some(Error::Device(format!("reading {name}: {e:?}")));
                return;
            }
        };
        let values = if linear && D == 2 {
            let (r, c) = (shape[0], shape[1]);
            shape = vec![c, r];
            transpose(&values, r, c)
        } else {
            values
        };
        self.tensors.push((name, shape, values, quantizable));
    }
}

/// Serializes a model's parameters to safetensors bytes (a blocking device read).
pub fn save_weights(model: &Transformer, dtype: WeightDtype) -> Result<Vec<u8>> {
    save_weights_on_scales(model, dtype, None)
}

/// [`save_weights`]; in int8, each row on its scale in `reference` (an int8 weights file of
/// the same architecture: the bundle a model was fine-tuned from) where the row still fits
/// it, so that weights that moved less than half a step come back exactly as they shipped.
/// Rows without a reference scale, or grown past it, get their own.
pub fn save_weights_on_scales(
    model: &Transformer,
    dtype: WeightDtype,
    reference: Option<&[u8]>,
) -> Result<Vec<u8>> {
    let reference = reference
        .map(|bytes| {
            SafeTensors::deserialize(bytes).map_err(|e| Error::CorruptWeights(format!("{e:?}")))
        })
        .transpose()?;
    // The reference's scales of tensor `name` with `rows` rows, when it has them.
    let reference_scales = |name: &str, rows: usize| -> Option<Vec<f32>> {
        let view = reference
            .as_ref()?
            .tensor(&format!("{name}{SCALE_SUFFIX}"))
            .ok()?;
        (view.dtype() == Dtype::F32 && view.shape() == [rows]).then(|| {
            view.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        })
    };
    let mut collector = Collector {
        path: Path::default(),
        tensors: Vec::new(),
        error: None,
    };
    model.visit(&mut collector);
    if let Some(e) = collector.error {
        return Err(e);
    }
    let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, shape, values, quantizable) in collector.tensors {
        match dtype {
            WeightDtype::Int8 if quantizable => {
                let (q, scales) = match reference_scales(&name, shape[0]) {
                    Some(on) => crate::host::int8::quantize_rows_on(&values, shape[1], &on),
                    None => crate::host::int8::quantize_rows(&values, shape[1]),
                };
                let scale_bytes = scales.iter().flat_map(|v| v.to_le_bytes()).collect();
                buffers.push((
                    format!("{name}{SCALE_SUFFIX}"),
                    Dtype::F32,
                    vec![shape[0]],
                    scale_bytes,
                ));
                buffers.push((name, Dtype::I8, shape, q.iter().map(|&v| v as u8).collect()));
            }
            WeightDtype::F16 => buffers.push((
                name,
                Dtype::F16,
                shape,
                values
                    .iter()
                    .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                    .collect(),
            )),
            WeightDtype::F32 | WeightDtype::Int8 => buffers.push((
                name,
                Dtype::F32,
                shape,
                values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            )),
        }
    }
    let views = buffers
        .iter()
        .map(|(name, dtype, shape, bytes)| {
            TensorView::new(*dtype, shape.clone(), bytes)
                .map(|view| (name.clone(), view))
                .map_err(|e| Error::CorruptWeights(format!("{name}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let metadata = HashMap::from([("format".to_string(), "transduce".to_string())]);
    safetensors::serialize(views, Some(metadata)).map_err(|e| Error::CorruptWeights(e.to_string()))
}

pub use crate::stored::SCALE_SUFFIX;

struct Loader<'a> {
    path: Path,
    file: StoredTensors<'a>,
    error: Option<Error>,
    device: Device,
    /// Storage types met, for the bundle's verdict.
    int8: bool,
    f16: bool,
}

impl Loader<'_> {
    fn tensor<const D: usize>(&mut self, expected: [usize; D]) -> Result<Tensor<D>> {
        let (name, linear) = self.path.stored();
        let stored_shape: Vec<usize> = if linear && D == 2 {
            vec![expected[1], expected[0]]
        } else {
            expected.to_vec()
        };
        let quantizable = D == 2 && self.path.quantizable();
        let (values, stored) = self.file.floats(&name, &stored_shape, quantizable)?;
        match stored {
            Stored::Int8 => self.int8 = true,
            Stored::F16 => self.f16 = true,
            Stored::F32 => {}
        }
        let values = if linear && D == 2 {
            transpose(&values, stored_shape[0], stored_shape[1])
        } else {
            values
        };
        Ok(Tensor::from_data(
            TensorData::new(values, expected),
            &self.device,
        ))
    }
}

impl ModuleMapper for Loader<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.path.enter(name, container_type);
    }

    fn exit_module(&mut self, _: &str, _: &str) {
        self.path.exit();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if self.error.is_some() {
            return param;
        }
        // The shape without initializing: a fresh model's parameters are lazy, and drawing
        // their random initial values only to replace them was a third of a bundle's load.
        let Ok(expected) = <[usize; D]>::try_from(param.lazy_shape().as_slice()) else {
            self.error = Some(Error::Device(format!("parameter of rank ≠ {D}")));
            return param;
        };
        match self.tensor(expected) {
            Ok(tensor) => {
                let id = param.id;
                param.transform_for_load(tensor, id)
            }
            Err(e) => {
                self.error = Some(e);
                param
            }
        }
    }
}

/// Refuses a config that describes far more parameters than the file holds, before any
/// model is allocated: a lying config.json must not exhaust memory (in the browser that
/// kills the module). Smaller mismatches are found tensor by tensor and reported by name;
/// this bounds what they allocate to twice the file, plus 1 M.
pub(super) fn described_within(config: &ModelConfig, file: &SafeTensors) -> Result<()> {
    let held: usize = file
        .tensors()
        .iter()
        .map(|(_, view)| {
            view.shape()
                .iter()
                .fold(1, |n: usize, &d| n.saturating_mul(d))
        })
        .fold(0, usize::saturating_add);
    let described = config.num_params();
    if described > held.saturating_mul(2).saturating_add(1 << 20) {
        return Err(Error::invalid(
            "model",
            format!(
                "config.json describes {described} parameters, far more than the {held} \
                 model.safetensors holds"
            ),
        ));
    }
    Ok(())
}

/// Builds a model for `config` and fills it from safetensors bytes; every mismatch between
/// config and file is an error naming the tensor. int8 tensors are widened to `q·scale`.
pub fn load_weights(config: &ModelConfig, bytes: &[u8], device: &Device) -> Result<Transformer> {
    load_weights_stored(config, bytes, device).map(|(model, _)| model)
}

/// [`load_weights`], and how the file stored the matrices (int8 if any tensor was, else f16
/// if any was, else f32).
pub fn load_weights_stored(
    config: &ModelConfig,
    bytes: &[u8],
    device: &Device,
) -> Result<(Transformer, WeightDtype)> {
    let file =
        SafeTensors::deserialize(bytes).map_err(|e| Error::CorruptWeights(format!("{e:?}")))?;
    described_within(config, &file)?;
    let model = Transformer::to_load(config, device)?;
    let mut loader = Loader {
        path: Path::default(),
        file: StoredTensors::new(&file),
        error: None,
        device: device.clone(),
        int8: false,
        f16: false,
    };
    let model = model.map(&mut loader);
    if let Some(e) = loader.error {
        return Err(e);
    }
    loader.file.unexpected()?;
    let stored = if loader.int8 {
        WeightDtype::Int8
    } else if loader.f16 {
        WeightDtype::F16
    } else {
        WeightDtype::F32
    };
    Ok((model, stored))
}
