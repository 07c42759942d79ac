//! Reading device values back to the host, counted by the census.

use transduce::burn::prelude::*;
use transduce::burn::tensor::Transaction;

use crate::error::{Error, Result};
use crate::train::observe::census;

/// The error of a failed read of device values.
fn read_failed(e: impl std::fmt::Debug) -> Error {
    Error::Usage(format!("device read failed: {e:?}"))
}

/// A vector's values, read back to the host (one blocking read).
pub fn values(t: Tensor<1>) -> Result<Vec<f64>> {
    census::note_read();
    t.into_data().try_into_vec_as::<f64>().map_err(read_failed)
}

/// The first value of each vector, read back together in one transaction (one blocking
/// read however many there are).
pub fn read_scalars(tensors: Vec<Tensor<1>>) -> Result<Vec<f64>> {
    if tensors.is_empty() {
        return Ok(Vec::new());
    }
    census::note_read();
    // A transaction reads tensors of one kind: autodiff-wrapped and plain ones (a loss
    // computed on the inner backend) cannot be mixed, so all are unwrapped.
    let transaction = tensors.into_iter().fold(Transaction::default(), |t, x| {
        t.register(x.inner().slice(0..1))
    });
    let data = transaction.try_execute().map_err(read_failed)?;
    data.into_iter()
        .map(|d| {
            d.try_into_vec_as::<f64>()
                .map(|v| v[0])
                .map_err(read_failed)
        })
        .collect()
}
