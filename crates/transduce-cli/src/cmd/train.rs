//! `transduce train`: train a model (§5) in a run folder, or resume one.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use transduce::ModelConfig;
use transduce::bundle::TOKENIZER_FILE;

use transduce_train::backend::Backend;
use transduce_train::data::shape::Shapes;
use transduce_train::distributed::env::Launch;
use transduce_train::distributed::spawn::{self, LocalRanks};
use transduce_train::error::{Error, Result, io};
use transduce_train::prepared::Prepared;

/// `--resume` (continue the run) or `--resume auto` (continue it if it has a checkpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Resume {
    Yes,
    Auto,
}
use crate::options;
use transduce_train::train::job;
use transduce_train::{distributed, fsutil, model_folder, train};

#[derive(Args)]
pub struct TrainCmd {
    /// Prepared data folder (from `transduce prepare`).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Run folder: checkpoints, metrics.jsonl, run.json.
    #[arg(long)]
    pub out: PathBuf,
    /// Model preset: base, big, parsing, tiny, mini, compact, small, student (6 encoder and 2
    /// decoder layers, d_model 256), or a Table 3 row (A1 … E).
    /// Default: --init's architecture where it records one, else base.
    #[arg(long)]
    pub preset: Option<String>,
    /// Model config as JSON (overrides --preset).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint. `--resume auto`: continue it
    /// if it has a checkpoint, else start it as a new run with the other options (what a
    /// launcher that restarts a rank, torchrun --max-restarts or a SLURM requeue, needs:
    /// the same command every time). In a job, rank 0's folder decides for every rank.
    #[arg(long, num_args = 0..=1, default_missing_value = "yes", value_enum)]
    pub resume: Option<Resume>,
    /// Start a new run from these weights instead of random ones (continued training,
    /// fine-tuning on other data): a bundle folder, a run folder (its newest checkpoint), a
    /// checkpoint folder or a safetensors file. A bundle's or run's architecture is the
    /// default model config and its vocabulary must be --data's (`prepare --tokenizer`).
    /// Adam's moments and the learning-rate schedule (its warm-up too) start afresh.
    #[arg(long)]
    pub init: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// Compute precision of the forward and backward passes: f32, or mixed precision with
    /// f16 (dynamic loss scaling) or bf16 activations over f32 weights and Adam state. GPU
    /// backends only. Fixed for the run (a resumed run keeps its own).
    #[arg(long, default_value = "f32", value_parser = options::precision)]
    pub precision: transduce::Precision,
    /// Run the GPU backends without kernel fusion (to compare, or to rule fusion out).
    #[arg(long)]
    pub no_fusion: bool,
    /// Run the layer norms, attention and loss as burn's primitives instead of the fused
    /// kernels (GPU backends; the same values to rounding), to measure what they give. In
    /// replayed steps Adam and the finite check then run as tensor operations too (the
    /// accumulation of --accum stays a kernel); eager steps use burn's Adam either way.
    #[arg(long)]
    pub no_fused_layers: bool,
    /// The device of --backend to train on, e.g. `1`. Listing several, e.g. `0,1,2,3` (the
    /// paper used 8 GPUs), is short for --nproc-per-node over them: one rank per device,
    /// rank r on the r-th listed. wgpu numbers the machine's adapters (listing one twice
    /// opens two devices on it); CUDA its GPUs. Default: the backend's default device, or
    /// in a job of several ranks the device numbered by the rank's LOCAL_RANK.
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<usize>,
    /// Data-parallel training: start N ranks on this machine, one process per device, as
    /// `torchrun --nproc-per-node N` does. Each step takes accum × ranks batches, rank r
    /// those j ≡ r (mod ranks); the ranks sum their gradients over TCP (or MPI under
    /// mpirun), every rank applies the same Adam update, rank 0 alone validates, logs and
    /// checkpoints. Trains as one process with --accum multiplied by the ranks.
    #[arg(long, value_parser = options::count)]
    pub nproc_per_node: Option<usize>,
    /// Machines in the job, each running the same command with its own --node-rank
    /// (torchrun's --nnodes).
    #[arg(long, default_value_t = 1, value_parser = options::count)]
    pub nnodes: usize,
    /// This machine's place among --nnodes, from 0; machine 0 runs rank 0.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Machine 0's address as the others reach it (with --nnodes; default 127.0.0.1).
    #[arg(long)]
    pub master_addr: Option<String>,
    /// The port rank 0 listens on for the other ranks (default on one machine: a free one).
    #[arg(long)]
    pub master_port: Option<u16>,
    /// Source/target tokens per batch, padding included (§5.1: 25,000).
    #[arg(long, default_value_t = 25_000, value_parser = options::count)]
    pub max_tokens: usize,
    /// Batches accumulated per optimizer step.
    #[arg(long, default_value_t = 1, value_parser = options::count)]
    pub accum: usize,
    /// Warm-up steps of the learning-rate schedule (§5.3).
    #[arg(long, default_value_t = 4000, value_parser = options::count_u64)]
    pub warmup: u64,
    /// Factor on the §5.3 learning rate.
    #[arg(long, default_value_t = 1.0, value_parser = options::positive)]
    pub lr_factor: f64,
    /// Residual/embedding dropout P_drop (default: the preset's).
    #[arg(long, value_parser = options::probability)]
    pub dropout: Option<f64>,
    /// Label smoothing ε_ls (default: the preset's).
    #[arg(long, value_parser = options::probability)]
    pub label_smoothing: Option<f64>,
    /// The decoder's depth where it differs from the encoder's (default: the preset's): a
    /// shallow decoder, as distilled students have, decodes faster at the same encoder.
    #[arg(long)]
    pub decoder_layers: Option<usize>,
    /// Parsing, beyond the paper: add to each decoder input the encoder state of the word
    /// the next XX slot fills (word focus), so long sentences keep their alignment.
    #[arg(long)]
    pub word_focus: bool,
    #[arg(long, value_parser = options::count_u64)]
    pub max_steps: Option<u64>,
    #[arg(long, value_parser = options::count_u64)]
    pub max_epochs: Option<u64>,
    /// Stop after this many minutes of training (across resumes).
    #[arg(long, value_parser = options::positive)]
    pub max_minutes: Option<f64>,
    /// Checkpoint interval in minutes (§5.2 used 10).
    #[arg(long, default_value_t = 10.0, value_parser = options::positive)]
    pub checkpoint_minutes: f64,
    /// Checkpoint interval in steps (in addition to minutes).
    #[arg(long, value_parser = options::count_u64)]
    pub checkpoint_steps: Option<u64>,
    /// Checkpoints kept.
    #[arg(long, default_value_t = 20, value_parser = options::count)]
    pub keep: usize,
    /// Validate every N steps (0: at checkpoints).
    #[arg(long, default_value_t = 0)]
    pub valid_every: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Read the training loss back every this many steps (one transaction for all of
    /// them; `metrics.jsonl` still has a line per step). A read per step makes the host
    /// wait for the GPU every step.
    #[arg(long, default_value_t = train::LOG_EVERY, value_parser = options::count)]
    pub log_every: usize,
    /// Batch shapes: `classes` pads every batch to one of a few shapes (rows × length),
    /// so a GPU tunes and compiles kernels for a handful of shapes instead of one per
    /// batch; `exact` makes each batch as long as its longest pair. Default: classes on
    /// wgpu and CUDA, exact on the CPU (where padding only costs). Fixed for the run.
    #[arg(long, value_enum)]
    pub shapes: Option<Shapes>,
    /// Where the ranks of a job sum their gradients: `host` buffers (through TCP or MPI),
    /// or `nccl` in CUDA memory (replayed steps on CUDA; a single process then runs as a
    /// job of one, to measure the exchange). `auto`: NCCL for a job of several ranks on
    /// CUDA when the NCCL library loads, host buffers otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    pub exchange: distributed::exchange_mode::Via,
    /// Seconds a rank of a job waits for another in a collective (a gradient sum, a
    /// broadcast) before the job stops, naming the silent rank; 600 as NCCL's watchdog.
    /// Rank 0's validation and checkpoints happen while the others wait: keep it longer.
    #[arg(long, default_value_t = distributed::COLLECTIVE_TIMEOUT.as_secs_f64(), value_parser = options::positive)]
    pub collective_timeout: f64,
    /// Take every step eagerly, op by op with burn's Adam, instead of replaying it (replay
    /// is the default on wgpu and CUDA; the CPU backend, which has no graphs, steps eagerly
    /// with burn's Adam unless --graph says otherwise).
    #[arg(long, conflicts_with = "graph")]
    pub eager: bool,
    /// Capture each batch shape's step as a graph and replay it: the default on wgpu and
    /// CUDA (--eager turns it off). The host issues a few launches per step instead of
    /// hundreds; Adam's scalars live on the device, dropout masks are drawn there from the
    /// step count (other masks than an eager run's, as reproducible), and half precision
    /// checks its gradients and skips overflowing steps there. With --accum N each batch
    /// shape's gradients and the update are captured (N + 1 replays a step); the ranks of
    /// a job replay their gradients, a pack of them into one buffer and the update, with
    /// the exchange (--exchange) between. Steps stay eager with burn's Adam, and one line
    /// says why, for word-focus models. The CPU backend
    /// captures no graphs: there --graph takes eager steps with the device-scalar Adam only
    /// for a model without dropout (--dropout 0); with dropout (every preset's default) its
    /// masks come from the host and the steps stay eager with burn's Adam, as without
    /// --graph. Checkpoints are the same either way, so a run may resume with or without
    /// replay.
    #[arg(long)]
    pub graph: bool,
}

/// Ranks on several machines (`--nnodes` > 1) sum their gradients through NCCL (CUDA, the
/// replayed steps) or MPI (`mpirun`/`srun` start those jobs, not `--nnodes`); our own TCP
/// carries only the rendezvous and control, so a job that would send gradients over it
/// between machines is refused, saying what to install.
fn cross_machine_sums(cmd: &TrainCmd) -> Result<()> {
    if cmd.nnodes <= 1 {
        return Ok(());
    }
    // NCCL exists only in CUDA builds.
    #[cfg(feature = "cuda")]
    let nccl = cmd.backend == Backend::Cuda
        && cmd.exchange != distributed::exchange_mode::Via::Host
        && !cmd.eager
        && transduce_train::backend::library_loads(&["libnccl.so.2", "libnccl.so"]);
    #[cfg(not(feature = "cuda"))]
    let nccl = false;
    if nccl {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "--nnodes {}: across machines the gradients go through NCCL (--backend cuda with \
         NVIDIA's libnccl2, replayed steps) or MPI (start the ranks with mpirun or srun where Open \
         MPI or MPICH is installed, e.g. apt-get install openmpi-bin), \
         not this program's TCP, which carries only the rendezvous",
        cmd.nnodes
    )))
}

pub fn run(cmd: TrainCmd) -> Result<()> {
    // A rank of a job mpirun, srun or torchrun started (or this process's starter).
    let launch = Launch::from_env()?;
    // Device numbers the backend cannot have are refused before any rank starts.
    for &number in &cmd.devices {
        cmd.backend.check_number(Some(number))?;
    }
    cross_machine_sums(&cmd)?;
    if let Some(local) = local_ranks(&cmd, launch.as_ref())? {
        return spawn::run(&local);
    }
    transduce_train::backend::set_fusion(!cmd.no_fusion)?;
    let rank = job::Rank::join(
        launch.as_ref(),
        &job::JobOptions {
            backend: cmd.backend,
            devices: &cmd.devices,
            exchange: cmd.exchange,
            eager: cmd.eager,
            graph: cmd.graph,
            timeout: std::time::Duration::try_from_secs_f64(cmd.collective_timeout)
                .unwrap_or(std::time::Duration::MAX),
        },
    )?;
    let resume = match cmd.resume {
        None => job::Resume::No,
        Some(Resume::Yes) => job::Resume::Yes,
        Some(Resume::Auto) => job::Resume::Auto,
    };
    let resume = job::resumes(resume, cmd.init.is_some(), &cmd.out, &rank)?;
    let (config, mut prepared) = run_config(&cmd, resume, &rank)?;
    prepared.train.close_sources(&config.model);
    if let Some(valid) = &mut prepared.valid {
        valid.close_sources(&config.model);
    }
    let focus = train::focus_rule(&config.model, &prepared.tokenizer)?;
    // The other ranks say only which they are: their settings are rank 0's.
    if rank.lead {
        std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
        fsutil::write_atomic(
            &cmd.out.join(TOKENIZER_FILE),
            prepared.tokenizer.to_json()?.as_bytes(),
        )?;
        eprintln!(
            "model: {} parameters; {} training pairs",
            config.model.num_params(),
            prepared.train.len()
        );
    }
    let summary = train::Trainer {
        run_dir: &cmd.out,
        config,
        train: &prepared.train,
        valid: prepared.valid.as_ref(),
        focus,
        device: rank.device.clone(),
        resume,
        progress: !cmd.quiet,
        log_every: cmd.log_every,
        graph: rank.graph,
        fused: !cmd.no_fused_layers,
        collective: rank.collective.as_deref(),
    }
    .run()?;
    if rank.lead {
        eprintln!(
            "stopped at step {} (epoch {}, {:.0} s); checkpoint {}{}",
            summary.state.step,
            summary.state.epoch,
            summary.state.elapsed_secs,
            summary
                .last_checkpoint
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            summary
                .valid_nll
                .map(|n| format!("; validation perplexity {:.3}", n.exp()))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// The ranks this command starts on this machine (`--nproc-per-node`, `--nnodes`, several
/// `--devices`), unless a launcher started this process as a rank, or none are asked for.
fn local_ranks(cmd: &TrainCmd, launch: Option<&Launch>) -> Result<Option<LocalRanks>> {
    let local = LocalRanks::requested(
        cmd.nproc_per_node,
        &cmd.devices,
        cmd.nnodes,
        cmd.node_rank,
        cmd.master_addr.as_deref(),
        cmd.master_port,
    )?;
    match (local, launch) {
        (Some(local), None) => Ok(Some(local)),
        (Some(_), Some(launch)) if !spawn::is_started_rank() => Err(Error::Usage(format!(
            "{} started this process as rank {} of {}, and --nproc-per-node, --nnodes or --devices listing several would start ranks too: use one or the other",
            launch.launcher, launch.rank, launch.world
        ))),
        _ => Ok(None),
    }
}

/// The run's settings and data: a resumed run's own (`run.json`, its stop conditions
/// extended by the flags, its batches a step kept over another number of ranks), or a new
/// run's from the flags, on `--data` (and `--init`'s weights).
fn run_config(
    cmd: &TrainCmd,
    resume: bool,
    rank: &job::Rank,
) -> Result<(train::RunConfig, Prepared)> {
    if resume {
        let mut config = train::RunConfig::read(&cmd.out)?;
        let prepared = Prepared::load(&config.data)?;
        let options = &mut config.options;
        options.max_steps = cmd.max_steps.or(options.max_steps);
        options.max_epochs = cmd.max_epochs.or(options.max_epochs);
        options.max_minutes = cmd.max_minutes.or(options.max_minutes);
        job::keep_step_batches(options, rank.world(), rank.lead)?;
        return Ok((config, prepared));
    }
    let data = cmd
        .data
        .clone()
        .ok_or_else(|| Error::Usage("--data is required for a new run".into()))?;
    let prepared = Prepared::load(&data)?;
    let init = cmd
        .init
        .as_deref()
        .map(|path| model_folder::init_weights(path, &prepared.tokenizer, &data))
        .transpose()?;
    let init_model = init.as_ref().and_then(|i| i.model.clone());
    let config = train::RunConfig {
        model: model_config(cmd, prepared.tokenizer.vocab_size(), init_model)?,
        options: train::TrainOptions {
            max_tokens: cmd.max_tokens,
            accum: cmd.accum,
            warmup: cmd.warmup,
            lr_factor: cmd.lr_factor,
            max_steps: cmd.max_steps,
            max_epochs: cmd.max_epochs,
            max_minutes: cmd.max_minutes,
            checkpoint_minutes: Some(cmd.checkpoint_minutes),
            checkpoint_steps: cmd.checkpoint_steps,
            keep: cmd.keep,
            valid_every: cmd.valid_every,
            seed: cmd.seed,
            precision: cmd.precision,
            world: rank.world(),
            shapes: cmd.shapes.unwrap_or(match cmd.backend {
                Backend::Cpu => Shapes::Exact,
                Backend::Wgpu | Backend::Cuda => Shapes::Classes,
            }),
        },
        data,
        init: init.map(|i| i.weights),
    };
    Ok((config, prepared))
}

/// A model config as JSON (`--config`), with the file, line and column of what is wrong.
pub fn read_model_config(path: &std::path::Path) -> Result<ModelConfig> {
    let text = std::fs::read_to_string(path).map_err(io(path))?;
    serde_json::from_str(&text).map_err(|e| Error::Format {
        path: path.to_path_buf(),
        message: format!("line {} column {}: {e}", e.line(), e.column()),
    })
}

/// The model of a new run: --config, else --preset, else --init's architecture, else base.
fn model_config(cmd: &TrainCmd, vocab: usize, init: Option<ModelConfig>) -> Result<ModelConfig> {
    let mut config = match &cmd.config {
        Some(path) => read_model_config(path)?,
        None => match (&cmd.preset, init) {
            (Some(preset), _) => ModelConfig::preset(preset)?,
            (None, Some(init)) => init,
            (None, None) => ModelConfig::preset("base")?,
        },
    };
    config.vocab_size = vocab;
    if let Some(p) = cmd.dropout {
        config.dropout = p;
    }
    if let Some(e) = cmd.label_smoothing {
        config.label_smoothing = e;
    }
    if let Some(n) = cmd.decoder_layers {
        config.decoder_layers = (n != config.n_layers).then_some(n);
    }
    if cmd.word_focus {
        config.word_focus = true;
    }
    config.validate()?;
    Ok(config)
}
