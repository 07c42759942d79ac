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
//! - the step count, and with it the learning rate and Adam's bias corrections: a device
//!   counter indexing a device table of the schedule, so a replay with no host value changed
//!   still advances them;
//! - dropout's masks: drawn on the device from that counter ([`super::device_dropout`]).
//!
//! On a backend without graphs (the CPU) the same step runs eagerly, kernel for kernel the
//! same arithmetic, which is what the tests compare the replays with.

use std::collections::HashMap;
use std::ops::Range;

use transduce::Transformer;
use transduce::burn::backend::{Backend as _, Dispatch, DispatchGraph};
use transduce::burn::module::{ModuleMapper, Param, ParamId};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::{TensorData, Transaction};
use transduce::dropout::with_device_masks;
use transduce::model::token_tensor;
use transduce::tokenizer::PAD;

use super::adam_kernel::{AdamKernel, BETA_1, BETA_2, EPSILON};
use super::device_dropout::device_masks;
use super::{TeacherForced, census, loss};
use crate::error::{CliError, Result};

/// Adam with §5.3's β1 0.9, β2 0.98, ε 10⁻⁹, computed as burn's `Adam` computes it (the
/// same operations in the same order, so the same bits), but with its scalars on the
/// device: the number of updates so far is a device counter, and the learning rate, the
/// combined bias correction √(1−β2ᵗ)/(1−β1ᵗ) and ε·√(1−β2ᵗ) of step t are read from a
/// device table at row (t − 1) mod `window`, filled on the host `window` steps at a time.
pub struct DeviceAdam {
    /// First and second moments per parameter, flattened, in their own buffers, and the
    /// parameter's shape.
    moments: HashMap<ParamId, Moments>,
    /// Updates applied so far (the device counter's value, known on the host).
    updates: u64,
    /// Updates applied so far, `[1]`.
    time: Tensor<1, Int>,
    /// `[window, 3]`: learning rate, combined bias correction, scaled ε.
    table: Tensor<2>,
    /// The steps (1-based) the table holds.
    filled: Range<u64>,
    window: usize,
    device: Device,
    /// Updates by [`super::adam_kernel`] (GPU backends) rather than tensor operations.
    fused: bool,
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

impl DeviceAdam {
    /// Adam as §5.3 sets it, on `device` (its inner device: the state takes no gradients),
    /// `updates` already applied (0 for a new run), its table `window` steps long.
    pub fn new(device: &Device, updates: u64, window: usize) -> Self {
        let device = device.clone().inner();
        DeviceAdam {
            fused: !is_cpu(&device),
            moments: HashMap::new(),
            updates,
            time: Tensor::from_data(TensorData::new(vec![updates as i32], [1]), &device),
            table: Tensor::zeros([window, 3], &device),
            filled: 0..0,
            window,
            device,
        }
    }

    /// The updates applied so far, `[1]`, read from the device counter when the step runs
    /// (so a replay reads the current count).
    pub fn steps_taken(&self) -> Tensor<1> {
        self.time.clone().float()
    }

    /// Updates by tensor operations even on a GPU (the fused kernel's oracle).
    #[cfg(test)]
    pub fn by_operations(mut self) -> Self {
        self.fused = false;
        self
    }

    /// Makes sure the table holds `step` (1-based), refilling it from `lr` (the schedule)
    /// otherwise. Called before every step, outside any capture: a host write.
    pub fn prepare(&mut self, step: u64, lr: &dyn Fn(u64) -> f64) {
        if self.filled.contains(&step) {
            return;
        }
        let window = self.window as u64;
        let mut rows = vec![0f32; self.window * 3];
        for t in step..step + window {
            let row = ((t - 1) % window) as usize;
            let time = t as i32;
            let bias_correction2_sqrt = (1.0 - BETA_2.powi(time)).sqrt();
            let combined = bias_correction2_sqrt / (1.0 - BETA_1.powi(time));
            rows[row * 3] = lr(t) as f32;
            rows[row * 3 + 1] = combined as f32;
            rows[row * 3 + 2] = (EPSILON * bias_correction2_sqrt) as f32;
        }
        let values = Tensor::from_data(TensorData::new(rows, [self.window, 3]), &self.device);
        let table = std::mem::replace(&mut self.table, Tensor::zeros([1, 1], &self.device));
        self.table = table.slice_assign([0..self.window, 0..3], values);
        self.filled = step..step + window;
    }

    /// This step's `[learning rate, combined bias correction, scaled ε]`, and the counter
    /// advanced, all on the device.
    fn scalars(&mut self) -> Tensor<1> {
        let row = self.time.clone().remainder_scalar(self.window as i64);
        let advanced = self.time.clone().add_scalar(1);
        let time = std::mem::replace(&mut self.time, Tensor::zeros([1], &self.device));
        self.time = time.slice_assign(0..1, advanced);
        self.table.clone().select(0, row).reshape([3])
    }

    /// One parameter's update, written back into the parameter's and the moments' buffers.
    fn update<const D: usize>(
        &mut self,
        id: ParamId,
        param: Tensor<D>,
        grad: Tensor<D>,
        scalars: &Tensor<1>,
    ) -> Tensor<D> {
        let dims = param.dims();
        let n = param.shape().num_elements();
        let grad = grad.reshape([n]);
        let (m, v) = match self.moments.remove(&id) {
            Some(Moments { first, second, .. }) => (first, second),
            None => (
                Tensor::zeros([n], &self.device),
                Tensor::zeros([n], &self.device),
            ),
        };
        let flat = param.reshape([n]);
        let (next, m, v) = if self.fused {
            let (p, m, v) = <Dispatch as AdamKernel>::adam_in_place(
                flat.into_dispatch(),
                grad.into_dispatch(),
                m.into_dispatch(),
                v.into_dispatch(),
                scalars.clone().into_dispatch(),
            );
            (
                Tensor::<1>::from_dispatch(p),
                Tensor::from_dispatch(m),
                Tensor::from_dispatch(v),
            )
        } else {
            self.update_by_operations(flat, grad, m, v, scalars)
        };
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

    /// [`adam_kernel`]'s update as tensor operations (the CPU's path, and the kernel's test
    /// oracle): burn's operations, then the results copied back into the buffers.
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
        // Written back in place (each is the only handle on its buffer here), so a replay
        // of the step reads what the last one wrote.
        (
            flat.slice_assign(0..n, next),
            m.slice_assign(0..n, m_next),
            v.slice_assign(0..n, v_next),
        )
    }

    /// Applies one update to every parameter of `model` that has a gradient.
    pub fn step(&mut self, model: Transformer, grads: GradientsParams) -> Transformer {
        let scalars = self.scalars();
        self.updates += 1;
        model.map(&mut Update {
            adam: self,
            grads,
            scalars,
        })
    }
}

impl DeviceAdam {
    /// The state as burn's `Adam` saves it (`ModuleOptimizer::into_bytes`): a checkpoint's
    /// `optimizer.bpk` that an eager run resumes from as well. One read of the device.
    pub fn to_record_bytes(&self) -> Result<Vec<u8>> {
        let mut ids: Vec<&ParamId> = self.moments.keys().collect();
        ids.sort_by_key(|id| id.val());
        let mut transaction = Transaction::default();
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
            writer_scalars.push((format!("{}.{TIME}", id.val()), self.updates));
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
            let old = std::mem::replace(buffer, Tensor::zeros([1, 1], device));
            *buffer = old.slice_assign([0..rows, 0..len], fresh);
        }
        Ok(())
    }
}

/// The step itself, eager: forward, label-smoothed loss over the batch's target tokens
/// (counted on the device: a host count would be frozen into a graph), backward, Adam.
/// Returns the model and `[loss, nll]`.
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
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let sums = Tensor::cat(vec![loss.detach().inner(), sums.nll.inner()], 0);
    (adam.step(model, grads), sums)
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
    if model.precision() != transduce::Precision::F32 {
        // Half precision checks its gradients on the host and skips steps there.
        return Some("half precision skips overflowing steps on the host; graphs need f32".into());
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
    mode: Mode,
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
        let inner = self.device.clone().inner();
        if self.fallback.is_none()
            && let Some(why) = uncapturable(&model, self.cpu)
        {
            self.fallback = Some(why);
        }
        self.adam.prepare(step, lr);
        let width = |rows: &[Vec<u32>]| rows.iter().map(Vec::len).max().unwrap_or(0);
        let shape = [forced.0.len(), width(&forced.0), width(&forced.1)];
        let class = match self.classes.get_mut(&shape) {
            Some(class) => {
                class.inputs.write(forced, &self.device)?;
                class
            }
            None => self.classes.entry(shape).or_insert(Class {
                inputs: Inputs::new(forced, &self.device)?,
                mode: if self.fallback.is_some() {
                    Mode::Eager
                } else {
                    Mode::Warming(0)
                },
            }),
        };
        // Dropout masks from the device where there are kernels (the CPU draws its own).
        let (epsilon, masks) = (self.epsilon, (!self.cpu).then_some(self.seed));
        match &mut class.mode {
            Mode::Replaying(replay) => {
                let Replay {
                    graph,
                    sums,
                    kernels,
                } = &**replay;
                // SAFETY: every buffer the capture touched is held: the inputs by the
                // class, the parameters by `model`, the moments, counter and table by
                // `adam`, the outputs by the class; all on this thread's stream.
                unsafe { Dispatch::graph_replay(inner.as_dispatch(), graph) }
                    .map_err(|e| CliError::Usage(format!(
                        "graph step: replay failed: {e:?}; the last checkpoint is intact: resume it without --graph"
                    )))?;
                self.counts.replayed += 1;
                census::note_replay(*kernels);
                // A copy: the next replay overwrites the graph's own output.
                Ok((model, sums.clone().mul_scalar(1.0)))
            }
            Mode::Warming(done) if *done + 1 == Self::WARMUP && !self.eager_only => {
                // The last eager step runs prepared (its allocations land where a graph
                // may keep them), and the step is then recorded at once on the same
                // buffers: a recording does not run, so it costs no optimizer step, and
                // the class's next batch is its first replay.
                if let Err(e) = Dispatch::graph_prepare(inner.as_dispatch()) {
                    self.fallback = Some(format!("graph capture unavailable: {e:?}"));
                    class.mode = Mode::Eager;
                    return self.step(model, forced, step, lr);
                }
                let (model, sums) = run(model, &mut self.adam, &class.inputs, epsilon, masks);
                self.counts.eager += 1;
                if let Err(e) = Dispatch::graph_start_capture(inner.as_dispatch()) {
                    // A backend without graphs (the CPU): eager from now on. Closing the
                    // prepared window leaves the stream as it was.
                    let _ = Dispatch::graph_stop_capture(inner.as_dispatch());
                    self.fallback = Some(format!("this backend captures no graphs ({e:?})"));
                    for class in self.classes.values_mut() {
                        if matches!(class.mode, Mode::Warming(_)) {
                            class.mode = Mode::Eager;
                        }
                    }
                    return Ok((model, sums));
                }
                let ((model, recorded, graph), kernels) = census::count_launches(|| {
                    let (model, recorded) =
                        run(model, &mut self.adam, &class.inputs, epsilon, masks);
                    // Fusion launches its queued kernels here, into the recording.
                    let graph = Dispatch::graph_stop_capture(inner.as_dispatch());
                    (model, recorded, graph)
                });
                let graph = graph.map_err(|e| {
                    CliError::Usage(format!(
                        "graph step: capturing the step of shape {shape:?} failed: {e:?}; the last checkpoint is intact: resume it without --graph"
                    ))
                })?;
                self.counts.captured += 1;
                class.mode = Mode::Replaying(Box::new(Replay {
                    graph,
                    sums: recorded,
                    kernels,
                }));
                Ok((model, sums))
            }
            mode => {
                let (model, sums) = run(model, &mut self.adam, &class.inputs, epsilon, masks);
                self.counts.eager += 1;
                if let Mode::Warming(done) = mode {
                    *done += 1;
                }
                Ok((model, sums))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::batch::Batch;
    use crate::data::shape::pad_to_shape;
    use crate::train::census::{Census, StepCensus};
    use crate::train::tests::{gpu_lock, losses, reversal_pairs, tiny_start, wgpu_device};
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
        assert!(eager_census.launches > 300.0, "{eager_census}");
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
