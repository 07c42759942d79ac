//! The norm's autodiff: the forward records its backward, which runs the backward kernel
//! and sums γ's and β's gradients over the rows.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, AutodiffBackend, Backend, tensor::FloatTensor};
use burn::tensor::Slice;

use super::forward::LayerNormKernel;

/// The column sums of a `[rows, d]` tensor, as `[d]`.
fn column_sums<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let [_, d] = burn::backend::TensorMetadata::shape(&t).dims::<2>();
    B::float_reshape(B::float_sum_dim(t, 0), [d].into())
}

impl<B: LayerNormKernel, C: CheckpointStrategy> LayerNormKernel for Autodiff<B, C> {
    fn layer_norm_rows(
        z: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> FloatTensor<Self> {
        #[derive(Debug)]
        struct Norm;

        impl<B: LayerNormKernel> Backward<B, 3> for Norm {
            /// The norm's input and γ, and ε.
            type State = (FloatTensor<B>, FloatTensor<B>, f64);

            fn backward(
                self,
                ops: Ops<Self::State, 3>,
                grads: &mut Gradients,
                _checkpointer: &mut Checkpointer,
            ) {
                let [z_node, gamma_node, beta_node] = ops.parents;
                let dy = grads.consume::<B>(&ops.node);
                let (z, gamma, epsilon) = ops.state;
                let (dz, stacked) = B::layer_norm_rows_backward(z, gamma, dy, epsilon);
                if gamma_node.is_some() || beta_node.is_some() {
                    let sums = column_sums::<B>(stacked);
                    let d = burn::backend::TensorMetadata::shape(&sums)[0] / 2;
                    let half = |from: usize| {
                        let range = Slice::new(from as isize, Some((from + d) as isize), 1);
                        B::float_slice(sums.clone(), &[range])
                    };
                    if let Some(node) = gamma_node {
                        grads.register::<B>(node.id, half(0));
                    }
                    if let Some(node) = beta_node {
                        grads.register::<B>(node.id, half(d));
                    }
                }
                if let Some(node) = z_node {
                    grads.register::<B>(node.id, dz);
                }
            }
        }

        match Norm
            .prepare::<C>([z.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = (z.primitive().clone(), gamma.primitive().clone(), epsilon);
                let out = B::layer_norm_rows(
                    z.into_primitive(),
                    gamma.into_primitive(),
                    beta.into_primitive(),
                    epsilon,
                );
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::layer_norm_rows(
                z.into_primitive(),
                gamma.into_primitive(),
                beta.into_primitive(),
                epsilon,
            )),
        }
    }

    fn layer_norm_rows_backward(
        z: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        dy: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        // A backward is not itself differentiated: its outputs are constants.
        let (dz, stacked) = B::layer_norm_rows_backward(
            z.into_primitive(),
            gamma.into_primitive(),
            dy.into_primitive(),
            epsilon,
        );
        (Self::from_inner(dz), Self::from_inner(stacked))
    }
}
