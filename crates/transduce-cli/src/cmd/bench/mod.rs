//! `transduce bench`: training and decoding speed on a synthetic workload.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use transduce::burn::prelude::Device;
use transduce::decode::DecodeOptions;
use transduce::{Bundle, HostModel, ModelConfig, Task, Transformer};

use crate::options;
use transduce_train::backend::Backend;
use transduce_train::error::Result;

mod kernels;
mod workload;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCmd {
    #[command(subcommand)]
    pub what: Option<BenchWhat>,
    #[arg(long, default_value = "small")]
    pub preset: String,
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// Tokens per training batch.
    #[arg(long, default_value_t = 4096, value_parser = options::count)]
    pub batch_tokens: usize,
    /// Timed training steps.
    #[arg(long, default_value_t = 5, value_parser = options::count)]
    pub steps: usize,
    /// Training's compute precision: f32, f16 or bf16 (as `train --precision`).
    #[arg(long, default_value = "f32", value_parser = options::precision)]
    pub precision: transduce::Precision,
    /// Without kernel fusion (GPU backends), to measure what it gives.
    #[arg(long)]
    pub no_fusion: bool,
    /// Run the layer norms, attention and loss as burn's primitives instead of the fused
    /// kernels (GPU backends; the same values to rounding), to measure what they give; in
    /// replayed steps Adam and the finite check too (as `train --no-fused-layers`).
    #[arg(long)]
    pub no_fused_layers: bool,
    /// Dropout of the trained model (default: the preset's). 0 makes the loss after N
    /// steps comparable across frameworks (`scripts/bench/gpu.sh`).
    #[arg(long, value_parser = options::probability)]
    pub dropout: Option<f64>,
    /// Time training only (no matmul chain, no decoding).
    #[arg(long)]
    pub training_only: bool,
    /// Train with eager steps, op by op with burn's Adam (`train --eager`), instead of the
    /// replayed step, the default on wgpu and CUDA.
    #[arg(long, conflicts_with = "graph")]
    pub eager: bool,
    /// Train with the step captured as a graph and replayed (`train --graph`; the default
    /// on wgpu and CUDA): Adam's scalars (and half precision's loss scale) on the device,
    /// the step's launches replayed in one call. On the CPU (no graphs) the same steps run
    /// eagerly with the device-scalar Adam, and one line says so.
    #[arg(long)]
    pub graph: bool,
    /// Write the initial weights and the batch here (`init.safetensors`,
    /// `batch.safetensors`) for `scripts/bench/pytorch.py --exchange`.
    #[arg(long)]
    pub exchange: Option<PathBuf>,
    /// Start from these weights (e.g. an exchange folder's `init.safetensors`), not a
    /// random draw (which differs between backends).
    #[arg(long)]
    pub init: Option<PathBuf>,
    /// Print the training figures as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Benchmark decoding with this bundle (or run folder) instead of training: batch 1, 32
    /// and 128, greedy and beam 4, on `--input`'s lines. With `--backend wgpu` the GPU
    /// decoder runs and prints its dispatches, submits and readback bytes per step.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Benchmark decoding with a random model of `--preset` (on synthetic token ids):
    /// counts and speed need no trained weights.
    #[arg(long, conflicts_with = "model")]
    pub random_decoder: bool,
    /// Sentences to decode (with `--model`; default: the first lines of standard input).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Lines of the input decoded (synthetic sentences with `--random-decoder`).
    #[arg(long, default_value_t = 1000, value_parser = options::count)]
    pub lines: usize,
    /// Batch sizes to time (sentences decoded together).
    #[arg(long, value_delimiter = ',', default_value = "1,32,128")]
    pub batches: Vec<usize>,
    /// Beam sizes to time (1 = greedy).
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub beams: Vec<usize>,
    /// With `--backend wgpu`: time each kernel of a decoder step on the GPU (timestamps
    /// around every dispatch, where the adapter has them) for every batch size × beam, and
    /// print where a step's GPU time goes.
    #[arg(long)]
    pub profile: bool,
}

/// What else `bench` measures than the training step and decoding.
#[derive(clap::Subcommand)]
pub enum BenchWhat {
    /// Each family of fused training kernels (attention, layer norm, loss, dropout, Adam)
    /// against its unfused oracle, burn's primitives as --no-fused-layers runs them, on one
    /// shape of a preset: a table of time and launches per call (wgpu, CUDA).
    Kernels(KernelsCmd),
}

#[derive(Args)]
pub struct KernelsCmd {
    /// The preset whose widths, heads and vocabulary the shapes take.
    #[arg(long, default_value = "small")]
    pub preset: String,
    /// wgpu or CUDA: the kernels run on cubecl devices only.
    #[arg(long, value_enum, default_value = "wgpu")]
    pub backend: Backend,
    /// Tokens of the batch: rows of 26 positions, as many as fit.
    #[arg(long, default_value_t = 4096, value_parser = options::count)]
    pub batch_tokens: usize,
    /// The precisions to run each family in (those the device lacks are skipped, and said).
    #[arg(long, value_delimiter = ',', default_value = "f32,f16,bf16", value_parser = options::precision)]
    pub precisions: Vec<transduce::Precision>,
    /// Timed calls per row, after two warm-up calls and one counted.
    #[arg(long, default_value_t = 10, value_parser = options::count)]
    pub calls: usize,
}

/// `transduce bench kernels`.
fn bench_kernels(cmd: KernelsCmd) -> Result<()> {
    if !matches!(cmd.backend, Backend::Wgpu | Backend::Cuda) {
        return Err(transduce_train::error::Error::Usage(
            "bench kernels: the fused kernels run on --backend wgpu or cuda".into(),
        ));
    }
    let device = cmd.backend.device()?;
    let config = ModelConfig::preset(&cmd.preset)?;
    let length = 26;
    let shape = kernels::Shape {
        rows: (cmd.batch_tokens / length).max(1),
        length,
        calls: cmd.calls,
    };
    eprintln!(
        "device: {device:?}; preset {} (d_model {}, {} heads, vocabulary {}); {} rows × {} positions; {} timed calls a row",
        cmd.preset,
        config.d_model,
        config.n_heads,
        config.vocab_size,
        shape.rows,
        shape.length,
        shape.calls
    );
    let rows = kernels::run(&config, &device, &shape, &cmd.precisions)?;
    print!("{}", kernels::table(&rows));
    Ok(())
}

pub fn run(cmd: BenchCmd) -> Result<()> {
    if let Some(BenchWhat::Kernels(kernels)) = cmd.what {
        return bench_kernels(kernels);
    }
    if cmd.model.is_some() || cmd.random_decoder {
        return decoding(cmd);
    }
    transduce_train::backend::set_fusion(!cmd.no_fusion)?;
    let device = cmd.backend.device()?;
    transduce_train::train::engine::loss_scale::check(
        cmd.precision,
        std::slice::from_ref(&device),
    )?;
    let mut config = ModelConfig::preset(&cmd.preset)?;
    if let Some(p) = cmd.dropout {
        config.dropout = p;
    }
    eprintln!(
        "device: {device:?}; preset {} ({} parameters)",
        cmd.preset,
        config.num_params()
    );
    let options = workload::BenchOptions {
        batch_tokens: cmd.batch_tokens,
        steps: cmd.steps,
        precision: cmd.precision,
        training_only: cmd.training_only,
        graph: transduce_train::train::job::replays(cmd.backend, cmd.eager, cmd.graph),
        fused: !cmd.no_fused_layers,
        exchange: cmd.exchange.clone(),
        init: cmd.init.clone(),
    };
    let r = workload::run(&config, &device, &options)?;
    if cmd.json {
        // A build with `spirv` compiles wgpu's kernels to SPIR-V instead of WGSL.
        let backend = match cmd.backend {
            Backend::Wgpu if cfg!(feature = "spirv") => "wgpu-spirv".to_string(),
            Backend::Wgpu => "wgpu-wgsl".to_string(),
            other => format!("{other:?}").to_lowercase(),
        };
        let mut json = serde_json::json!({
            "framework": "transduce",
            "backend": backend,
            "preset": cmd.preset,
            "precision": cmd.precision.name(),
            "parameters": config.num_params(),
            "rows": r.rows,
            "tokens_per_step": r.tokens_per_step,
            "steps": cmd.steps,
            "tokens_per_sec": r.train_tokens_per_sec,
            "step_ms": r.step_ms,
            "final_loss": r.final_loss,
            "loss_step": r.loss_step,
            "graph": r.graph,
        });
        if let Some(c) = &r.census {
            json["launches_per_step"] = c.launches.into();
            json["kernels_per_step"] = c.kernels.into();
            json["host_ms_per_step"] = c.host_ms.into();
            json["other_threads_ms_per_step"] = c.other_ms.into();
            json["reads_per_step"] = c.reads.into();
            json["waits_per_step"] = c.waits.into();
            if let Some(idle) = c.idle_ms {
                json["host_ms_waiting_per_step"] = idle.into();
            }
        }
        if let Some((passes, update)) = r.phases {
            json["launches_forward_backward"] = passes.into();
            json["launches_optimizer"] = update.into();
        }
        if let Some(start) = &r.start {
            json["start"] = serde_json::to_value(start).unwrap_or_default();
        }
        println!("{json}");
        return Ok(());
    }
    if cmd.training_only {
        println!(
            "training ({}):      {:>10.0} tokens/s, {:.1} ms per step of {} target tokens; loss {:.4} per token after the last",
            cmd.precision.name(),
            r.train_tokens_per_sec,
            r.step_ms,
            r.tokens_per_step,
            r.final_loss
        );
        print_census(&r);
        return Ok(());
    }
    println!(
        "matmul 1024×1024:   {:>10.1} GFLOP/s (result within {:.1e} of the CPU result)",
        r.matmul_gflops, r.matmul_error
    );
    if r.matmul_error > 1e-3 {
        eprintln!("warning: this backend's matmul result is wrong; its GFLOP/s mean nothing");
    }
    println!(
        "training ({}):      {:>10.0} tokens/s ({:.1} GFLOP/s, {:.0}% of matmul)",
        cmd.precision.name(),
        r.train_tokens_per_sec,
        r.train_gflops,
        100.0 * r.train_gflops / r.matmul_gflops
    );
    print_census(&r);
    println!(
        "decoding (beam 4):  {:>10.2} sentences/s",
        r.decode_sentences_per_sec
    );
    Ok(())
}

/// The training step's census, and the kernels it launches most.
fn print_census(r: &workload::BenchReport) {
    if let Some(start) = &r.start {
        println!("start:              {start}");
    }
    if let Some(graph) = &r.graph {
        println!("graph:              {graph}");
    }
    let Some(c) = &r.census else { return };
    println!("training step:      {c}");
    if !c.threads.is_empty() {
        let threads: Vec<String> = c
            .threads
            .iter()
            .map(|(name, ms)| format!("{name} {ms:.1}"))
            .collect();
        println!("  host ms by thread: {}", threads.join(", "));
    }
    if c.launches > 0.0 {
        let top: Vec<String> = c
            .top
            .iter()
            .map(|(name, n)| format!("{n:.0} {name}"))
            .collect();
        println!("  most launched:    {}", top.join(", "));
    }
    if let Some((passes, update)) = r.phases.filter(|_| c.launches > 0.0) {
        println!(
            "  by phase:         {passes:.0} forward and backward, {update:.0} optimizer (one step, synced between)"
        );
    }
}

/// `bench --model` / `--random-decoder`: decoding speed of the host decoder (`--backend
/// cpu`) or the GPU decoder (`--backend wgpu`), every batch size × beam.
fn decoding(cmd: BenchCmd) -> Result<()> {
    let cpu = Device::flex();
    let (host, sources, words): (HostModel, Vec<Vec<u32>>, usize) = match &cmd.model {
        Some(path) => {
            let task = Task::Translate {
                source: String::new(),
                target: String::new(),
            };
            let bundle: Bundle = transduce_train::model_folder::load(path, None, task, &cpu)?;
            let lines = super::read_input(cmd.input.as_deref())?;
            let lines: Vec<&String> = lines
                .iter()
                .filter(|l| !l.trim().is_empty())
                .take(cmd.lines)
                .collect();
            let words = lines.iter().map(|l| l.split_whitespace().count()).sum();
            let sources = lines
                .iter()
                .map(|l| bundle.tokenizer.encode(l.trim()))
                .collect::<transduce::Result<_>>()?;
            let host = bundle.host().expect("loaded on the CPU backend").clone();
            (host, sources, words)
        }
        None => {
            let config = ModelConfig::preset(&cmd.preset)?;
            cpu.seed(1);
            let model = Transformer::new(&config, &cpu)?;
            let mut rng = transduce_train::rng::Rng::new(7);
            let sources: Vec<Vec<u32>> = (0..cmd.lines)
                .map(|_| {
                    let len = 8 + rng.below(23) as usize;
                    (0..len)
                        .map(|_| 4 + rng.below(config.vocab_size as u64 - 4) as u32)
                        .collect()
                })
                .collect();
            let words = sources.iter().map(Vec::len).sum();
            (HostModel::new(&model)?, sources, words)
        }
    };
    let c = host.config();
    eprintln!(
        "decoding: {} sentences ({words} source words), d_model {}, {}+{} layers, vocab {}",
        sources.len(),
        c.d_model,
        c.n_layers,
        c.n_layers,
        c.vocab_size
    );
    let gpu = match cmd.backend {
        Backend::Wgpu => Some(crate::gpu::upload_host(&crate::gpu::device()?, &host)),
        Backend::Cpu => {
            let threads = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all".into());
            eprintln!("host decoder, {threads} thread(s) (RAYON_NUM_THREADS)");
            None
        }
        other => {
            return Err(transduce_train::error::Error::Usage(format!(
                "bench --model decodes with --backend cpu (host decoder) or wgpu (GPU                  decoder), not {other:?}"
            )));
        }
    };
    if let Some(model) = &gpu {
        println!(
            "serial depth {} (iterations with global loads, summed over a step's dispatches: \
             greedy, one {}-token source, step {})",
            model.serial_depth()?,
            transduce_gpu::DEPTH_SOURCE,
            transduce_gpu::DEPTH_STEP
        );
    }
    if let (Some(model), true) = (&gpu, cmd.profile) {
        for &beam in &cmd.beams {
            for &batch in &cmd.batches {
                print_profile(model, batch, beam)?;
            }
        }
    }
    let mut order: Vec<usize> = (0..sources.len()).collect();
    order.sort_by_key(|&i| (sources[i].len(), i));
    for &beam in &cmd.beams {
        for &batch in &cmd.batches {
            let options = DecodeOptions {
                beam,
                alpha: 0.6,
                max_extra: 50,
                ..DecodeOptions::default()
            };
            if let Some(model) = &gpu {
                model.reset_counts();
            }
            let start = Instant::now();
            for chunk in order.chunks(batch.max(1)) {
                let batch: Vec<Vec<u32>> = chunk.iter().map(|&i| sources[i].clone()).collect();
                match &gpu {
                    Some(model) => {
                        pollster::block_on(model.best_outputs(&batch, &options, None))?;
                    }
                    None => {
                        transduce::decode::best_outputs(&host, &batch, &options, None)?;
                    }
                }
            }
            let seconds = start.elapsed().as_secs_f64();
            let search = if beam <= 1 {
                "greedy".to_string()
            } else {
                format!("beam {beam}")
            };
            let mut line = format!(
                "{:<8} batch {batch:>4}: {:>9.1} sentences/s {:>10.0} words/s ({seconds:.2} s)",
                search,
                sources.len() as f64 / seconds,
                words as f64 / seconds
            );
            if let Some(model) = &gpu {
                let counts = model.counts();
                let (dispatches, submits, readback) = counts.per_step();
                line += &format!(
                    "  dispatches/step {dispatches:.0}  submits/step {submits:.2}  readback \
                     bytes/step {readback:.0}  steps {}",
                    counts.steps
                );
            }
            println!("{line}");
        }
    }
    Ok(())
}

/// `bench --profile`: one table of GPU time per kernel of a decoder step.
fn print_profile(model: &transduce_gpu::GpuModel, batch: usize, beam: usize) -> Result<()> {
    const STEPS: usize = 20;
    let Some(profile) = pollster::block_on(model.profile(batch, beam, STEPS))? else {
        println!("profile: this adapter has no timestamp queries; nothing to time");
        return Ok(());
    };
    let search = if beam <= 1 {
        "greedy".to_string()
    } else {
        format!("beam {beam}")
    };
    let step = profile.step_us();
    println!(
        "GPU time of a decoder step ({search}, batch {batch}, {}-token sources, mean of steps 1–{STEPS}): {step:.1} µs",
        transduce_gpu::DEPTH_SOURCE
    );
    println!(
        "  {:<22} {:>10} {:>10} {:>10} {:>6} {:>11}",
        "kernel", "calls/step", "µs/call", "µs/step", "share", "depth/call"
    );
    for k in &profile.kernels {
        let per_step = k.calls as f64 / profile.steps as f64;
        let us_step = k.total_us / profile.steps as f64;
        println!(
            "  {:<22} {:>10.0} {:>10.1} {:>10.1} {:>5.1}% {:>11.1}",
            k.name,
            per_step,
            k.total_us / k.calls as f64,
            us_step,
            100.0 * us_step / step.max(f64::MIN_POSITIVE),
            k.depth as f64 / k.calls as f64
        );
    }
    Ok(())
}
