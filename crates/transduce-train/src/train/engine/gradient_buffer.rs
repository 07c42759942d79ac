//! The buffer the ranks of a job sum their gradients in ([`super::ranks`]).

use transduce::Transformer;
use transduce::burn::module::ParamId;
use transduce::burn::prelude::*;

use crate::distributed::reduce::parameters;

/// Every float parameter's gradient sum in one flat buffer.
pub(crate) struct Exchange {
    /// Every float parameter's id and shape, in the model's order: the buffer's layout.
    pub(super) layout: Vec<(ParamId, Vec<usize>)>,
    /// The gradient sums, flattened in the layout's order, then `[loss, nll]` (summed there
    /// when the sums are formed on the device): this rank's after the pack, every rank's
    /// after the exchange. Written in place only, so the graphs that read or write it keep
    /// finding it.
    pub(super) flat: Tensor<1>,
}

impl Exchange {
    /// The buffer for `model`'s parameters on `device` (the model's inner device).
    pub(super) fn new(model: &Transformer, device: &Device) -> Self {
        let layout = parameters(model);
        let values: usize = layout
            .iter()
            .map(|(_, dims)| dims.iter().product::<usize>())
            .sum();
        Exchange {
            layout,
            // The loss sums after the gradients' (summed there on the device).
            flat: Tensor::zeros([values + 2], device),
        }
    }

    /// The gradients' values (the loss sums follow them).
    pub(super) fn values(&self) -> usize {
        self.flat.dims()[0] - 2
    }
}
