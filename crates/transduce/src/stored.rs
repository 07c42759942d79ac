//! One tensor of `model.safetensors` read and checked: its shape, its dtype (f32, f16, or
//! int8 with its `_scale` tensor beside it; the layout is in [`crate::bundle`]) and its
//! values, each failure an error naming the tensor. Shared by the burn loader
//! ([`crate::bundle::load_weights`]) and the host decoder's int8 loader
//! ([`crate::host::HostModel::from_int8`]), so both refuse a file alike.

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

use crate::error::{Error, Result};

/// Suffix of an int8 tensor's scales.
pub const SCALE_SUFFIX: &str = "_scale";

/// A weights file and the names read from it so far (the rest are unexpected).
pub struct StoredTensors<'a> {
    file: &'a SafeTensors<'a>,
    used: Vec<String>,
}

/// How a tensor read by [`StoredTensors::floats`] was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stored {
    F32,
    F16,
    Int8,
}

fn little_endian_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

impl<'a> StoredTensors<'a> {
    pub fn new(file: &'a SafeTensors<'a>) -> Self {
        StoredTensors {
            file,
            used: Vec::new(),
        }
    }

    /// Whether the file holds `name`.
    pub fn has(&self, name: &str) -> bool {
        self.file.tensor(name).is_ok()
    }

    /// `name`'s dtype, if the file holds it.
    pub fn dtype(&self, name: &str) -> Option<Dtype> {
        self.file.tensor(name).ok().map(|view| view.dtype())
    }

    /// The view of `name`, which must have `shape`; marked as read.
    fn view(&mut self, name: &str, shape: &[usize]) -> Result<TensorView<'a>> {
        let view = self
            .file
            .tensor(name)
            .map_err(|_| Error::MissingTensor(name.to_string()))?;
        self.used.push(name.to_string());
        if view.shape() != shape {
            return Err(Error::ShapeMismatch {
                name: name.to_string(),
                expected: shape.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        Ok(view)
    }

    /// The scales of int8 tensor `name` with `rows` rows: one finite, non-negative f32 a row.
    pub fn scales(&mut self, name: &str, rows: usize) -> Result<Vec<f32>> {
        let scale_name = format!("{name}{SCALE_SUFFIX}");
        let view = self.view(&scale_name, &[rows])?;
        if view.dtype() != Dtype::F32 {
            return Err(Error::UnsupportedDtype {
                name: scale_name,
                dtype: format!("{:?} (scales are F32)", view.dtype()),
            });
        }
        let scales = little_endian_f32(view.data());
        if let Some(bad) = scales.iter().position(|s| !s.is_finite() || *s < 0.0) {
            return Err(Error::CorruptWeights(format!(
                "tensor `{scale_name}` holds {} at row {bad}: scales are finite and non-negative",
                scales[bad]
            )));
        }
        Ok(scales)
    }

    /// The values of `name` `shape` widened to f32, and how they were stored. An int8
    /// tensor (allowed when `int8`: a rank-2 tensor an int8 bundle quantizes) is widened to
    /// `q·scale` row by row.
    pub fn floats(
        &mut self,
        name: &str,
        shape: &[usize],
        int8: bool,
    ) -> Result<(Vec<f32>, Stored)> {
        let view = self.view(name, shape)?;
        let (values, stored): (Vec<f32>, Stored) = match view.dtype() {
            Dtype::F32 => (little_endian_f32(view.data()), Stored::F32),
            Dtype::F16 => (
                view.data()
                    .chunks_exact(2)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect(),
                Stored::F16,
            ),
            Dtype::I8 if int8 && shape.len() == 2 => {
                let scales = self.scales(name, shape[0])?;
                let cols = shape[1].max(1);
                let values = view
                    .data()
                    .chunks_exact(cols)
                    .zip(&scales)
                    .flat_map(|(row, &s)| row.iter().map(move |&q| q as i8 as f32 * s))
                    .collect();
                (values, Stored::Int8)
            }
            other => {
                return Err(Error::UnsupportedDtype {
                    name: name.to_string(),
                    dtype: format!("{other:?}"),
                });
            }
        };
        if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
            return Err(Error::CorruptWeights(format!(
                "tensor `{name}` holds a non-finite value at index {bad}"
            )));
        }
        Ok((values, stored))
    }

    /// The int8 rows `[rows, cols]` of `name` as stored (not widened) and their scales.
    pub fn int8(&mut self, name: &str, rows: usize, cols: usize) -> Result<(&'a [i8], Vec<f32>)> {
        let view = self.view(name, &[rows, cols])?;
        if view.dtype() != Dtype::I8 {
            return Err(Error::UnsupportedDtype {
                name: name.to_string(),
                dtype: format!("{:?} (this loader reads int8 bundles)", view.dtype()),
            });
        }
        let scales = self.scales(name, rows)?;
        let data: &'a [u8] = view.data();
        // SAFETY: i8 and u8 have the same size and alignment; every byte is a valid i8.
        let q = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<i8>(), data.len()) };
        Ok((q, scales))
    }

    /// The tensors of the file never read, sorted: an error unless empty.
    pub fn unexpected(&self) -> Result<()> {
        let mut unexpected: Vec<String> = self
            .file
            .names()
            .into_iter()
            .filter(|n| !self.used.iter().any(|u| u == n))
            .map(str::to_string)
            .collect();
        if unexpected.is_empty() {
            return Ok(());
        }
        unexpected.sort();
        Err(Error::UnexpectedTensors(unexpected))
    }
}
