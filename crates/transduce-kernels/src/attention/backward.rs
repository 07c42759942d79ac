//! The attention's autodiff: the forward records its backward, which runs the two backward
//! kernels.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::{Autodiff, AutodiffBackend, tensor::FloatTensor};

use super::forward::AttentionKernel;

impl<B: AttentionKernel, C: CheckpointStrategy> AttentionKernel for Autodiff<B, C> {
    fn attention_heads(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        #[derive(Debug)]
        struct Attention;

        /// Queries, keys, values, mask, weights; heads and whether masked.
        type State<B> = ([FloatTensor<B>; 5], usize, bool);

        impl<B: AttentionKernel> Backward<B, 3> for Attention {
            type State = State<B>;

            fn backward(
                self,
                ops: Ops<Self::State, 3>,
                grads: &mut Gradients,
                _checkpointer: &mut Checkpointer,
            ) {
                let [q_node, k_node, v_node] = ops.parents;
                let d_out = grads.consume::<B>(&ops.node);
                let ([q, k, v, mask, weights], heads, masked) = ops.state;
                let (dq, d_scores) = B::attention_heads_backward_queries(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    mask,
                    weights.clone(),
                    d_out.clone(),
                    heads,
                    masked,
                );
                if k_node.is_some() || v_node.is_some() {
                    let (dk, dv) =
                        B::attention_heads_backward_keys(q, k, v, weights, d_scores, d_out, heads);
                    if let Some(node) = k_node {
                        grads.register::<B>(node.id, dk);
                    }
                    if let Some(node) = v_node {
                        grads.register::<B>(node.id, dv);
                    }
                }
                if let Some(node) = q_node {
                    grads.register::<B>(node.id, dq);
                }
            }
        }

        let mask_inner = mask.into_primitive();
        match Attention
            .prepare::<C>([q.node(), k.node(), v.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (q, k, v) = (q.into_primitive(), k.into_primitive(), v.into_primitive());
                let (out, weights) = B::attention_heads(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    mask_inner.clone(),
                    heads,
                    masked,
                );
                let state = ([q, k, v, mask_inner, weights.clone()], heads, masked);
                (prep.finish(state, out), Self::from_inner(weights))
            }
            OpsKind::UnTracked(prep) => {
                let (out, weights) = B::attention_heads(
                    q.into_primitive(),
                    k.into_primitive(),
                    v.into_primitive(),
                    mask_inner,
                    heads,
                    masked,
                );
                (prep.finish(out), Self::from_inner(weights))
            }
        }
    }

    fn attention_heads_backward_queries(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        mask: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
        masked: bool,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        // A backward is not itself differentiated: its outputs are constants.
        let (dq, ds) = B::attention_heads_backward_queries(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            mask.into_primitive(),
            weights.into_primitive(),
            d_out.into_primitive(),
            heads,
            masked,
        );
        (Self::from_inner(dq), Self::from_inner(ds))
    }

    fn attention_heads_backward_keys(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        d_scores: FloatTensor<Self>,
        d_out: FloatTensor<Self>,
        heads: usize,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (dk, dv) = B::attention_heads_backward_keys(
            q.into_primitive(),
            k.into_primitive(),
            v.into_primitive(),
            weights.into_primitive(),
            d_scores.into_primitive(),
            d_out.into_primitive(),
            heads,
        );
        (Self::from_inner(dk), Self::from_inner(dv))
    }
}
