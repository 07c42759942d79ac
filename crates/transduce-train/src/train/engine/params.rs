//! Walks over a model's parameters for [`super::adam::DeviceAdam`]: the gradients
//! flattened in the model's order, the slots of a group kernel, and the mappers that take
//! the parameters out of the model and put the updated ones back.

use std::collections::HashMap;

use transduce::Transformer;
use transduce::burn::backend::DispatchTensor;
use transduce::burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;

/// Each gradient in `grads` of `model`'s parameters, flattened, in the model's order.
pub(super) fn flat_grads(
    grads: &GradientsParams,
    model: &Transformer,
) -> Vec<(ParamId, Tensor<1>)> {
    struct Flat<'a> {
        grads: &'a GradientsParams,
        flat: Vec<(ParamId, Tensor<1>)>,
    }
    impl ModuleVisitor for Flat<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.get::<D>(param.id) {
                let n = grad.shape().num_elements();
                self.flat.push((param.id, grad.reshape([n])));
            }
        }
    }
    let mut visitor = Flat {
        grads,
        flat: Vec::new(),
    };
    model.visit(&mut visitor);
    visitor.flat
}

/// A group operation's arguments one at a time: `args`, then `unused` (never read or
/// written) for every slot past them.
pub(super) fn slots(
    args: Vec<Tensor<1>>,
    unused: &Tensor<1>,
) -> impl FnMut() -> DispatchTensor + '_ {
    let mut args = args.into_iter();
    move || {
        args.next()
            .unwrap_or_else(|| unused.clone())
            .into_dispatch()
    }
}

/// A parameter taken out of the model for [`DeviceAdam::step_grouped`], flattened.
pub(super) struct Taken {
    pub(super) id: ParamId,
    pub(super) param: Tensor<1>,
    pub(super) grad: Tensor<1>,
    pub(super) dims: Vec<usize>,
    pub(super) require_grad: bool,
}

/// Takes every parameter with a gradient out of the model, leaving an empty placeholder.
pub(super) struct Take {
    pub(super) grads: GradientsParams,
    pub(super) taken: Vec<Taken>,
}

impl ModuleMapper for Take {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let dims = tensor.dims();
        let n = tensor.shape().num_elements();
        let placeholder = Tensor::empty(dims, &tensor.device());
        self.taken.push(Taken {
            id,
            require_grad: tensor.is_require_grad(),
            param: tensor.inner().reshape([n]),
            grad: grad.reshape([n]),
            dims: dims.to_vec(),
        });
        Param::from_mapped_value(id, placeholder, mapper)
    }
}

/// Puts the updated parameters back in place of [`Take`]'s placeholders.
pub(super) struct Put {
    /// Each parameter's updated values, and whether it takes gradients.
    pub(super) updated: HashMap<ParamId, (Tensor<1>, bool)>,
}

impl ModuleMapper for Put {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some((updated, require_grad)) = self.updated.remove(&id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let updated = updated.reshape(tensor.dims()).autodiff();
        let updated = if require_grad {
            updated.require_grad()
        } else {
            updated
        };
        Param::from_mapped_value(id, updated, mapper)
    }
}
