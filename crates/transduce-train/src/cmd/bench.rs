//! `transduce bench`: training and decoding speed on a synthetic workload.

use clap::Args;
use transduce::ModelConfig;

use crate::backend::Backend;
use crate::error::Result;
use crate::{bench, options};

#[derive(Args)]
pub struct BenchCmd {
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
}

pub fn run(cmd: BenchCmd) -> Result<()> {
    crate::backend::set_fusion(!cmd.no_fusion)?;
    let device = cmd.backend.device()?;
    crate::train::precision::check(cmd.precision, std::slice::from_ref(&device))?;
    let config = ModelConfig::preset(&cmd.preset)?;
    eprintln!(
        "device: {device:?}; preset {} ({} parameters)",
        cmd.preset,
        config.num_params()
    );
    let r = bench::run(&config, &device, cmd.batch_tokens, cmd.steps, cmd.precision)?;
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
    println!(
        "decoding (beam 4):  {:>10.2} sentences/s",
        r.decode_sentences_per_sec
    );
    Ok(())
}
