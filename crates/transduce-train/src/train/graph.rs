//! The training step (§5.3) captured once per batch shape and replayed.
//!
//! A GPU step is hundreds of small kernels, each costing the host fusion tracing, autodiff
//! bookkeeping and a launch (docs/BENCHMARKS.md: the step is host-bound). Captured as a
//! graph, a step is replayed with one call: one graph launch on CUDA, a pre-resolved
//! re-encoding of the recorded dispatches on wgpu. A replay reads and writes exactly the
//! buffers of the capture, so everything that changes from step to step lives in device
//! buffers that are updated in place:
//! - the batch: written into the class's input buffers before each replay;
//! - the parameters and Adam's moments: written back into their own buffers at the end of
//!   the step ([`DeviceAdam`]);
//! - the step count, and with it the learning rate, and Adam's time, and with it the bias
//!   corrections: device counters indexing device tables, so a replay with no host value
//!   changed still advances them;
//! - half precision's loss scale: the step scales the loss by it, checks the gradients, skips
//!   Adam's update on the device where one is not finite, and halves or doubles the scale
//!   in place ([`DeviceAdam::with_loss_scale`]); the host learns the scale when it reads
//!   the losses;
//! - dropout's masks: drawn on the device from the step counter ([`super::device_dropout`]).
//!
//! On a backend without graphs (the CPU) the same step runs eagerly, kernel for kernel the
//! same arithmetic, which is what the tests compare the replays with.

use std::collections::HashMap;
use std::ops::Range;

use transduce::burn::backend::{Backend as _, Dispatch, DispatchGraph, DispatchTensor};
use transduce::burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{TensorData, Transaction};
use transduce::dropout::with_device_masks;
use transduce::model::token_tensor;
use transduce::tokenizer::PAD;
use transduce::{Precision, Transformer};

use super::adam_kernel::{AdamKernel, BETA_1, BETA_2, EPSILON, GROUP};
use super::device_dropout::device_masks;
use super::precision::{GROWTH_INTERVAL, INITIAL_SCALE, LossScale};
use super::{TeacherForced, census, loss};
use crate::error::{CliError, Result};

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
    moments: HashMap<ParamId, Moments>,
    /// Updates applied before the first step of this run (Adam's time in the record).
    resumed_at: u64,
    /// Adam's time, `[1]`: updates applied so far.
    time: Tensor<1, Int>,
    /// Optimizer steps taken, `[1]` (set from the first step's number).
    steps: Tensor<1, Int>,
    /// `[window]`: the learning rate of step s at row (s − 1) mod window.
    lrs: Tensor<1>,
    /// The steps (1-based) `lrs` holds.
    lrs_filled: Range<u64>,
    /// `[window, 2]`: combined bias correction and scaled ε of time t at row (t − 1) mod
    /// window.
    corrections: Tensor<2>,
    /// The times (1-based) `corrections` holds.
    corrections_filled: Range<u64>,
    /// What the host knows of Adam's time: its value before step `.1` was `.0`. Exact
    /// without a loss scale (every step updates); a lower bound with one.
    time_known: Option<(u64, u64)>,
    window: usize,
    device: Device,
    /// Updates by [`super::adam_kernel`] (GPU backends) rather than tensor operations.
    fused: bool,
    /// Half precision's loss scale, on the device.
    scale: Option<DeviceScale>,
    /// What fills a group's slots past its parameters (never read or written).
    unused_slot: Tensor<1>,
}

/// Half precision's dynamic loss scale ([`LossScale`]) kept on the device, so that the
/// check of a step's gradients and the skip of an overflowing step need no read: `[scale,
/// clean steps, skipped steps]`, updated in place by every step.
struct DeviceScale {
    state: Tensor<1>,
    /// f16 halves and doubles its scale; bf16 keeps 1 and only counts skips.
    dynamic: bool,
    /// Clean steps after which the scale doubles.
    growth: u64,
}

/// One parameter's moments.
struct Moments {
    first: Tensor<1>,
    second: Tensor<1>,
    dims: Vec<usize>,
}

/// burn's names for Adam's state in an optimizer record: `{param_id}.momentum.moment_1`,
/// `….moment_2` (tensors of the parameter's shape), `{param_id}.momentum.time` and
/// `{param_id}.__rank` (unsigned scalars).
const FIRST: &str = "momentum.moment_1";
const SECOND: &str = "momentum.moment_2";
const TIME: &str = "momentum.time";
const RANK: &str = "__rank";

/// Row `t`'s combined bias correction and scaled ε, as burn computes them (f32 `powi`).
fn corrections_at(t: u64) -> [f32; 2] {
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

    /// Adam's time, read from the device.
    #[cfg(test)]
    fn time(&self) -> u64 {
        self.time
            .clone()
            .into_data()
            .try_into_vec_as::<i64>()
            .unwrap()[0] as u64
    }

    /// The doubling interval of the loss scale (tests shorten it).
    #[cfg(test)]
    fn growing_every(mut self, steps: u64) -> Self {
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
    fn loss_scale(&self) -> Option<Tensor<1>> {
        self.scale.as_ref().map(|s| s.state.clone().slice(0..1))
    }

    /// `[scale, clean steps, skipped steps]` as the last step left them, where there is a
    /// loss scale: a copy (the step rewrites the state's buffer).
    fn scale_state(&self) -> Option<Tensor<1>> {
        self.scale.as_ref().map(|s| s.state.clone().mul_scalar(1.0))
    }

    /// Updates by tensor operations even on a GPU (the fused kernel's oracle).
    #[cfg(test)]
    pub fn by_operations(mut self) -> Self {
        self.fused = false;
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
                        .map_err(|e| CliError::Usage(format!("device read failed: {e:?}")))?[0];
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
    fn scalars(&mut self, ok: Option<&Tensor<1>>) -> Tensor<1> {
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
    fn update_scale(&mut self, ok: &Tensor<1>) {
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
    fn take_moments(&mut self, id: ParamId, n: usize) -> (Tensor<1>, Tensor<1>) {
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
    fn update<const D: usize>(
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

    /// Every parameter's update by [`super::adam_kernel`], [`GROUP`] parameters a launch
    /// (a multi-tensor Adam: for `small`, 28 launches where one per parameter took 110),
    /// each written back into its own buffers. The parameters are taken out of the model
    /// first (an empty placeholder in their place), so the kernel holds the only handle on
    /// each buffer and writes it in place; groups join parameters of similar sizes, since a
    /// launch spans its largest.
    fn step_grouped(
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

    /// [`adam_kernel`]'s update as tensor operations (the CPU's path, and the kernel's test
    /// oracle): burn's operations, then the results copied back into the buffers. Under a
    /// loss scale, `scalars` also holds 1/scale and `ok`, and a step that is not `ok`
    /// leaves every value as it was.
    fn update_by_operations(
        &self,
        flat: Tensor<1>,
        grad: Tensor<1>,
        m: Tensor<1>,
        v: Tensor<1>,
        scalars: &Tensor<1>,
    ) -> (Tensor<1>, Tensor<1>, Tensor<1>) {
        let n = flat.dims()[0];
        let [lr, combined, epsilon] = [0, 1, 2].map(|i| scalars.clone().slice(i..i + 1));
        let (grad, skipped) = match scalars.dims()[0] {
            5 => (
                grad.mul(scalars.clone().slice(3..4)),
                Some(scalars.clone().slice(4..5).equal_elem(0.0).expand([n])),
            ),
            _ => (grad, None),
        };
        let m_next = m
            .clone()
            .mul_scalar(BETA_1)
            .add(grad.clone().mul_scalar(1.0 - BETA_1));
        let v_next = v
            .clone()
            .mul_scalar(BETA_2)
            .add(grad.square().mul_scalar(1.0 - BETA_2));
        let step = m_next
            .clone()
            .mul(combined)
            .div(v_next.clone().sqrt().add(epsilon));
        let next = flat.clone().sub(step.mul(lr));
        let (next, m_next, v_next) = match skipped {
            Some(skipped) => (
                next.mask_where(skipped.clone(), flat.clone()),
                m_next.mask_where(skipped.clone(), m.clone()),
                v_next.mask_where(skipped, v.clone()),
            ),
            None => (next, m_next, v_next),
        };
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
    fn all_finite(&self, grads: &GradientsParams, model: &Transformer) -> Tensor<1> {
        let mut flat = flat_grads(grads, model);
        if flat.is_empty() {
            return Tensor::ones([1], &self.device);
        }
        if !self.fused {
            let sums = flat.into_iter().map(|(_, g)| g.sum()).collect();
            return Tensor::cat(sums, 0).sum().is_finite().float();
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

impl DeviceAdam {
    /// The state as burn's `Adam` saves it (`ModuleOptimizer::into_bytes`): a checkpoint's
    /// `optimizer.bpk` that an eager run resumes from as well. One read of the device.
    pub fn to_record_bytes(&self) -> Result<Vec<u8>> {
        let mut ids: Vec<&ParamId> = self.moments.keys().collect();
        ids.sort_by_key(|id| id.val());
        let mut transaction = Transaction::default().register(self.time.clone());
        for id in &ids {
            let moments = &self.moments[*id];
            transaction = transaction
                .register(moments.first.clone())
                .register(moments.second.clone());
        }
        super::census::note_read();
        let data = transaction
            .try_execute()
            .map_err(|e| CliError::Usage(format!("device read failed: {e:?}")))?;
        let mut data = data.into_iter();
        let time = data
            .next()
            .and_then(|t| t.try_into_vec_as::<i64>().ok())
            .map_or(0, |t| t[0] as u64);
        let data: Vec<TensorData> = data.collect();
        let mut tensors = Vec::new();
        let mut writer_scalars = Vec::new();
        for (id, pair) in ids.iter().zip(data.chunks(2)) {
            let dims = &self.moments[*id].dims;
            for (name, values) in [(FIRST, &pair[0]), (SECOND, &pair[1])] {
                let values = values.clone().convert::<f32>();
                tensors.push(burn_pack::Tensor::new(
                    format!("{}.{name}", id.val()),
                    burn_pack::DType::F32,
                    dims.clone(),
                    Some(id.val()),
                    burn_pack::Bytes::from_bytes_vec(values.into_bytes().to_vec()),
                ));
            }
            writer_scalars.push((format!("{}.{RANK}", id.val()), dims.len() as u64));
            writer_scalars.push((format!("{}.{TIME}", id.val()), time));
        }
        let mut writer = burn_pack::Writer::new(tensors);
        for (key, value) in &writer_scalars {
            writer = writer.with_scalar(key, burn_pack::Scalar::UInt(*value));
        }
        let bytes = writer
            .into_bytes()
            .map_err(|e| CliError::Usage(format!("cannot serialize Adam's state: {e:?}")))?;
        Ok(bytes.to_vec())
    }

    /// Adam's state from a checkpoint's `optimizer.bpk` (written by [`Self::to_record_bytes`]
    /// or by burn's `Adam` in an eager run), on `device`, its table `window` steps long.
    pub fn from_record_bytes(bytes: Vec<u8>, device: &Device, window: usize) -> Result<Self> {
        let bad = |message: String| CliError::Usage(format!("optimizer state: {message}"));
        let reader = burn_pack::Reader::from_bytes(burn_pack::Bytes::from_bytes_vec(bytes))
            .map_err(|e| bad(format!("not a burnpack record ({e:?})")))?;
        let times: Vec<u64> = reader
            .scalars()
            .iter()
            .filter(|(key, _)| key.ends_with(TIME))
            .map(|(key, value)| match value {
                burn_pack::Scalar::UInt(t) => Ok(*t),
                other => Err(bad(format!("{key} is {other:?}, not a step count"))),
            })
            .collect::<Result<_>>()?;
        let updates = times.iter().copied().max().unwrap_or(0);
        if times.iter().any(|&t| t != updates) {
            return Err(bad(format!(
                "parameters were updated different numbers of times ({:?}); a graph step updates all of them together",
                (times.iter().min(), times.iter().max())
            )));
        }
        let mut adam = DeviceAdam::new(device, updates, window);
        // Per parameter: each moment, flattened, with the parameter's shape.
        type Half = Option<(Tensor<1>, Vec<usize>)>;
        let mut halves: HashMap<u64, [Half; 2]> = HashMap::new();
        for tensor in reader
            .into_tensors()
            .map_err(|e| bad(format!("unreadable tensors ({e:?})")))?
        {
            let (name, dtype, shape, param_id, bytes) = tensor
                .into_parts()
                .map_err(|e| bad(format!("unreadable tensor ({e:?})")))?;
            let slot = if name.ends_with(FIRST) {
                0
            } else if name.ends_with(SECOND) {
                1
            } else {
                return Err(bad(format!("{name}: not Adam's state")));
            };
            let id = param_id.ok_or_else(|| bad(format!("{name} names no parameter")))?;
            let dims: Vec<usize> = shape.iter().copied().collect();
            let n = dims.iter().product::<usize>();
            // Flattened, as the moments are kept.
            let data = TensorData::from_bytes(bytes, [n], dtype).convert::<f32>();
            let flat = Tensor::<1>::from_data(data, &adam.device);
            halves.entry(id).or_default()[slot] = Some((flat, dims));
        }
        for (id, [first, second]) in halves {
            let (Some((first, dims)), Some((second, _))) = (first, second) else {
                return Err(bad(format!("parameter {id} lacks one of its two moments")));
            };
            adam.moments.insert(
                ParamId::from(id),
                Moments {
                    first,
                    second,
                    dims,
                },
            );
        }
        Ok(adam)
    }
}

/// Each gradient in `grads` of `model`'s parameters, flattened, in the model's order.
fn flat_grads(grads: &GradientsParams, model: &Transformer) -> Vec<(ParamId, Tensor<1>)> {
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
fn slots(args: Vec<Tensor<1>>, unused: &Tensor<1>) -> impl FnMut() -> DispatchTensor + '_ {
    let mut args = args.into_iter();
    move || {
        args.next()
            .unwrap_or_else(|| unused.clone())
            .into_dispatch()
    }
}

/// A parameter taken out of the model for [`DeviceAdam::step_grouped`], flattened.
struct Taken {
    id: ParamId,
    param: Tensor<1>,
    grad: Tensor<1>,
    dims: Vec<usize>,
    require_grad: bool,
}

/// Takes every parameter with a gradient out of the model, leaving an empty placeholder.
struct Take {
    grads: GradientsParams,
    taken: Vec<Taken>,
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
struct Put {
    /// Each parameter's updated values, and whether it takes gradients.
    updated: HashMap<ParamId, (Tensor<1>, bool)>,
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

/// One batch shape's input buffers: source, decoder input, decoder output.
struct Inputs {
    src: Tensor<2, Int>,
    tgt_in: Tensor<2, Int>,
    tgt_out: Tensor<2, Int>,
}

impl Inputs {
    fn new(forced: &TeacherForced, device: &Device) -> Result<Self> {
        let (src, tgt_in, tgt_out) = forced;
        Ok(Inputs {
            src: token_tensor(src, device)?,
            tgt_in: token_tensor(tgt_in, device)?,
            tgt_out: token_tensor(tgt_out, device)?,
        })
    }

    /// Writes a batch of the same shape into these buffers (in place: nothing else holds
    /// them between steps).
    fn write(&mut self, forced: &TeacherForced, device: &Device) -> Result<()> {
        let fresh = Inputs::new(forced, device)?;
        for (buffer, fresh) in [
            (&mut self.src, fresh.src),
            (&mut self.tgt_in, fresh.tgt_in),
            (&mut self.tgt_out, fresh.tgt_out),
        ] {
            let [rows, len] = buffer.dims();
            if fresh.dims() != [rows, len] {
                return Err(CliError::Usage(format!(
                    "graph step: a batch of shape {:?} written into a class of shape {:?}",
                    fresh.dims(),
                    [rows, len]
                )));
            }
            buffer.inplace(|old| old.slice_assign([0..rows, 0..len], fresh));
        }
        Ok(())
    }
}

/// The step itself, eager: forward, label-smoothed loss over the batch's target tokens
/// (counted on the device: a host count would be frozen into a graph), backward, Adam.
/// Returns the model and `[loss, nll]`, followed under a loss scale by the scale's state
/// after the step, `[scale, clean steps, skipped steps]`.
///
/// With `masks` (a GPU, the run's seed) dropout draws its masks on the device from the
/// optimizer's step counter ([`device_dropout`]), so a replay draws new ones.
fn run(
    model: Transformer,
    adam: &mut DeviceAdam,
    inputs: &Inputs,
    epsilon: f64,
    masks: Option<u64>,
) -> (Transformer, Tensor<1>) {
    let forward = || model.forward_focused(inputs.src.clone(), inputs.tgt_in.clone(), None);
    let logits = match masks {
        Some(seed) if model.config().dropout > 0.0 => {
            with_device_masks(device_masks(adam.steps_taken(), seed), forward)
        }
        _ => forward(),
    };
    let sums = loss::label_smoothed(logits, inputs.tgt_out.clone(), epsilon);
    let tokens = inputs
        .tgt_out
        .clone()
        .not_equal_elem(PAD as i64)
        .float()
        .sum()
        .inner();
    let loss = sums.smoothed.div(tokens.autodiff());
    // Half precision: the scale read from the device, so a replay uses the current one.
    let scaled = match adam.loss_scale() {
        Some(scale) => loss.clone().mul(scale.autodiff()),
        None => loss.clone(),
    };
    let grads = GradientsParams::from_grads(scaled.backward(), &model);
    let mut sums = vec![loss.detach().inner(), sums.nll.inner()];
    let model = adam.step(model, grads);
    sums.extend(adam.scale_state());
    (model, Tensor::cat(sums, 0))
}

/// Whether `device` is one of the CPU backends (no graphs, no cubecl kernels).
pub fn is_cpu(device: &Device) -> bool {
    let inner = device.clone().inner();
    #[allow(deprecated)]
    let ndarray = Device::ndarray();
    inner == Device::flex() || inner == ndarray
}

/// Why `model`'s step cannot be captured, if it cannot.
/// On the CPU (`cpu`) dropout draws its masks on the host (no graphs there either).
pub fn uncapturable(model: &Transformer, cpu: bool) -> Option<String> {
    let config = model.config();
    if config.dropout > 0.0 && cpu {
        return Some(format!(
            "dropout {} draws its masks on the host on the CPU backend",
            config.dropout
        ));
    }
    if config.word_focus {
        return Some("word-focus models take a per-batch focus input; graphs do not yet".into());
    }
    None
}

/// What a class does next.
enum Mode {
    /// Eager steps taken so far (the pool fills and fusion settles before a capture).
    Warming(usize),
    /// Captured.
    Replaying(Box<Replay>),
    /// Not capturable: every step eager.
    Eager,
}

/// A captured step.
struct Replay {
    graph: DispatchGraph,
    /// Where each replay leaves `[loss, nll]`.
    sums: Tensor<1>,
    /// Kernels the capture recorded.
    kernels: u64,
}

struct Class {
    inputs: Inputs,
    /// The whole step's (one batch a step).
    mode: Mode,
    /// One batch's forward and backward in an accumulated step (`--accum`).
    batch_mode: Mode,
}

/// How the step of a [`GraphTrainer`] ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GraphCounts {
    pub eager: u64,
    pub captured: u64,
    pub replayed: u64,
}

/// Training steps over batches of a few fixed shapes, each shape captured as a graph after
/// [`GraphTrainer::WARMUP`] eager steps and replayed from then on.
pub struct GraphTrainer {
    /// The autodiff device the model trains on.
    device: Device,
    pub adam: DeviceAdam,
    epsilon: f64,
    classes: HashMap<[usize; 3], Class>,
    /// Never capture (to compare replays with the same steps run eagerly).
    eager_only: bool,
    /// A CPU device: no graphs, and dropout masks from the host.
    cpu: bool,
    /// The run's seed, for dropout masks drawn on the device.
    seed: u64,
    /// Why steps run eagerly, once said.
    pub fallback: Option<String>,
    pub counts: GraphCounts,
    /// `--accum`: each parameter's gradients summed over the step's batches, flattened.
    accumulated: HashMap<ParamId, Tensor<1>>,
    /// `--accum`: `[target tokens of the step, 1 on its first batch, the batch's index]`,
    /// written before each batch's run.
    flags: Tensor<1>,
    /// `--accum`: the update's graph (shared by every shape).
    update_mode: Mode,
}

impl GraphTrainer {
    /// Eager steps of a shape before it is captured: the first runs fusion's tuning and
    /// takes other paths than later ones; by the third every buffer the step allocates is
    /// in the pool the capture draws from.
    pub const WARMUP: usize = 3;

    pub fn new(device: &Device, adam: DeviceAdam, epsilon: f64) -> Self {
        let cpu = is_cpu(device);
        GraphTrainer {
            fallback: cpu.then(|| "the CPU backend captures no graphs".to_string()),
            cpu,
            seed: 0,
            eager_only: false,
            device: device.clone(),
            adam,
            epsilon,
            classes: HashMap::new(),
            counts: GraphCounts::default(),
            accumulated: HashMap::new(),
            flags: Tensor::zeros([3], &device.clone().inner()),
            update_mode: match cpu {
                true => Mode::Eager,
                false => Mode::Warming(0),
            },
        }
    }

    /// Dropout masks on the device drawn for the run seeded `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The same steps, never captured.
    #[cfg(test)]
    pub fn eager(device: &Device, adam: DeviceAdam, epsilon: f64) -> Self {
        GraphTrainer {
            eager_only: true,
            ..Self::new(device, adam, epsilon)
        }
    }

    /// One optimizer step on `forced` (every row padded to the batch's shape), step number
    /// `step` (1-based) of schedule `lr`. Returns the model and `[loss, nll]` on the device.
    pub fn step(
        &mut self,
        model: Transformer,
        forced: &TeacherForced,
        step: u64,
        lr: &dyn Fn(u64) -> f64,
    ) -> Result<(Transformer, Tensor<1>)> {
        self.check_capturable(&model);
        self.adam.prepare(step, lr)?;
        let shape = self.class_for(forced)?;
        let inner = self.device.clone().inner();
        // Dropout masks from the device where there are kernels (the CPU draws its own).
        let (epsilon, masks) = (self.epsilon, (!self.cpu).then_some(self.seed));
        let class = self.classes.get_mut(&shape).expect("the class was made");
        let adam = &mut self.adam;
        let driven = drive(
            &mut class.mode,
            &inner,
            &mut self.counts,
            !self.eager_only,
            &format!("the step of shape {shape:?}"),
            model,
            &mut |model| run(model, adam, &class.inputs, epsilon, masks),
        )?;
        match driven {
            Driven::Ran(model, sums) => Ok((model, sums)),
            Driven::Refused(model, why) => {
                self.fallback = Some(why);
                self.step(model, forced, step, lr)
            }
            Driven::NoGraphs(model, sums, why) => {
                self.no_graphs(why);
                Ok((model, sums))
            }
        }
    }

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
        let inner = self.device.clone().inner();
        let (epsilon, accum) = (self.epsilon, batches.len());
        let masks = (!self.cpu).then_some((self.seed, accum));
        let mut model = model;
        let mut total: Option<Tensor<1>> = None;
        let mut batch = 0;
        while batch < batches.len() {
            let forced = &batches[batch];
            let flags = [tokens as f32, (batch == 0) as u8 as f32, batch as f32];
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
                Driven::Ran(next, sums) => {
                    model = next;
                    sums
                }
                Driven::Refused(next, why) => {
                    // Nothing ran: the same batch again, eagerly.
                    self.fallback = Some(why);
                    model = next;
                    continue;
                }
                Driven::NoGraphs(next, sums, why) => {
                    self.no_graphs(why);
                    model = next;
                    sums
                }
            };
            total = Some(match total {
                Some(total) => total.add(sums),
                None => sums,
            });
            batch += 1;
        }
        let adam = &mut self.adam;
        let accumulated = &self.accumulated;
        let scaled = adam.scale.is_some();
        let driven = drive(
            &mut self.update_mode,
            &inner,
            &mut self.counts,
            !self.eager_only,
            "the update",
            model,
            &mut |model| run_update(model, adam, accumulated),
        )?;
        let (model, after) = match driven {
            Driven::Ran(model, after) => (model, after),
            Driven::Refused(model, why) => {
                self.fallback = Some(why);
                let (model, after) = run_update(model, &mut self.adam, &self.accumulated);
                self.counts.eager += 1;
                (model, after)
            }
            Driven::NoGraphs(model, after, why) => {
                self.no_graphs(why);
                (model, after)
            }
        };
        let mut sums = vec![total.expect("at least one batch")];
        if scaled {
            sums.push(after);
        }
        // Counted as one step: the batches' runs were counted one by one.
        Ok((model, Tensor::cat(sums, 0)))
    }

    /// Notes once why steps cannot be captured, if they cannot.
    fn check_capturable(&mut self, model: &Transformer) {
        if self.fallback.is_none()
            && let Some(why) = uncapturable(model, self.cpu)
        {
            self.fallback = Some(why);
        }
        if self.fallback.is_some() && matches!(self.update_mode, Mode::Warming(_)) {
            self.update_mode = Mode::Eager;
        }
    }

    /// The class of `forced`'s shape, its input buffers holding `forced`.
    fn class_for(&mut self, forced: &TeacherForced) -> Result<[usize; 3]> {
        let width = |rows: &[Vec<u32>]| rows.iter().map(Vec::len).max().unwrap_or(0);
        let shape = [forced.0.len(), width(&forced.0), width(&forced.1)];
        match self.classes.get_mut(&shape) {
            Some(class) => class.inputs.write(forced, &self.device)?,
            None => {
                let mode = || match self.fallback {
                    Some(_) => Mode::Eager,
                    None => Mode::Warming(0),
                };
                let class = Class {
                    inputs: Inputs::new(forced, &self.device)?,
                    mode: mode(),
                    batch_mode: mode(),
                };
                self.classes.insert(shape, class);
            }
        }
        Ok(shape)
    }

    /// The backend captures no graphs: every class eager from now on.
    fn no_graphs(&mut self, why: String) {
        self.fallback = Some(why);
        let modes = self
            .classes
            .values_mut()
            .flat_map(|class| [&mut class.mode, &mut class.batch_mode])
            .chain([&mut self.update_mode]);
        for mode in modes {
            if matches!(mode, Mode::Warming(_)) {
                *mode = Mode::Eager;
            }
        }
    }
}

/// What [`drive`] did with a step.
enum Driven {
    /// It ran: eagerly, recorded after its last warm-up run, or replayed.
    Ran(Transformer, Tensor<1>),
    /// Nothing ran: the backend refused to prepare a capture (the mode is now eager).
    Refused(Transformer, String),
    /// It ran eagerly, and the backend captures no graphs.
    NoGraphs(Transformer, Tensor<1>, String),
}

/// Runs `run` as `mode` says: eagerly while warming up (the last warm-up run prepared, and
/// recorded at once on the same buffers: a recording does not run, so it costs no
/// optimizer step, and the next run is the first replay), replayed once captured (`capture`
/// false: never). `what` names the step in errors.
fn drive(
    mode: &mut Mode,
    inner: &Device,
    counts: &mut GraphCounts,
    capture: bool,
    what: &str,
    model: Transformer,
    run: &mut dyn FnMut(Transformer) -> (Transformer, Tensor<1>),
) -> Result<Driven> {
    match mode {
        Mode::Replaying(replay) => {
            let Replay {
                graph,
                sums,
                kernels,
            } = &**replay;
            // SAFETY: every buffer the capture touched is held: the inputs by the class,
            // the parameters by `model`, the moments, counters, tables and accumulators by
            // the trainer, the outputs by the replay; all on this thread's stream.
            unsafe { Dispatch::graph_replay(inner.as_dispatch(), graph) }.map_err(|e| {
                CliError::Usage(format!(
                    "graph step: replaying {what} failed: {e:?}; the last checkpoint is intact: resume it without --graph"
                ))
            })?;
            counts.replayed += 1;
            census::note_replay(*kernels);
            // A copy: the next replay overwrites the graph's own output.
            Ok(Driven::Ran(model, sums.clone().mul_scalar(1.0)))
        }
        Mode::Warming(done) if *done + 1 == GraphTrainer::WARMUP && capture => {
            if let Err(e) = Dispatch::graph_prepare(inner.as_dispatch()) {
                *mode = Mode::Eager;
                return Ok(Driven::Refused(
                    model,
                    format!("graph capture unavailable: {e:?}"),
                ));
            }
            let (model, sums) = run(model);
            counts.eager += 1;
            if let Err(e) = Dispatch::graph_start_capture(inner.as_dispatch()) {
                // A backend without graphs (the CPU). Closing the prepared window leaves
                // the stream as it was.
                let _ = Dispatch::graph_stop_capture(inner.as_dispatch());
                *mode = Mode::Eager;
                let why = format!("this backend captures no graphs ({e:?})");
                return Ok(Driven::NoGraphs(model, sums, why));
            }
            let ((model, recorded, graph), kernels) = census::count_launches(|| {
                let (model, recorded) = run(model);
                // Fusion launches its queued kernels here, into the recording.
                let graph = Dispatch::graph_stop_capture(inner.as_dispatch());
                (model, recorded, graph)
            });
            let graph = graph.map_err(|e| {
                CliError::Usage(format!(
                    "graph step: capturing {what} failed: {e:?}; the last checkpoint is intact: resume it without --graph"
                ))
            })?;
            counts.captured += 1;
            *mode = Mode::Replaying(Box::new(Replay {
                graph,
                sums: recorded,
                kernels,
            }));
            Ok(Driven::Ran(model, sums))
        }
        mode => {
            let (model, sums) = run(model);
            counts.eager += 1;
            if let Mode::Warming(done) = mode {
                *done += 1;
            }
            Ok(Driven::Ran(model, sums))
        }
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
            with_device_masks(device_masks(draw, seed), forward)
        }
        _ => forward(),
    };
    let sums = loss::label_smoothed(logits, inputs.tgt_out.clone(), epsilon);
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

/// The update of an accumulated step, eager: Adam over the sums of the step's gradients.
/// Returns the model and, under a loss scale, its state after the step (otherwise the
/// step count, which nothing reads).
fn run_update(
    model: Transformer,
    adam: &mut DeviceAdam,
    accumulated: &HashMap<ParamId, Tensor<1>>,
) -> (Transformer, Tensor<1>) {
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
    let mut register = Register {
        accumulated,
        grads: GradientsParams::new(),
    };
    model.visit(&mut register);
    let model = adam.step(model, register.grads);
    let after = adam.scale_state().unwrap_or_else(|| adam.steps_taken());
    (model, after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::batch::Batch;
    use crate::data::shape::pad_to_shape;
    use crate::train::census::{Census, StepCensus};
    use crate::train::tests::{
        gpu_lock, losses, losses_scaled, reversal_pairs, tiny_start, wgpu_device,
    };
    use crate::train::{read_scalars, teacher_forced};
    use std::path::Path;
    use transduce::bundle::load_weights;

    /// Batches of two shapes, alternating, each padded to its shape.
    fn batches() -> Vec<(Batch, (usize, usize))> {
        let short: Batch = (0..4).collect();
        let long: Batch = (4..7).collect();
        vec![(short, (4, 6)), (long, (4, 9))]
    }

    fn lr(step: u64) -> f64 {
        1e-3 * (step as f64).powf(-0.25)
    }

    /// Losses and the final output projection's weights after `steps` steps of `trainer`.
    fn train(
        start: &(transduce::ModelConfig, Vec<u8>),
        device: &Device,
        steps: u64,
        capture: bool,
        fused: bool,
    ) -> (Vec<f64>, Vec<f32>, GraphCounts, StepCensus) {
        let device = device.clone().autodiff();
        let (config, weights) = start;
        let mut model = load_weights(config, weights, &device).unwrap();
        let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
        let adam = DeviceAdam::new(&device, 0, 8);
        let adam = if fused { adam } else { adam.by_operations() };
        let mut trainer = if capture {
            GraphTrainer::new(&device, adam, 0.1)
        } else {
            GraphTrainer::eager(&device, adam, 0.1)
        };
        let shapes = batches();
        let mut sums = Vec::new();
        let mut census = None;
        for step in 1..=steps {
            if step == steps - 9 {
                census = Some(Census::start());
            }
            let (batch, shape) = &shapes[(step as usize) % shapes.len()];
            let forced = pad_to_shape(teacher_forced(&pairs, batch), *shape);
            let (next, out) = trainer.step(model, &forced, step, &lr).unwrap();
            model = next;
            sums.push(out);
        }
        let census = census
            .map(|c| c.finish(10))
            .expect("a census of the last steps");
        let values = read_scalars(sums).unwrap();
        let weights = model.encoder.layers[0].ffn.fc1.weight.val().into_data();
        (
            values,
            weights.try_to_vec::<f32>().expect("f32 weights"),
            trainer.counts,
            census,
        )
    }

    /// Replayed steps train exactly as the same steps run eagerly: 24 steps over two batch
    /// shapes (so two graphs, interleaved) from the same start give the same losses and
    /// the same weights, bit for bit. Each graph replays the same batch every time, so no
    /// input changes between its replays; the learning rate (a new value every step) and
    /// Adam's bias corrections still advance, from the device counter, and with an 8-step
    /// schedule table the run crosses two refills of it. The last 10 steps issue a
    /// handful of launches each (the replay, the batch's three writes, the loss's copy)
    /// where the eager steps issue hundreds. Adam runs as the fused in-place kernel; a third
    /// run checks it against the same update as tensor operations.
    #[test]
    fn replayed_steps_equal_eager_steps_on_wgpu() {
        let _gpu = gpu_lock();
        let Some(device) = wgpu_device("replayed_steps_equal_eager_steps_on_wgpu") else {
            return;
        };
        const STEPS: u64 = 24;
        let start = tiny_start(5);
        let (eager, eager_w, counts, eager_census) = train(&start, &device, STEPS, false, true);
        assert_eq!(counts.replayed, 0);
        let (replayed, replayed_w, counts, census) = train(&start, &device, STEPS, true, true);
        assert_eq!(counts.captured, 2, "{counts:?}");
        assert_eq!(
            counts.replayed,
            STEPS - 2 * GraphTrainer::WARMUP as u64,
            "{counts:?}"
        );
        assert_eq!(eager, replayed);
        assert_eq!(eager_w, replayed_w);
        assert!(eager[23] < eager[1], "the loss falls: {eager:?}");
        println!("eager: {eager_census}\nreplayed: {census}");
        assert!(census.launches <= 10.0, "{census:?}");
        assert!(eager_census.launches > 200.0, "{eager_census}");
        assert!(census.kernels > eager_census.launches / 2.0, "{census}");

        // The fused in-place Adam kernel against its oracle, burn's formulas as tensor
        // operations, eager on the same device: the kernel computes the same operations
        // in the same order, but the compiler may contract a product and a sum into one
        // rounding (and the operations' path rounds each), hence 1e-5, not bits.
        let (by_operations, ..) = train(&start, &device, STEPS, false, false);
        for (step, (a, b)) in eager.iter().zip(&by_operations).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs(),
                "step {step}: {eager:?} vs {by_operations:?}"
            );
        }
    }

    /// `--accum` under graphs: each step sums the gradients of two batches of two shapes
    /// on the device, then updates. 8 steps from the same start:
    /// - replayed (each shape's gradients and the update captured after 3 eager runs, so
    ///   the last 5 steps are 3 replays each) equal the same runs eagerly, bit for bit;
    /// - both give the losses of the eager trainer's accumulation (burn's
    ///   `GradientsAccumulator` and `Adam`, each batch padded only to its own length) to
    ///   1e-5 relative: the same sums, with padding's zeros in other places.
    #[test]
    fn accumulated_replays_equal_eager_accumulation_on_wgpu() {
        let _gpu = gpu_lock();
        let Some(device) = wgpu_device("accumulated_replays_equal_eager_accumulation_on_wgpu")
        else {
            return;
        };
        const STEPS: u64 = 8;
        let start = tiny_start(8);
        let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
        let shapes = batches();
        let forced: Vec<TeacherForced> = shapes
            .iter()
            .map(|(batch, shape)| pad_to_shape(teacher_forced(&pairs, batch), *shape))
            .collect();
        let tokens: usize = shapes
            .iter()
            .map(|(batch, _)| {
                teacher_forced(&pairs, batch)
                    .2
                    .iter()
                    .map(Vec::len)
                    .sum::<usize>()
            })
            .sum();
        let run = |capture: bool| {
            let ad = device.clone().autodiff();
            let (config, weights) = &start;
            let mut model = load_weights(config, weights, &ad).unwrap();
            let adam = DeviceAdam::new(&ad, 0, 8);
            let mut trainer = if capture {
                GraphTrainer::new(&ad, adam, 0.1)
            } else {
                GraphTrainer::eager(&ad, adam, 0.1)
            };
            let mut sums = Vec::new();
            for step in 1..=STEPS {
                let out;
                (model, out) = trainer
                    .step_group(model, &forced, tokens, step, &|_| 1e-3)
                    .unwrap();
                sums.push(out);
            }
            let weights = model.decoder.layers[0].ffn.fc2.weight.val().into_data();
            (
                read_scalars(sums).unwrap(),
                weights.try_to_vec::<f32>().unwrap(),
                trainer.counts,
            )
        };
        let (eager, eager_w, counts) = run(false);
        assert_eq!(counts.replayed, 0);
        let (replayed, replayed_w, counts) = run(true);
        assert_eq!(counts.captured, 3, "{counts:?}");
        assert_eq!(counts.replayed, 3 * (STEPS - 3), "{counts:?}");
        assert_eq!(eager, replayed);
        assert_eq!(eager_w, replayed_w);
        let group: Vec<&Batch> = shapes.iter().map(|(batch, _)| batch).collect();
        let burns = losses(&start, std::slice::from_ref(&device), &pairs, &group, STEPS);
        let worst = replayed
            .iter()
            .zip(&burns)
            .map(|(a, b)| (a - b).abs() / b.abs())
            .fold(0f64, f64::max);
        println!("replayed against burn's accumulation: at most {worst:.1e} relative");
        for (step, (a, b)) in replayed.iter().zip(&burns).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs(),
                "step {step}: {replayed:?} vs {burns:?}"
            );
        }
        assert!(replayed[7] < replayed[0], "the loss falls: {replayed:?}");
    }

    /// Every value of each step's sums (`[loss, nll, scale, clean, skipped]` in half
    /// precision), in one read.
    fn read_all(sums: Vec<Tensor<1>>) -> Vec<Vec<f32>> {
        let width = sums[0].dims()[0];
        let values = Tensor::cat(sums, 0)
            .into_data()
            .try_to_vec::<f32>()
            .unwrap();
        values.chunks(width).map(<[f32]>::to_vec).collect()
    }

    /// Half precision under graphs (f16, which lavapipe has): the loss scale, the check of
    /// the gradients and the skip of an overflowing step all happen on the device.
    ///
    /// Started at a scale of 2²⁰, which overflows f16's backward pass, and doubling after 3
    /// clean steps, 24 steps over two batch shapes skip steps both while warming up and
    /// while replaying. Against three oracles:
    /// - the same steps run eagerly give the replays' losses, scale states and weights, bit
    ///   for bit;
    /// - the scale's state after every step is what the host's [`LossScale`] computes from
    ///   the same sequence of skips (halving, doubling, counts);
    /// - Adam's time is the number of steps not skipped.
    ///
    /// Then, with the real doubling interval, one shape: the steps skip where burn's `Adam`
    /// under the trainer's host-side skip (`optimizer_step`) skips, and the losses agree to
    /// 2·10⁻³ relative: the two paths scale the loss and unscale the gradients in other
    /// kernels, and f16 rounds at 2⁻¹¹ ≈ 4.9·10⁻⁴ (measured: at most 9.4·10⁻⁵ over the 12 steps).
    #[test]
    fn half_precision_skips_overflowing_steps_on_the_device() {
        let _gpu = gpu_lock();
        let Some(gpu) = wgpu_device("half_precision_skips_overflowing_steps_on_the_device") else {
            return;
        };
        if !gpu.supports_dtype(Precision::F16.dtype()) {
            println!("SKIP: half_precision_skips_overflowing_steps_on_the_device: no f16");
            return;
        }
        let device = gpu.clone().autodiff();
        let (config, weights) = tiny_start(6);
        let pairs = reversal_pairs(3, (0..7).map(|n| if n < 4 { 4 + n % 2 } else { 7 + n % 2 }));
        let start = LossScale {
            scale: 1_048_576.0,
            clean_steps: 0,
            skipped: 0,
        };
        const STEPS: u64 = 24;
        let run = |capture: bool| {
            let mut model = load_weights(&config, &weights, &device)
                .unwrap()
                .with_precision(Precision::F16);
            let adam = DeviceAdam::new(&device, 0, 8)
                .with_loss_scale(&start, Precision::F16)
                .growing_every(3);
            let mut trainer = match capture {
                true => GraphTrainer::new(&device, adam, 0.1),
                false => GraphTrainer::eager(&device, adam, 0.1),
            };
            // Two shapes alternating, and every fifth step a third, whose warm-up steps
            // run eagerly between the others' replays.
            let mut shapes = batches();
            shapes.push(((0..4).collect(), (4, 7)));
            let mut sums = Vec::new();
            for step in 1..=STEPS {
                let class = if step % 5 == 0 { 2 } else { step as usize % 2 };
                let (batch, shape) = &shapes[class];
                let forced = pad_to_shape(teacher_forced(&pairs, batch), *shape);
                let out;
                (model, out) = trainer.step(model, &forced, step, &lr).unwrap();
                sums.push(out);
            }
            let weights = model.encoder.layers[0].ffn.fc1.weight.val().into_data();
            (read_all(sums), weights, trainer.counts, trainer.adam.time())
        };
        let (eager, eager_w, _, eager_time) = run(false);
        let (replayed, replayed_w, counts, time) = run(true);
        assert_eq!(counts.captured, 3, "{counts:?}");
        assert_eq!(eager, replayed);
        assert_eq!(eager_w, replayed_w);

        let mut host = start.clone();
        let mut skipped_replaying = 0;
        for (step, values) in replayed.iter().enumerate() {
            let finite = values[4] as u64 == host.skipped;
            host.update_growing(Precision::F16, finite, 3);
            let device_state = (values[2] as f64, values[3] as u64, values[4] as u64);
            assert_eq!(
                device_state,
                (host.scale, host.clean_steps, host.skipped),
                "step {}: {replayed:?}",
                step + 1
            );
            if !finite && step >= 2 * GraphTrainer::WARMUP {
                skipped_replaying += 1;
            }
        }
        assert!(host.skipped >= 2 && skipped_replaying >= 1, "{replayed:?}");
        assert_eq!(
            (time, eager_time),
            (STEPS - host.skipped, STEPS - host.skipped)
        );
        assert!(replayed.iter().all(|v| v[0].is_finite()), "{replayed:?}");

        // Against burn's Adam with the host's skip, one batch shape, no padding, at the
        // helper's learning rate of 10⁻³.
        let batch: Batch = (0..4).collect();
        let forced = teacher_forced(&pairs, &batch);
        let mut model = load_weights(&config, &weights, &device)
            .unwrap()
            .with_precision(Precision::F16);
        let adam_state = DeviceAdam::new(&device, 0, 8).with_loss_scale(&start, Precision::F16);
        let mut trainer = GraphTrainer::new(&device, adam_state, 0.1);
        let mut sums = Vec::new();
        for step in 1..=12 {
            let out;
            (model, out) = trainer.step(model, &forced, step, &|_| 1e-3).unwrap();
            sums.push(out);
        }
        let ours = read_all(sums);
        let burns = losses_scaled(
            &(config.clone(), weights.clone()),
            std::slice::from_ref(&gpu),
            &pairs,
            &[&batch],
            12,
            Precision::F16,
            None,
            Some(start.clone()),
        );
        assert!(burns[11].1 >= 2, "the start overflows: {burns:?}");
        for (step, (ours, (loss, skipped))) in ours.iter().zip(&burns).enumerate() {
            assert_eq!(ours[4] as u64, *skipped, "step {}: {ours:?}", step + 1);
            let relative = (ours[0] as f64 - loss).abs() / loss;
            println!("step {}: relative gap {relative:.1e}", step + 1);
            assert!(relative < 2e-3, "step {}: {} vs {loss}", step + 1, ours[0]);
        }
    }

    /// On the CPU (no graphs: every step eager) the device-scalar Adam trains as burn's
    /// Adam: 8 steps from the same start give the losses of the trainer's `optimizer_step`
    /// with burn's `Adam` to 1e-6 relative (same operations in the same order, the same
    /// f32 scalars, since the table holds what burn computes on the host; but a tensor
    /// operand where burn passes a scalar takes another of burn-flex's kernels, which
    /// rounds differently in the last bit: 3 of the 8 losses differ by about 1e-7).
    #[test]
    fn device_adam_is_burns_adam_on_the_cpu() {
        let start = tiny_start(9);
        let pairs = reversal_pairs(2, (0..4).map(|n| 3 + n));
        let batch: Batch = (0..4).collect();
        let burns = losses(&start, &[Device::flex()], &pairs, &[&batch], 8);
        let device = Device::flex().autodiff();
        let (config, weights) = &start;
        let mut model = load_weights(config, weights, &device).unwrap();
        let mut trainer = GraphTrainer::new(&device, DeviceAdam::new(&device, 0, 1024), 0.1);
        let forced = teacher_forced(&pairs, &batch);
        let mut sums = Vec::new();
        for step in 1..=8 {
            let out;
            (model, out) = trainer.step(model, &forced, step, &|_| 1e-3).unwrap();
            sums.push(out);
        }
        let ours = read_scalars(sums).unwrap();
        for (step, (a, b)) in ours.iter().zip(&burns).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs(),
                "step {step}: {ours:?} vs {burns:?}"
            );
        }
        assert_ne!(ours[0], ours[7], "the steps train");
        assert_eq!(trainer.counts.replayed, 0);
        let why = trainer.fallback.expect("the CPU says why it runs eagerly");
        assert!(why.contains("captures no graphs"), "{why}");
    }

    /// The device-scalar Adam's state is burn's record of Adam: read back into itself it
    /// continues bit for bit, and burn's `Adam` continues from it (and it from burn's) as
    /// the two continue from their own state, to 1e-6 relative (CPU, 3 + 3 steps).
    #[test]
    fn device_adam_state_is_burns_record() {
        use crate::train::{Examples, StepWork, adam, optimizer_step};
        let (config, weights) = tiny_start(4);
        let pairs = reversal_pairs(6, (0..4).map(|n| 3 + n));
        let batch: Batch = (0..4).collect();
        let forced = teacher_forced(&pairs, &batch);
        let device = Device::flex().autodiff();
        let lr = |t: u64| 1e-3 / (t as f64).sqrt();
        let tokens = forced.2.iter().map(Vec::len).sum::<usize>();
        let group = [&batch];
        let devices = [device.clone()];
        let work = |step: u64| StepWork {
            devices: &devices,
            group: &group,
            examples: Examples {
                pairs: &pairs,
                focus: None,
                classes: None,
            },
            group_tokens: tokens,
            epsilon: 0.1,
            seed: step,
        };
        let device_steps = |mut model: Transformer, adam: DeviceAdam, steps: Range<u64>| {
            let mut trainer = GraphTrainer::new(&device, adam, 0.1);
            let mut sums = Vec::new();
            for step in steps {
                let out;
                (model, out) = trainer.step(model, &forced, step, &lr).unwrap();
                sums.push(out);
            }
            (model, trainer.adam, read_scalars(sums).unwrap())
        };
        let burn_steps = |mut model: Transformer, mut optimizer, steps: Range<u64>| {
            let mut sums = Vec::new();
            for step in steps {
                let loss;
                (model, loss) = optimizer_step(
                    model,
                    &mut optimizer,
                    &work(step),
                    lr(step),
                    transduce::Precision::F32,
                    &mut None,
                )
                .unwrap();
                sums.push(loss.smoothed);
            }
            (model, optimizer, read_scalars(sums).unwrap())
        };
        let start = || load_weights(&config, &weights, &device).unwrap();
        let close = |a: &[f64], b: &[f64]| {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 1e-6 * y.abs(), "{a:?} vs {b:?}");
            }
        };

        let (model, adam_state, _) = device_steps(start(), DeviceAdam::new(&device, 0, 64), 1..4);
        let bytes = adam_state.to_record_bytes().unwrap();
        let (_, _, own) = device_steps(model.clone(), adam_state, 4..7);
        let restored = DeviceAdam::from_record_bytes(bytes.clone(), &device, 64).unwrap();
        let (_, _, reread) = device_steps(model.clone(), restored, 4..7);
        assert_eq!(own, reread, "read back, the state continues bit for bit");
        let burns = adam()
            .from_bytes(transduce::burn::tensor::Bytes::from_bytes_vec(bytes))
            .unwrap();
        let (_, _, by_burn) = burn_steps(model, burns, 4..7);
        close(&by_burn, &own);

        let (model, optimizer, _) = burn_steps(start(), adam(), 1..4);
        let bytes = crate::train::checkpoint::optimizer_bytes(&optimizer, Path::new(".")).unwrap();
        let (_, _, burn_own) = burn_steps(model.clone(), optimizer, 4..7);
        let adam_state = DeviceAdam::from_record_bytes(bytes, &device, 64).unwrap();
        let (_, _, by_device) = device_steps(model, adam_state, 4..7);
        close(&by_device, &burn_own);
        assert_ne!(own[0], own[2], "the steps train");
    }

    /// On the CPU a model with dropout is not captured (its masks come from the host), and
    /// says so; on a GPU its masks come from the device and it is.
    #[test]
    fn dropout_keeps_cpu_steps_eager_and_says_why() {
        let (mut config, _) = tiny_start(1);
        let device = Device::flex().autodiff();
        assert_eq!(
            uncapturable(&Transformer::new(&config, &device).unwrap(), true),
            None
        );
        config.dropout = 0.1;
        let model = Transformer::new(&config, &device).unwrap();
        let why = uncapturable(&model, true).expect("a reason");
        assert!(why.contains("dropout 0.1"), "{why}");
        assert_eq!(uncapturable(&model, false), None);
    }

    /// Device masks: about `keep` of the elements survive, scaled by 1/keep; the same
    /// (seed, step, site) gives the same mask, and another step or site another one.
    #[test]
    fn device_masks_keep_their_share_and_change_with_step_and_site() {
        let _gpu = gpu_lock();
        let Some(device) =
            wgpu_device("device_masks_keep_their_share_and_change_with_step_and_site")
        else {
            return;
        };
        let like = Tensor::<1>::zeros([200_000], &device);
        let mask = |step: i32, site: u64| {
            let step = Tensor::<1, Int>::from_data([step], &device).float();
            let masks = device_masks(step, 7);
            masks(like.clone(), site, 0.9)
                .into_data()
                .try_to_vec::<f32>()
                .expect("f32 mask")
        };
        let a = mask(3, 0);
        let scale = (1.0f64 / 0.9) as f32;
        assert!(a.iter().all(|&x| x == 0.0 || x == scale));
        let kept = a.iter().filter(|&&x| x > 0.0).count() as f64 / a.len() as f64;
        assert!((kept - 0.9).abs() < 0.005, "kept {kept}");
        assert_eq!(a, mask(3, 0), "deterministic");
        let differ = |b: Vec<f32>| a.iter().zip(&b).filter(|(x, y)| x != y).count();
        // Independent masks differ in about 2·0.9·0.1 = 18% of the elements.
        for other in [mask(4, 0), mask(3, 1)] {
            let d = differ(other) as f64 / a.len() as f64;
            assert!((d - 0.18).abs() < 0.01, "differ {d}");
        }
    }

    /// A replayed step with dropout draws new masks every time, with no host value changed
    /// between replays: at learning rate 0 on one unchanged batch the weights never move,
    /// so only the masks can make the losses differ, and all 8 do. The replays' losses are
    /// the eager steps', bit for bit (the same device masks).
    #[test]
    fn replayed_steps_with_dropout_draw_new_masks() {
        let _gpu = gpu_lock();
        let Some(device) = wgpu_device("replayed_steps_with_dropout_draw_new_masks") else {
            return;
        };
        let (mut config, weights) = tiny_start(8);
        config.dropout = 0.1;
        let pairs = reversal_pairs(1, (0..4).map(|n| 4 + n % 2));
        let forced = pad_to_shape(teacher_forced(&pairs, &(0..4).collect()), (4, 6));
        let device = device.autodiff();
        let losses = |capture: bool| {
            let mut model = load_weights(&config, &weights, &device).unwrap();
            let adam = DeviceAdam::new(&device, 0, 64);
            let trainer = if capture {
                GraphTrainer::new(&device, adam, 0.1)
            } else {
                GraphTrainer::eager(&device, adam, 0.1)
            };
            let mut trainer = trainer.with_seed(11);
            let mut sums = Vec::new();
            for step in 1..=8 {
                let out;
                (model, out) = trainer.step(model, &forced, step, &|_| 0.0).unwrap();
                sums.push(out);
            }
            (read_scalars(sums).unwrap(), trainer.counts)
        };
        let (eager, _) = losses(false);
        let (replayed, counts) = losses(true);
        assert_eq!(
            counts.replayed,
            8 - GraphTrainer::WARMUP as u64,
            "{counts:?}"
        );
        assert_eq!(eager, replayed);
        let mut distinct = replayed.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        assert_eq!(distinct.len(), 8, "a new mask every step: {replayed:?}");
    }
}
