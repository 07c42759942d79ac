//! A checkpoint's tensors by name, read in place: each one a dtype, a shape and the bytes it
//! occupies in the file (`model.safetensors`, or `pytorch_model.bin` through
//! [`crate::pytorch`]). Values are widened to f32 one tensor at a time, when the conversion
//! asks for them, so that an import holds the file, the bundle it writes and one tensor,
//! never a second copy of every weight.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

/// How a tensor's values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatType {
    F32,
    F16,
    BF16,
}

impl FloatType {
    pub fn size(self) -> usize {
        match self {
            FloatType::F32 => 4,
            FloatType::F16 | FloatType::BF16 => 2,
        }
    }
}

/// One tensor of a checkpoint: row-major values in `data` (little-endian).
#[derive(Clone, Debug)]
pub struct TensorRef<'a> {
    pub dtype: FloatType,
    pub shape: Vec<usize>,
    pub data: &'a [u8],
}

/// Why a tensor cannot be read: the tensor and what is wrong with it.
pub type TensorError = String;

/// A checkpoint's floating-point tensors by name. Integer buffers (none in Marian's
/// weights) are not parameters and are left out.
pub struct Tensors<'a> {
    tensors: HashMap<String, TensorRef<'a>>,
}

impl<'a> Tensors<'a> {
    pub fn new(tensors: HashMap<String, TensorRef<'a>>) -> Self {
        Tensors { tensors }
    }

    /// Reads a safetensors file's header; the values stay where they are.
    pub fn from_safetensors(bytes: &'a [u8]) -> Result<Self, TensorError> {
        let file = SafeTensors::deserialize(bytes).map_err(|e| format!("not safetensors: {e}"))?;
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            let dtype = match view.dtype() {
                Dtype::F32 => FloatType::F32,
                Dtype::F16 => FloatType::F16,
                Dtype::BF16 => FloatType::BF16,
                _ => continue,
            };
            tensors.insert(
                name,
                TensorRef {
                    dtype,
                    shape: view.shape().to_vec(),
                    data: view.data(),
                },
            );
        }
        Ok(Tensors { tensors })
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(String::as_str)
    }

    pub fn raw(&self, name: &str) -> Option<&TensorRef<'a>> {
        self.tensors.get(name)
    }

    /// The first of `names` present (checkpoints differ in the `model.` prefix and in which
    /// copy of a tied matrix they keep), checked to have `shape`; its name.
    pub fn find(&self, names: &[String], shape: &[usize]) -> Result<&str, TensorError> {
        let (name, tensor) = names
            .iter()
            .find_map(|n| self.tensors.get_key_value(n))
            .ok_or_else(|| format!("tensor {} is missing", names[0]))?;
        if tensor.shape != shape {
            return Err(format!(
                "tensor {name} has shape {:?}, expected {shape:?}",
                tensor.shape
            ));
        }
        Ok(name)
    }

    /// A tensor's values as f32 (f16 and bf16 are widened exactly). `name` must be one that
    /// [`Tensors::find`] returned.
    pub fn values(&self, name: &str) -> Vec<f32> {
        let tensor = &self.tensors[name];
        to_f32(tensor.dtype, tensor.data)
    }
}

/// Little-endian values of `dtype` as f32.
pub fn to_f32(dtype: FloatType, data: &[u8]) -> Vec<f32> {
    match dtype {
        FloatType::F32 => data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        FloatType::F16 => data
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        FloatType::BF16 => data
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    }
}
