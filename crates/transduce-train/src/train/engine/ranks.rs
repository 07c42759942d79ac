//! A rank's share of a data-parallel step as graphs (§5.2: the paper's 8 GPUs each took a
//! share of every batch). Rank r replays the gradients of batches j ≡ r (mod world) of the
//! step's group, summed on the device as `--accum` sums them; a captured *pack* copies
//! every parameter's sum into one flat buffer; the ranks sum that buffer (the exchange,
//! the only part that is not a replay); then the update's graph reads the ranks' sums from
//! it. So a step is the same few launches as on one device plus the exchange, and
//! dropout's masks are drawn from each batch's index in the group, so the ranks train
//! bit for bit like one process accumulating the whole group.
//!
//! The exchange goes through the host ([`Collective::all_reduce_sum`]: TCP or MPI), one
//! read of the buffer and the loss sums and one write back, or on CUDA through NCCL in
//! device memory ([`Collective::device_sums`]).

use transduce::Transformer;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{TensorData, Transaction};
use transduce::train::TeacherForced;

use super::gradient_buffer::Exchange;
use super::replay::{Driven, GraphTrainer, drive};
use crate::distributed::{Collective, DeviceSums};
use crate::error::{Error, Result};
use crate::train::observe::census;

impl GraphTrainer {
    /// One optimizer step of a data-parallel job, as rank `collective.rank()`: the
    /// gradients of its share of `group` (whose target tokens are `tokens`), the ranks'
    /// sums exchanged, then Adam on them, which every rank applies alike. Returns `[loss,
    /// nll]` summed over the whole group (every rank's), followed under a loss scale by its
    /// state. In half precision the finite check of the update sees the ranks' sums, so
    /// every rank skips an overflowing step together.
    pub fn step_ranked(
        &mut self,
        model: Transformer,
        group: &[TeacherForced],
        tokens: usize,
        step: u64,
        lr: &dyn Fn(u64) -> f64,
        collective: &dyn Collective,
    ) -> Result<(Transformer, Tensor<1>)> {
        self.check_capturable(&model);
        self.adam.prepare(step, lr)?;
        let inner = self.device.clone().inner();
        if self.exchange.is_none() {
            self.exchange = Some(Exchange::new(&model, &inner));
        }
        let (rank, world) = (collective.rank(), collective.world());
        let share: Vec<(usize, &TeacherForced)> =
            group.iter().enumerate().skip(rank).step_by(world).collect();
        let (model, loss) = match collective.device_sums() {
            None => self.exchange_on_host(model, &share, tokens, group.len(), collective)?,
            Some(sums) => self.exchange_on_device(model, &share, tokens, group.len(), sums)?,
        };
        let scaled = self.adam.scale.is_some();
        let flat = self.exchange.as_ref().expect("made above").flat.clone();
        let (model, after) = self.update(model, Some(&flat))?;
        drop(flat);
        Ok(match scaled {
            true => (model, Tensor::cat(vec![loss, after], 0)),
            false => (model, loss),
        })
    }

    /// This rank's `share` of the group run and packed, then the ranks' sums formed through
    /// host buffers: one read of the buffer and the loss sums, the host collective's
    /// all-reduce, one write back. Returns the model and the group's `[loss, nll]`.
    fn exchange_on_host(
        &mut self,
        model: Transformer,
        share: &[(usize, &TeacherForced)],
        tokens: usize,
        group: usize,
        collective: &dyn Collective,
    ) -> Result<(Transformer, Tensor<1>)> {
        let inner = self.device.clone().inner();
        let n = self.exchange.as_ref().map_or(0, Exchange::values);
        // A rank whose share of a short last group is empty adds zeros: its buffers still
        // hold the last step's sums.
        let (model, mut values) = match share.is_empty() {
            true => (model, vec![0.0; n + 2]),
            false => {
                let (model, total) = self.run_share(model, share, tokens, group)?;
                let flat = self.exchange.as_ref().expect("made before").flat.clone();
                (model, read(flat, n, total)?)
            }
        };
        collective.all_reduce_sum(&mut values)?;
        let loss = values.split_off(n);
        let sums = Tensor::<1>::from_data(TensorData::new(values, [n]), &inner);
        let exchange = self.exchange.as_mut().expect("made before");
        exchange.flat.inplace(|flat| flat.slice_assign(0..n, sums));
        Ok((model, Tensor::from_data(TensorData::new(loss, [2]), &inner)))
    }

    /// This rank's `share` of the group run and packed, its loss sums written after the
    /// gradients, then the whole buffer summed over the ranks in device memory. Returns
    /// the model and the group's `[loss, nll]` (a copy, on the device).
    fn exchange_on_device(
        &mut self,
        model: Transformer,
        share: &[(usize, &TeacherForced)],
        tokens: usize,
        group: usize,
        sums: &dyn DeviceSums,
    ) -> Result<(Transformer, Tensor<1>)> {
        let n = self.exchange.as_ref().map_or(0, Exchange::values);
        let model = match share.is_empty() {
            true => {
                let exchange = self.exchange.as_mut().expect("made before");
                let device = exchange.flat.device();
                exchange
                    .flat
                    .inplace(|flat| flat.slice_assign(0..n + 2, Tensor::zeros([n + 2], &device)));
                model
            }
            false => {
                let (model, total) = self.run_share(model, share, tokens, group)?;
                let exchange = self.exchange.as_mut().expect("made before");
                exchange
                    .flat
                    .inplace(|flat| flat.slice_assign(n..n + 2, total.slice(0..2)));
                model
            }
        };
        let flat = &self.exchange.as_ref().expect("made before").flat;
        sums.all_reduce_in_place(flat)?;
        // A copy: the next step writes the buffer.
        Ok((model, flat.clone().slice(n..n + 2).mul_scalar(1.0)))
    }

    /// This rank's `share` of a group of `group` batches: its gradients summed on the
    /// device, then packed into the exchange's buffer. Returns the model and the share's
    /// `[loss, nll]`.
    fn run_share(
        &mut self,
        model: Transformer,
        share: &[(usize, &TeacherForced)],
        tokens: usize,
        group: usize,
    ) -> Result<(Transformer, Tensor<1>)> {
        let (model, total) = self.accumulate_batches(model, share, tokens, group)?;
        Ok((self.pack(model)?, total))
    }

    /// Copies every parameter's gradient sum into the exchange's buffer, in its layout's
    /// order: a graph like the others, captured after the same warm-up.
    fn pack(&mut self, model: Transformer) -> Result<Transformer> {
        let inner = self.device.clone().inner();
        let exchange = self.exchange.as_mut().expect("made before the pack");
        let accumulated = &self.accumulated;
        if let Some((_, dims)) = exchange
            .layout
            .iter()
            .find(|(id, _)| !accumulated.contains_key(id))
        {
            return Err(Error::Usage(format!(
                "a parameter of shape {dims:?} has no gradient: the ranks' graph steps sum every parameter's; train with --eager"
            )));
        }
        let (layout, flat) = (&exchange.layout, &mut exchange.flat);
        let driven = drive(
            &mut self.pack_mode,
            &inner,
            &mut self.counts,
            !self.eager_only,
            "the gradients' pack",
            model,
            &mut |model| {
                flat.inplace(|flat| {
                    let mut offset = 0;
                    layout.iter().fold(flat, |flat, (id, dims)| {
                        let n: usize = dims.iter().product();
                        offset += n;
                        flat.slice_assign(offset - n..offset, accumulated[id].clone())
                    })
                });
                // Nothing to hand back: a value of its own, so the graph holds no buffer
                // another step writes in place.
                (model, Tensor::zeros([1], &inner))
            },
        )?;
        Ok(match driven {
            Driven::Ran(model, _) => model,
            Driven::Refused(model, why) => {
                // Nothing ran, and the pack is eager from now on: run it so.
                self.fallback = Some(why);
                return self.pack(model);
            }
            Driven::NoGraphs(model, _, why) => {
                self.no_graphs(why);
                model
            }
        })
    }
}

/// The buffer's first `n` values (the gradients) followed by the loss sums `[loss, nll]`,
/// in one read. The whole buffer is read: a slice of it would be copied first, a launch.
fn read(flat: Tensor<1>, n: usize, total: Tensor<1>) -> Result<Vec<f32>> {
    fn failed(e: impl std::fmt::Debug) -> Error {
        Error::Usage(format!("reading the gradient sums failed: {e:?}"))
    }
    census::note_read();
    let mut data = Transaction::default()
        .register(flat)
        .register(total)
        .try_execute()
        .map_err(failed)?
        .into_iter();
    let mut next = || -> Result<Vec<f32>> {
        let read = data.next().ok_or_else(|| failed("a value was not read"))?;
        read.try_into_vec_as::<f32>().map_err(failed)
    };
    let mut values = next()?;
    values.truncate(n);
    values.extend(next()?.into_iter().take(2));
    Ok(values)
}
