//! The device-scalar Adam of captured steps: §5.3's update with its scalars (step, learning
//! rate, bias corrections, the loss scale) in device buffers, so a replayed step advances
//! them with no host value changed. Its checkpoint format is in [`super::record`], the
//! mappers that take parameters out of the model and put them back in [`super::params`].

use std::collections::HashMap;
use std::ops::Range;

use transduce::burn::backend::Dispatch;
use transduce::burn::module::{Module, ModuleMapper, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::TensorData;
use transduce::ops::is_cpu;
use transduce::{Precision, Transformer};
use transduce_kernels::adam::{AdamKernel, BETA_1, BETA_2, EPSILON, GROUP, reference};

use super::loss_scale::{GROWTH_INTERVAL, INITIAL_SCALE, LossScale};
use super::params::{Put, Take, Taken, flat_grads, slots};
use crate::error::{Error, Result};
use crate::train::observe::census;

/// Adam with §5.3's β1 0.9, β2 0.98, ε 10⁻⁹, computed as burn's `Adam` computes it (the
/// same operations in the same order, so the same bits), but with its scalars on the
/// device. Two device counters: the optimizer steps taken, which index a device table of
/// the schedule's learning rates, and the updates applied (Adam's time t), which index a
/// table of the combined bias correction √(1−β2ᵗ)/(1−β1ᵗ) and ε·√(1−β2ᵗ). Both tables are
/// filled on the host `window` rows at a time. The counters differ only where steps were
/// skipped: a half-precision step whose gradients overflowed advances the step (and the
/// schedule) but not Adam's time, as burn's `Adam` does when the trainer skips it.
pub struct DeviceAdam {
    /// First and second moments per parameter, flattened, in their own buffers, and the
    /// parameter's shape.
    pub(super) moments: HashMap<ParamId, Moments>,
    /// Updates applied before the first step of this run (Adam's time in the record).
    pub(super) resumed_at: u64,
    /// Adam's time, `[1]`: updates applied so far.
    pub(super) time: Tensor<1, Int>,
    /// Optimizer steps taken, `[1]` (set from the first step's number).
    pub(super) steps: Tensor<1, Int>,
    /// `[window]`: the learning rate of step s at row (s − 1) mod window.
    pub(super) lrs: Tensor<1>,
    /// The steps (1-based) `lrs` holds.
    pub(super) lrs_filled: Range<u64>,
    /// `[window, 2]`: combined bias correction and scaled ε of time t at row (t − 1) mod
    /// window.
    pub(super) corrections: Tensor<2>,
    /// The times (1-based) `corrections` holds.
    pub(super) corrections_filled: Range<u64>,
    /// What the host knows of Adam's time: its value before step `.1` was `.0`. Exact
    /// without a loss scale (every step updates); a lower bound with one.
    pub(super) time_known: Option<(u64, u64)>,
    pub(super) window: usize,
    pub(super) device: Device,
    /// Updates by [`transduce_kernels::adam`]'s kernel (GPU backends) rather than tensor
    /// operations.
    pub(super) fused: bool,
    /// Half precision's loss scale, on the device.
    pub(super) scale: Option<DeviceScale>,
    /// What fills a group's slots past its parameters (never read or written).
    pub(super) unused_slot: Tensor<1>,
}

/// Half precision's dynamic loss scale ([`LossScale`]) kept on the device, so that the
/// check of a step's gradients and the skip of an overflowing step need no read: `[scale,
/// clean steps, skipped steps]`, updated in place by every step.
pub(super) struct DeviceScale {
    pub(super) state: Tensor<1>,
    /// f16 halves and doubles its scale; bf16 keeps 1 and only counts skips.
    pub(super) dynamic: bool,
    /// Clean steps after which the scale doubles.
    pub(super) growth: u64,
}

/// One parameter's moments.
pub(super) struct Moments {
    pub(super) first: Tensor<1>,
    pub(super) second: Tensor<1>,
    pub(super) dims: Vec<usize>,
}

/// Row `t`'s combined bias correction and scaled ε, as burn computes them (f32 `powi`).
pub(super) fn corrections_at(t: u64) -> [f32; 2] {
    let time = t as i32;
    let bias_correction2_sqrt = (1.0 - BETA_2.powi(time)).sqrt();
    let combined = bias_correction2_sqrt / (1.0 - BETA_1.powi(time));
    [combined as f32, (EPSILON * bias_correction2_sqrt) as f32]
}

impl DeviceAdam {
    /// Adam as §5.3 sets it, on `device` (its inner device: the state takes no gradients),
    /// `updates` already applied (0 for a new run), its tables `window` steps long.
    pub fn new(device: &Device, updates: u64, window: usize) -> Self {
        let device = device.clone().inner();
        let counter =
            |value: u64| Tensor::from_data(TensorData::new(vec![value as i32], [1]), &device);
        DeviceAdam {
            fused: !is_cpu(&device),
            moments: HashMap::new(),
            resumed_at: updates,
            time: counter(updates),
            steps: counter(0),
            lrs: Tensor::zeros([window], &device),
            lrs_filled: 0..0,
            corrections: Tensor::zeros([window, 2], &device),
            corrections_filled: 0..0,
            time_known: None,
            window,
            unused_slot: Tensor::zeros([1], &device),
            device,
            scale: None,
        }
    }

    /// Scales the loss by `scale` (half precision): each step's gradients are unscaled and
    /// checked on the device, a step with any that is not finite is skipped there, and the
    /// scale backs off and grows as [`LossScale::update`] says, in place.
    pub fn with_loss_scale(mut self, scale: &LossScale, precision: Precision) -> Self {
        let state = [scale.scale, scale.clean_steps as f64, scale.skipped as f64];
        self.scale = Some(DeviceScale {
            state: Tensor::from_data(
                TensorData::new(state.map(|x| x as f32).to_vec(), [3]),
                &self.device,
            ),
            dynamic: precision == Precision::F16,
            growth: GROWTH_INTERVAL,
        });
        self
    }

    /// Adam's time, read from the device (for tests).
    pub fn time(&self) -> u64 {
        self.time
            .clone()
            .into_data()
            .try_into_vec_as::<i64>()
            .unwrap()[0] as u64
    }

    /// The doubling interval of the loss scale (tests shorten it).
    pub fn growing_every(mut self, steps: u64) -> Self {
        if let Some(scale) = &mut self.scale {
            scale.growth = steps;
        }
        self
    }

    /// The optimizer steps taken so far, `[1]`, read from the device counter when the step
    /// runs (so a replay reads the current count).
    pub fn steps_taken(&self) -> Tensor<1> {
        self.steps.clone().float()
    }

    /// The loss scale of the coming step, `[1]`, where there is one.
    pub(super) fn loss_scale(&self) -> Option<Tensor<1>> {
        self.scale.as_ref().map(|s| s.state.clone().slice(0..1))
    }

    /// `[scale, clean steps, skipped steps]` as the last step left them, where there is a
    /// loss scale: a copy (the step rewrites the state's buffer).
    pub(super) fn scale_state(&self) -> Option<Tensor<1>> {
        self.scale.as_ref().map(|s| s.state.clone().mul_scalar(1.0))
    }

    /// Updates (and under a loss scale checks the gradients) by the group kernels where
    /// `fused` allows them and the device runs them (not the CPU), else by tensor
    /// operations, the kernels' oracle (`--no-fused-layers`, to compare). The accumulation of
    /// `--accum` stays a kernel either way: it has no tensor-operation form that writes the
    /// sums in place, which a replay needs.
    pub fn with_fused(mut self, fused: bool) -> Self {
        self.fused = fused && !is_cpu(&self.device);
        self
    }

    /// Makes sure the tables hold step `step` (1-based) of schedule `lr` and every time
    /// Adam may have reached by then, refilling them otherwise. Called before every step,
    /// outside any capture: host writes, and under a loss scale a read of the time once per
    /// `window` steps (skips make it unknown on the host).
    pub fn prepare(&mut self, step: u64, lr: &dyn Fn(u64) -> f64) -> Result<()> {
        let window = self.window as u64;
        let (known, at) = match self.time_known {
            Some(known) => known,
            None => {
                // The first step: the step counter starts from its number.
                let steps =
                    Tensor::from_data(TensorData::new(vec![(step - 1) as i32], [1]), &self.device);
                self.steps.inplace(|old| old.slice_assign(0..1, steps));
                self.time_known = Some((self.resumed_at, step));
                (self.resumed_at, step)
            }
        };
        if !self.lrs_filled.contains(&step) {
            let mut rows = vec![0f32; self.window];
            for s in step..step + window {
                rows[((s - 1) % window) as usize] = lr(s) as f32;
            }
            let values = Tensor::from_data(TensorData::new(rows, [self.window]), &self.device);
            self.lrs
                .inplace(|old| old.slice_assign(0..self.window, values));
            self.lrs_filled = step..step + window;
        }
        // Times this step may run at: exactly one without a loss scale.
        let reach = step - at;
        let lowest = if self.scale.is_some() {
            known
        } else {
            known + reach
        } + 1;
        let needed = lowest..known + reach + 2;
        if !(self.corrections_filled.contains(&needed.start)
            && self.corrections_filled.contains(&(needed.end - 1)))
        {
            let from = match self.scale {
                Some(_) => {
                    census::note_read();
                    let data = self.time.clone().into_data();
                    let time = data
                        .try_into_vec_as::<i64>()
                        .map_err(|e| Error::Usage(format!("device read failed: {e:?}")))?[0];
                    time as u64
                }
                None => known + reach,
            };
            self.time_known = Some((from, step));
            let mut rows = vec![0f32; self.window * 2];
            for t in from + 1..from + 1 + window {
                let row = ((t - 1) % window) as usize;
                rows[row * 2..row * 2 + 2].copy_from_slice(&corrections_at(t));
            }
            let values = Tensor::from_data(TensorData::new(rows, [self.window, 2]), &self.device);
            self.corrections
                .inplace(|old| old.slice_assign([0..self.window, 0..2], values));
            self.corrections_filled = from + 1..from + 1 + window;
        }
        Ok(())
    }

    /// This step's `[learning rate, combined bias correction, scaled ε]` (then, under a
    /// loss scale, `[1/scale, ok]`), and the counters advanced (time only where `ok`), all
    /// on the device.
    pub(super) fn scalars(&mut self, ok: Option<&Tensor<1>>) -> Tensor<1> {
        let window = self.window as i64;
        let lr = self
            .lrs
            .clone()
            .select(0, self.steps.clone().remainder_scalar(window));
        let corrections = self
            .corrections
            .clone()
            .select(0, self.time.clone().remainder_scalar(window))
            .reshape([2]);
        let steps = self.steps.clone().add_scalar(1);
        self.steps.inplace(|old| old.slice_assign(0..1, steps));
        let time = match ok {
            Some(ok) => self.time.clone().add(ok.clone().int()),
            None => self.time.clone().add_scalar(1),
        };
        self.time.inplace(|old| old.slice_assign(0..1, time));
        match (ok, self.loss_scale()) {
            (Some(ok), Some(scale)) => {
                Tensor::cat(vec![lr, corrections, scale.recip(), ok.clone()], 0)
            }
            _ => Tensor::cat(vec![lr, corrections], 0),
        }
    }

    /// Advances the loss scale after a step (`ok`: its gradients were all finite), in
    /// place, as [`LossScale::update`] does on the host.
    pub(super) fn update_scale(&mut self, ok: &Tensor<1>) {
        let Some(scale) = &mut self.scale else {
            return;
        };
        // No handle on the state may outlive these reads: the write below goes in place
        // only into a buffer nothing else holds.
        let [value, clean, skipped] = [0, 1, 2].map(|i| scale.state.clone().slice(i..i + 1));
        let bad = ok.clone().equal_elem(0.0);
        let skipped = skipped.add(ok.clone().neg().add_scalar(1.0));
        // A clean step counts one more, an overflow restarts the count.
        let clean = clean.add_scalar(1.0).mul(ok.clone());
        let (value, clean) = if scale.dynamic {
            let grow = clean.clone().greater_equal_elem(scale.growth as f64);
            let halved = value.clone().div_scalar(2.0).clamp_min(1.0);
            let doubled = value
                .clone()
                .mul_scalar(2.0)
                .clamp_max(INITIAL_SCALE * 256.0);
            let value = value
                .mask_where(grow.clone(), doubled)
                .mask_where(bad, halved);
            let clean = clean.clone().mask_where(grow, clean.zeros_like());
            (value, clean)
        } else {
            (value, clean)
        };
        let next = Tensor::cat(vec![value, clean, skipped], 0);
        scale.state.inplace(|old| old.slice_assign(0..3, next));
    }

    /// A parameter's moments, flattened (zeros before its first update).
    pub(super) fn take_moments(&mut self, id: ParamId, n: usize) -> (Tensor<1>, Tensor<1>) {
        match self.moments.remove(&id) {
            Some(Moments { first, second, .. }) => (first, second),
            None => (
                Tensor::zeros([n], &self.device),
                Tensor::zeros([n], &self.device),
            ),
        }
    }

    /// One parameter's update as tensor operations, written back into the parameter's and
    /// the moments' buffers.
    pub(super) fn update<const D: usize>(
        &mut self,
        id: ParamId,
        param: Tensor<D>,
        grad: Tensor<D>,
        scalars: &Tensor<1>,
    ) -> Tensor<D> {
        let dims = param.dims();
        let n = param.shape().num_elements();
        let (m, v) = self.take_moments(id, n);
        let (next, m, v) =
            self.update_by_operations(param.reshape([n]), grad.reshape([n]), m, v, scalars);
        self.moments.insert(
            id,
            Moments {
                first: m,
                second: v,
                dims: dims.to_vec(),
            },
        );
        next.reshape(dims)
    }

    /// Every parameter's update by [`AdamKernel::adam_group_in_place`], [`GROUP`]
    /// parameters a launch (a multi-tensor Adam: for `small`, 28 launches where one per
    /// parameter took 110), each written back into its own buffers. The parameters are taken
    /// out of the model first (an empty placeholder in their place), so the kernel holds the
    /// only handle on each buffer and writes it in place; groups join parameters of similar
    /// sizes, since a launch spans its largest.
    pub(super) fn step_grouped(
        &mut self,
        model: Transformer,
        grads: GradientsParams,
        scalars: Tensor<1>,
    ) -> Transformer {
        let mut take = Take {
            grads,
            taken: Vec::new(),
        };
        let model = model.map(&mut take);
        let mut taken = take.taken;
        taken.sort_by_key(|t| (t.param.dims()[0], t.id.val()));
        let mut updated = HashMap::new();
        while !taken.is_empty() {
            let group: Vec<Taken> = taken.drain(..GROUP.min(taken.len())).collect();
            let mut args = Vec::with_capacity(4 * GROUP);
            let mut ids = Vec::with_capacity(GROUP);
            for t in group {
                let (m, v) = self.take_moments(t.id, t.param.dims()[0]);
                args.extend([t.param, t.grad, m, v]);
                ids.push((t.id, t.dims, t.require_grad));
            }
            let count = ids.len();
            let mut next = slots(args, &self.unused_slot);
            let slots = <Dispatch as AdamKernel>::adam_group_in_place(
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                next(),
                scalars.clone().into_dispatch(),
                count,
            );
            let slots = [slots.0, slots.1, slots.2, slots.3];
            for ((id, dims, require_grad), (p, m, v)) in ids.into_iter().zip(slots) {
                self.moments.insert(
                    id,
                    Moments {
                        first: Tensor::from_dispatch(m),
                        second: Tensor::from_dispatch(v),
                        dims,
                    },
                );
                updated.insert(id, (Tensor::<1>::from_dispatch(p), require_grad));
            }
        }
        drop(scalars);
        model.map(&mut Put { updated })
    }

    /// [`AdamKernel::adam_group_in_place`]'s update as tensor operations (the CPU's path,
    /// `--no-fused-layers`', and the kernel's oracle, [`reference::update`]), then the
    /// results copied back into the buffers. Under a loss scale, `scalars` also holds
    /// 1/scale and `ok`, and a step that is not `ok` leaves every value as it was.
    pub(super) fn update_by_operations(
        &self,
        flat: Tensor<1>,
        grad: Tensor<1>,
        m: Tensor<1>,
        v: Tensor<1>,
        scalars: &Tensor<1>,
    ) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let n = flat.dims()[0];
        let (next, m_next, v_next) =
            reference::update(flat.clone(), grad, m.clone(), v.clone(), scalars);
        // Written back in place (each is the only handle on its buffer here), so a replay
        // of the step reads what the last one wrote.
        (
            flat.slice_assign(0..n, next),
            m.slice_assign(0..n, m_next),
            v.slice_assign(0..n, v_next),
        )
    }

    /// Applies one update to every parameter of `model` that has a gradient. Under a loss
    /// scale the gradients are those of the scaled loss: the update unscales them, and
    /// skips the step (on the device) unless every one of them is finite.
    pub fn step(&mut self, model: Transformer, grads: GradientsParams) -> Transformer {
        let ok = self
            .scale
            .is_some()
            .then(|| self.all_finite(&grads, &model));
        let scalars = self.scalars(ok.as_ref());
        let model = if self.fused {
            self.step_grouped(model, grads, scalars)
        } else {
            model.map(&mut Update {
                adam: self,
                grads,
                scalars,
            })
        };
        // Last, once nothing else holds the scale's buffer (the scalars read 1/scale from
        // it): its update is then written in place, where a replay reads it next. While
        // another handle lives, the write goes to a copy, and a replay would read a stale
        // buffer.
        if let Some(ok) = &ok {
            self.update_scale(ok);
        }
        model
    }
}

impl DeviceAdam {
    /// `[1]` if every gradient of `model`'s parameters in `grads` is finite, else `[0]`. On
    /// a GPU, one kernel per [`GROUP`] gradients writes 0 where it finds an element that is
    /// not; elsewhere, one sum per gradient (inf and NaN survive a sum: inf − inf is NaN).
    pub(super) fn all_finite(&self, grads: &GradientsParams, model: &Transformer) -> Tensor<1> {
        let mut flat = flat_grads(grads, model);
        if flat.is_empty() {
            return Tensor::ones([1], &self.device);
        }
        if !self.fused {
            let grads: Vec<Tensor<1>> = flat.into_iter().map(|(_, g)| g).collect();
            return reference::all_finite(&grads);
        }
        // Similar sizes together: a launch spans its largest.
        flat.sort_by_key(|(_, g)| g.dims()[0]);
        let mut ok = Tensor::<1>::ones([1], &self.device);
        for group in flat.chunks(GROUP) {
            let grads = group.iter().map(|(_, g)| g.clone()).collect();
            let mut next = slots(grads, &self.unused_slot);
            ok = Tensor::from_dispatch(<Dispatch as AdamKernel>::finite_group(
                next(),
                next(),
                next(),
                next(),
                ok.into_dispatch(),
                group.len(),
            ));
        }
        ok
    }
}

/// Applies Adam to each parameter that has a gradient, by tensor operations or the
/// per-parameter kernel ([`DeviceAdam::update`]).
struct Update<'a> {
    adam: &'a mut DeviceAdam,
    grads: GradientsParams,
    scalars: Tensor<1>,
}

impl ModuleMapper for Update<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let require_grad = tensor.is_require_grad();
        let updated = self
            .adam
            .update(id, tensor.inner(), grad, &self.scalars)
            .autodiff();
        let updated = if require_grad {
            updated.require_grad()
        } else {
            updated
        };
        Param::from_mapped_value(id, updated, mapper)
    }
}
