//! The Transformer's decoder (§6.1) on the GPU, through wgpu: the GPU counterpart of the
//! host decoder ([`transduce::host`]), with no tensor framework in the loop.
//!
//! The recipe of the fast GPU engines: weights uploaded once; buffers and bind groups made
//! once per shape class; the self-attention cache preallocated and written in place;
//! encoder–decoder keys and values computed once per source and shared by its beams; beam
//! reordering as an index (each row's history of cache rows), never a copy of the cache;
//! fused shaders (Q/K/V in one product writing the cache, attention over the cache, output
//! projection with residual and LayerNorm, the FFN's ReLU in its first product); the output
//! projection, log-softmax and per-row top-k on the GPU. A step is one command encoder and
//! one submit, and the only read back is each row's k candidates (token, log-probability).
//! Greedy decoding without a constraint keeps two steps in flight: the top-k shader writes
//! each row's next input token itself, so step t + 1 is submitted before the host reads
//! step t's candidates (read from one of two staging buffers while the other fills), and
//! the GPU does not sit idle while the host reads. Sentences × beams are the rows of one step. The search itself (which beams live on,
//! finished hypotheses, the length penalty, early stopping) is the host's
//! [`transduce::decode::BeamSearch`], so both decoders choose alike from alike scores.
//!
//! The same WGSL runs natively (Vulkan, Metal, DX12: the CLI) and in the browser (WebGPU).

mod device;
mod resident;
mod search;
mod shaders;
mod weights;
mod workspace;

use std::cell::{Cell, RefCell};

pub use device::{AdapterSummary, Gpu};
pub use shaders::{DEPTH_SOURCE, DEPTH_STEP};
pub use weights::WeightStorage;
pub use workspace::Counts;

use transduce::config::Positional;
use transduce::{HostModel, ModelConfig, Result};

use resident::{Positions, Resident};
use shaders::Shaders;
use weights::Weights;
use workspace::Workspace;

/// One kernel's share of [`GpuModel::profile`]'s steps.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    pub name: &'static str,
    /// Dispatches over all the profiled steps.
    pub calls: u64,
    /// Their GPU time, microseconds.
    pub total_us: f64,
    /// Their serial depth (`shaders::Depth`, summed over the calls): beside the time, what
    /// the loops alone predict.
    pub depth: u64,
}

/// Where a decoder step's GPU time goes ([`GpuModel::profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub steps: usize,
    pub kernels: Vec<KernelTime>,
}

impl Profile {
    /// Summed GPU time of a step's dispatches, microseconds (passes run back to back, so
    /// launch gaps between them are not in it).
    pub fn step_us(&self) -> f64 {
        self.kernels.iter().map(|k| k.total_us).sum::<f64>() / self.steps as f64
    }
}

/// A model on the GPU, ready to decode.
pub struct GpuModel {
    resident: Resident,
    /// The last shape class's buffers, reused while batches fit. Taken out while a batch
    /// decodes, so two interleaved batches (in the browser) each have their own.
    workspace: RefCell<Option<Workspace>>,
    counts: Cell<Counts>,
}

impl GpuModel {
    /// Uploads `host`'s weights to `gpu` in the narrowest form that holds them exactly:
    /// int8 for int8 bundles, f16 for f16 bundles where the device has `shader-f16`.
    pub fn new(gpu: &Gpu, host: &HostModel) -> GpuModel {
        let weights = Weights::upload(gpu, host, gpu.f16);
        let config = host.config().clone();
        let positions = match config.positional {
            Positional::Learned => {
                let (src, tgt) = host.position_tables(config.max_len);
                Positions::Learned(src, tgt)
            }
            Positional::Sinusoid => Positions::Sinusoid,
        };
        GpuModel {
            resident: Resident {
                shaders: Shaders::new(gpu, weights.storage),
                gpu: gpu.clone(),
                config,
                weights,
                positions,
            },
            workspace: RefCell::new(None),
            counts: Cell::new(Counts::default()),
        }
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &ModelConfig {
        &self.resident.config
    }

    /// The device it runs on.
    pub fn gpu(&self) -> &Gpu {
        &self.resident.gpu
    }

    /// How the weights are held.
    pub fn storage(&self) -> WeightStorage {
        self.resident.weights.storage
    }

    /// Bytes of weights on the GPU.
    pub fn weight_bytes(&self) -> u64 {
        self.resident.weights.bytes
    }

    /// What the decoder has counted since it was made (or last reset).
    pub fn counts(&self) -> Counts {
        self.counts.get()
    }

    /// Starts counting afresh.
    pub fn reset_counts(&self) {
        self.counts.set(Counts::default());
    }

    /// A decoder step's serial depth at the reference point ([`DEPTH_SOURCE`],
    /// [`DEPTH_STEP`], greedy, one sentence): the sum over the step's dispatches of the
    /// longest chain of loop iterations with global loads one thread runs, read from the
    /// dispatches this decoder records for that batch. At batch 1 the GPU waits on memory,
    /// so this, not the arithmetic, bounds a step's time.
    pub fn serial_depth(&self) -> Result<u64> {
        let shape = workspace::Shape {
            sources: 1,
            source_rows: DEPTH_SOURCE,
            rows: 1,
            cap: DEPTH_STEP + 1,
            k: 1,
            positions: DEPTH_STEP + 1,
        };
        let ws = self.take_workspace(shape)?;
        let depth = ws.step_depth(DEPTH_STEP as u64 - 1, DEPTH_SOURCE as u64);
        self.give_back(ws);
        Ok(depth)
    }

    /// GPU time of each kernel of a decoder step, where the device has timestamps
    /// (`None` otherwise): `batch` sentences of [`DEPTH_SOURCE`] synthetic tokens, `beam`
    /// rows each, `steps` decoder steps, each dispatch in its own timed compute pass.
    /// Dispatches of one name (every layer's) are summed; the order is a step's.
    pub async fn profile(
        &self,
        batch: usize,
        beam: usize,
        steps: usize,
    ) -> Result<Option<Profile>> {
        if !self.resident.gpu.timestamps {
            return Ok(None);
        }
        let (batch, beam, steps) = (batch.max(1), beam.max(1), steps.max(1));
        let rows = batch * beam;
        let shape = workspace::Shape {
            sources: batch,
            source_rows: batch * DEPTH_SOURCE,
            rows,
            cap: steps + 1,
            k: beam,
            positions: (steps + 1).max(DEPTH_SOURCE),
        };
        let ws = self.take_workspace(shape)?;
        let vocab = self.resident.config.vocab_size;
        let sources: Vec<Vec<u32>> = (0..batch)
            .map(|s| {
                (0..DEPTH_SOURCE)
                    .map(|j| 4 + ((s * 31 + j * 17) % (vocab - 4)) as u32)
                    .collect()
            })
            .collect();
        let mut counts = Counts::default();
        ws.encode(&self.resident, &sources, &mut counts);
        let mut kernels: Vec<KernelTime> = Vec::new();
        let mut outcome = Ok(());
        for t in 0..steps {
            let step_rows: Vec<workspace::Row> = (0..rows)
                .map(|i| workspace::Row {
                    token: transduce::tokenizer::BOS,
                    src: (i / beam) as u32,
                    pos: t as u32,
                    parent: i as u32,
                    focus: -1,
                    limit: workspace::NO_LIMIT,
                })
                .collect();
            let times = match ws.profile_step(&self.resident, t, &step_rows).await {
                Ok(times) => times,
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            };
            for (name, ns, depth) in times {
                match kernels.iter_mut().find(|k| k.name == name) {
                    Some(k) => {
                        k.calls += 1;
                        k.total_us += ns / 1e3;
                        k.depth += depth;
                    }
                    None => kernels.push(KernelTime {
                        name,
                        calls: 1,
                        total_us: ns / 1e3,
                        depth,
                    }),
                }
            }
        }
        self.give_back(ws);
        outcome?;
        Ok(Some(Profile { steps, kernels }))
    }

    /// A workspace for `shape`: the cached one if it fits, else a new one.
    fn take_workspace(&self, shape: workspace::Shape) -> Result<Workspace> {
        match self.workspace.borrow_mut().take() {
            Some(ws) if ws.shape.fits(&shape) => Ok(ws),
            _ => Workspace::new(&self.resident, shape),
        }
    }

    fn give_back(&self, ws: Workspace) {
        *self.workspace.borrow_mut() = Some(ws);
    }
}
