//! Accumulated steps (`--accum`) as graphs: each batch shape's forward and backward
//! captured and replayed with the gradients summed on the device, then the update captured
//! and replayed on its own.

use std::collections::HashMap;
use std::rc::Rc;

use transduce::Transformer;
use transduce::burn::backend::Dispatch;
use transduce::burn::module::{Module, ModuleVisitor, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::dropout::with_device_masks;
use transduce::train::{TeacherForced, loss};

use super::adam::DeviceAdam;
use super::params::{flat_grads, slots};
use super::replay::{Driven, GraphTrainer, Inputs, drive};
use crate::error::{Error, Result};
use transduce_kernels::adam::{AdamKernel, GROUP};
use transduce_kernels::dropout::step_masks;

impl GraphTrainer {
    /// One optimizer step over several batches (`--accum`): each batch's gradients of the
    /// loss over `tokens`, the target tokens of them all, are added up on the device, then
    /// Adam applies their sum, as the eager trainer's accumulation does. Each batch shape's
    /// forward and backward is captured and replayed like a whole step, and so is the
    /// update: a step of k batches is k + 1 replays. Returns `[loss, nll]` summed over the
    /// batches, followed under a loss scale by its state.
    pub fn step_group(
        &mut self,
        model: Transformer,
        batches: &[TeacherForced],
        tokens: usize,
        step: u64,
        lr: &dyn Fn(u64) -> f64,
    ) -> Result<(Transformer, Tensor<1>)> {
        if batches.len() == 1 {
            return self.step(model, &batches[0], step, lr);
        }
        self.check_capturable(&model);
        self.adam.prepare(step, lr)?;
        let indexed: Vec<(usize, &TeacherForced)> = batches.iter().enumerate().collect();
        let (model, total) = self.accumulate_batches(model, &indexed, tokens, batches.len())?;
        let scaled = self.adam.scale.is_some();
        let (model, after) = self.update(model, None)?;
        let mut sums = vec![total];
        if scaled {
            sums.push(after);
        }
        // Counted as one step: the batches' runs were counted one by one.
        Ok((model, Tensor::cat(sums, 0)))
    }

    /// The forward and backward passes of `batches`, each `(its index in the step's group
    /// of `group` batches, the batch)`, their gradients of the loss over `tokens` summed
    /// into [`GraphTrainer::accumulated`]. Returns `[loss, nll]` summed over them. With one
    /// batch that is the replay's own output, which its next replay overwrites.
    pub(super) fn accumulate_batches(
        &mut self,
        model: Transformer,
        batches: &[(usize, &TeacherForced)],
        tokens: usize,
        group: usize,
    ) -> Result<(Transformer, Tensor<1>)> {
        let inner = self.device.clone().inner();
        let epsilon = self.epsilon;
        // Dropout draws from (step × group + the batch's index): a batch draws the same
        // masks whichever rank runs it.
        let masks = (!self.cpu).then_some((self.seed, group));
        let mut model = model;
        let mut total: Option<Tensor<1>> = None;
        let mut next = 0;
        while next < batches.len() {
            let (index, forced) = batches[next];
            let flags = [tokens as f32, (next == 0) as u8 as f32, index as f32];
            let values = Tensor::from_data(TensorData::new(flags.to_vec(), [3]), &inner);
            self.flags.inplace(|old| old.slice_assign(0..3, values));
            let shape = self.class_for(forced)?;
            let class = self.classes.get_mut(&shape).expect("the class was made");
            let (adam, flags, accumulated) = (&self.adam, &self.flags, &mut self.accumulated);
            let driven = drive(
                &mut class.batch_mode,
                &inner,
                &mut self.counts,
                !self.eager_only,
                &format!("the gradients of shape {shape:?}"),
                model,
                &mut |model| {
                    run_gradients(
                        model,
                        adam,
                        &class.inputs,
                        flags,
                        accumulated,
                        epsilon,
                        masks,
                    )
                },
            )?;
            let sums = match driven {
                Driven::Ran(ran, sums) => {
                    model = ran;
                    sums
                }
                Driven::Refused(ran, why) => {
                    // Nothing ran: the same batch again, eagerly.
                    self.fallback = Some(why);
                    model = ran;
                    continue;
                }
                Driven::NoGraphs(ran, sums, why) => {
                    self.no_graphs(why);
                    model = ran;
                    sums
                }
            };
            total = Some(match total {
                // Added before the next replay runs (a replay drains the queue first).
                Some(total) => total.add(sums),
                // A copy where another batch follows: its replay may be this one's graph.
                None if batches.len() > 1 => sums.mul_scalar(1.0),
                None => sums,
            });
            next += 1;
        }
        let total = total.ok_or_else(|| Error::Usage("a training step with no batch".into()))?;
        Ok((model, total))
    }

    /// The update of an accumulated step, captured once and replayed: Adam over the
    /// gradient sums in [`GraphTrainer::accumulated`], or (`exchanged`, a rank of a job)
    /// over the ranks' sums in the exchange's buffer. Returns the model and, under a loss
    /// scale, its state after the step: the replay's own output.
    pub(super) fn update(
        &mut self,
        model: Transformer,
        exchanged: Option<&Tensor<1>>,
    ) -> Result<(Transformer, Tensor<1>)> {
        let inner = self.device.clone().inner();
        let layout = self.exchange.as_ref().map(|e| e.layout.as_slice());
        let source = match (exchanged, layout) {
            (Some(flat), Some(layout)) => Sums::Flat(flat, layout),
            _ => Sums::Accumulated(&self.accumulated),
        };
        let adam = &mut self.adam;
        let driven = drive(
            &mut self.update_mode,
            &inner,
            &mut self.counts,
            !self.eager_only,
            "the update",
            model,
            &mut |model| run_update(model, adam, &source),
        )?;
        Ok(match driven {
            Driven::Ran(model, after) => (model, after),
            Driven::Refused(model, why) => {
                self.fallback = Some(why);
                let (model, after) = run_update(model, &mut self.adam, &source);
                self.counts.eager += 1;
                (model, after)
            }
            Driven::NoGraphs(model, after, why) => {
                self.no_graphs(why);
                (model, after)
            }
        })
    }
}

/// One batch's part of an accumulated step (`--accum`), eager: forward, the label-smoothed
/// loss over the step's target tokens (`flags`: `[tokens, first batch, batch]`, written
/// before each run), backward, and the gradients added into `accumulated` in place
/// ([`AdamKernel::accumulate_group`]), four parameters a launch. Returns the model and
/// `[loss, nll]`. Dropout masks are drawn from (step × batches + batch), so each batch of
/// a step draws its own.
fn run_gradients(
    model: Transformer,
    adam: &DeviceAdam,
    inputs: &Inputs,
    flags: &Tensor<1>,
    accumulated: &mut HashMap<ParamId, Tensor<1>>,
    epsilon: f64,
    masks: Option<(u64, usize)>,
) -> (Transformer, Tensor<1>) {
    let forward = || model.forward_focused(inputs.src.clone(), inputs.tgt_in.clone(), None);
    let logits = match masks {
        Some((seed, accum)) if model.config().dropout > 0.0 => {
            let draw = adam
                .steps_taken()
                .mul_scalar(accum as f64)
                .add(flags.clone().slice(2..3));
            with_device_masks(Rc::new(step_masks(draw, seed)), forward)
        }
        _ => forward(),
    };
    let sums = loss::label_smoothed(logits, inputs.tgt_out.clone(), epsilon, model.fused());
    let loss = sums.smoothed.div(flags.clone().slice(0..1).autodiff());
    let scaled = match adam.loss_scale() {
        Some(scale) => loss.clone().mul(scale.autodiff()),
        None => loss.clone(),
    };
    let grads = GradientsParams::from_grads(scaled.backward(), &model);
    accumulate(grads, &model, accumulated, flags, &adam.unused_slot);
    (
        model,
        Tensor::cat(vec![loss.detach().inner(), sums.nll.inner()], 0),
    )
}

/// Adds `grads` into `accumulated` (one flattened buffer per parameter, made on first use),
/// in place, four parameters a launch; on the step's first batch the buffers take the
/// gradients as they are.
fn accumulate(
    grads: GradientsParams,
    model: &Transformer,
    accumulated: &mut HashMap<ParamId, Tensor<1>>,
    flags: &Tensor<1>,
    unused: &Tensor<1>,
) {
    let device = &unused.device();
    let mut flat = flat_grads(&grads, model);
    flat.sort_by_key(|(id, g)| (g.dims()[0], id.val()));
    for group in flat.chunks(GROUP) {
        let mut args = Vec::with_capacity(2 * GROUP);
        for (id, grad) in group {
            let n = grad.dims()[0];
            let sum = accumulated
                .remove(id)
                .unwrap_or_else(|| Tensor::zeros([n], device));
            args.extend([sum, grad.clone()]);
        }
        let mut next = slots(args, unused);
        let sums = <Dispatch as AdamKernel>::accumulate_group(
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
            flags.clone().into_dispatch(),
            group.len(),
        );
        for ((id, _), sum) in group.iter().zip([sums.0, sums.1, sums.2, sums.3]) {
            accumulated.insert(*id, Tensor::from_dispatch(sum));
        }
    }
}

/// Where an update's gradients are: each parameter's own sum ([`accumulate`]), or one
/// flat buffer of every parameter's, in a layout's order (a rank's exchange).
pub(super) enum Sums<'a> {
    Accumulated(&'a HashMap<ParamId, Tensor<1>>),
    Flat(&'a Tensor<1>, &'a [(ParamId, Vec<usize>)]),
}

/// The update of an accumulated step, eager: Adam over the sums of the step's gradients.
/// Returns the model and, under a loss scale, its state after the step (otherwise the
/// step count, which nothing reads).
fn run_update(model: Transformer, adam: &mut DeviceAdam, sums: &Sums) -> (Transformer, Tensor<1>) {
    struct Register<'a> {
        accumulated: &'a HashMap<ParamId, Tensor<1>>,
        grads: GradientsParams,
    }
    impl ModuleVisitor for Register<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(sum) = self.accumulated.get(&param.id) {
                let dims: [usize; D] = param.val().dims();
                self.grads
                    .register::<D>(param.id, sum.clone().reshape(dims));
            }
        }
    }
    let sliced;
    let accumulated = match sums {
        Sums::Accumulated(accumulated) => *accumulated,
        Sums::Flat(flat, layout) => {
            // Views of the one buffer, in the layout's order.
            let mut offset = 0;
            sliced = layout
                .iter()
                .map(|(id, dims)| {
                    let n: usize = dims.iter().product();
                    offset += n;
                    (*id, (*flat).clone().slice(offset - n..offset))
                })
                .collect::<HashMap<_, _>>();
            &sliced
        }
    };
    let mut register = Register {
        accumulated,
        grads: GradientsParams::new(),
    };
    model.visit(&mut register);
    let model = adam.step(model, register.grads);
    let after = adam.scale_state().unwrap_or_else(|| adam.steps_taken());
    (model, after)
}
