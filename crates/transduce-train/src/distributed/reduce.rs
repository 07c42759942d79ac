//! A step's gradients summed over the ranks through one host buffer: every parameter's
//! gradient flattened in the model's order (zeros where this rank has none), then a count
//! per parameter of the ranks that had one, the step's two loss sums and its count of
//! non-finite ranks. One all-reduce per optimizer step, not per batch: the ranks'
//! micro-batches (`--accum`) are summed on the device first.
//!
//! The sums are the ones `--accum` forms on one device, term for term, so two ranks give
//! the bits of one process accumulating two batches.

use transduce::Transformer;
use transduce::burn::module::{Module, ModuleVisitor, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{TensorData, Transaction};

use super::Collective;
use crate::error::{Error, Result};

/// What one rank contributes to a step, and what the ranks' sums come back as.
pub struct StepSums {
    pub grads: GradientsParams,
    /// The smoothed loss over the group's tokens and the summed −log p, as read.
    pub loss: [f32; 2],
    /// No rank's gradients overflowed (half precision).
    pub finite: bool,
}

/// A float parameter: its id and shape, in the model's order.
pub(crate) fn parameters(model: &Transformer) -> Vec<(ParamId, Vec<usize>)> {
    struct Shapes(Vec<(ParamId, Vec<usize>)>);
    impl ModuleVisitor for Shapes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push((param.id, param.val().dims().to_vec()));
        }
    }
    let mut shapes = Shapes(Vec::new());
    model.visit(&mut shapes);
    shapes.0
}

/// Each parameter's gradient in `grads`, flattened and read to the host (one read for
/// them all), or `None` where it has none.
fn read_grads(
    grads: &GradientsParams,
    params: &[(ParamId, Vec<usize>)],
) -> Result<Vec<Option<Vec<f32>>>> {
    fn get<const D: usize>(grads: &GradientsParams, id: ParamId) -> Option<Tensor<1>> {
        grads.get::<D>(id).map(|g| {
            let n = g.shape().num_elements();
            g.reshape([n])
        })
    }
    let mut flat = Vec::with_capacity(params.len());
    for (id, dims) in params {
        flat.push(match dims.len() {
            1 => get::<1>(grads, *id),
            2 => get::<2>(grads, *id),
            3 => get::<3>(grads, *id),
            4 => get::<4>(grads, *id),
            n => return Err(unsupported(n)),
        });
    }
    let transaction = flat
        .iter()
        .flatten()
        .fold(Transaction::default(), |t, g| t.register(g.clone()));
    fn read_failed(e: impl std::fmt::Debug) -> Error {
        Error::Usage(format!("reading the gradients failed: {e:?}"))
    }
    let mut data = transaction.try_execute().map_err(read_failed)?.into_iter();
    flat.iter()
        .map(|g| match g {
            None => Ok(None),
            Some(_) => {
                let d = data
                    .next()
                    .ok_or_else(|| Error::Usage("a gradient was not read".into()))?;
                d.try_into_vec_as::<f32>().map(Some).map_err(read_failed)
            }
        })
        .collect()
}

/// The error for a parameter of a rank the walks here do not handle.
fn unsupported(rank: usize) -> Error {
    Error::Usage(format!(
        "a parameter of {rank} dimensions: the gradient exchange handles 1 to 4"
    ))
}

/// Sums `mine` over the ranks of `collective`. `device` holds the gradients that come
/// back (the model's inner device). Parameters no rank has a gradient for stay without one,
/// as in a single process.
pub fn all_reduce(
    collective: &dyn Collective,
    model: &Transformer,
    mine: StepSums,
    device: &Device,
) -> Result<StepSums> {
    let params = parameters(model);
    let read = read_grads(&mine.grads, &params)?;
    let total: usize = params
        .iter()
        .map(|(_, dims)| dims.iter().product::<usize>())
        .sum();
    let mut buffer = Vec::with_capacity(total + params.len() + 3);
    for ((_, dims), grad) in params.iter().zip(&read) {
        let n: usize = dims.iter().product();
        match grad {
            Some(values) if values.len() == n => buffer.extend_from_slice(values),
            Some(values) => {
                return Err(Error::Usage(format!(
                    "a gradient of {} values for a parameter of shape {dims:?}",
                    values.len()
                )));
            }
            None => buffer.resize(buffer.len() + n, 0.0),
        }
    }
    buffer.extend(read.iter().map(|g| g.is_some() as u8 as f32));
    buffer.extend(mine.loss);
    buffer.push((!mine.finite) as u8 as f32);
    collective.all_reduce_sum(&mut buffer)?;

    let (values, rest) = buffer.split_at(total);
    let (present, tail) = rest.split_at(params.len());
    let mut grads = GradientsParams::new();
    let mut offset = 0;
    for ((id, dims), &count) in params.iter().zip(present) {
        let n: usize = dims.iter().product();
        if count > 0.0 {
            let flat: Tensor<1> = Tensor::from_data(
                TensorData::new(values[offset..offset + n].to_vec(), [n]),
                device,
            );
            register(&mut grads, *id, flat, dims)?;
        }
        offset += n;
    }
    Ok(StepSums {
        grads,
        loss: [tail[0], tail[1]],
        finite: tail[2] == 0.0,
    })
}

/// Registers `flat` under `id` in the parameter's shape.
fn register(
    grads: &mut GradientsParams,
    id: ParamId,
    flat: Tensor<1>,
    dims: &[usize],
) -> Result<()> {
    match *dims {
        [a] => grads.register::<1>(id, flat.reshape([a])),
        [a, b] => grads.register::<2>(id, flat.reshape([a, b])),
        [a, b, c] => grads.register::<3>(id, flat.reshape([a, b, c])),
        [a, b, c, d] => grads.register::<4>(id, flat.reshape([a, b, c, d])),
        _ => return Err(unsupported(dims.len())),
    }
    Ok(())
}
