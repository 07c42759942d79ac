//! `transduce`: prepare data, train the Transformer (§5), average checkpoints, translate,
//! evaluate and export bundles for the browser. The flags are parsed here and in
//! `cmd/`; the work is the trainer library's (crates/transduce-train).

use clap::{Parser, Subcommand};

mod channel_rerank;
mod cmd;
mod gpu;
mod hub;
mod line_decoder;
mod options;
mod parsing;
mod recipe;
mod table3;

use cmd::{
    adapt::AdaptCmd, average::AverageCmd, bench::BenchCmd, eval::EvalCmd, export::ExportCmd,
    import::ImportCmd, parse::ParseCmd, prepare::PrepareCmd, score::ScoreCmd, train::TrainCmd,
    translate::TranslateCmd, warmup::WarmupCmd,
};
use recipe::command::RecipeCmd;
use transduce_train::error::Result;
use transduce_train::{memory, pipe};

#[derive(Parser)]
#[command(
    name = "transduce",
    version,
    about = "Train and run the Transformer of \"Attention Is All You Need\""
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Learn a shared BPE vocabulary and write token-id caches for training.
    Prepare(PrepareCmd),
    /// Train a model (§5): Adam + warm-up schedule, dropout, label smoothing, checkpoints.
    Train(TrainCmd),
    /// Average the last N checkpoints of a run (§6.1).
    Average(AverageCmd),
    /// Fine-tune a translator bundle on your own sentence pairs (a file of
    /// `source<TAB>translation` lines) and write the adapted bundle.
    Adapt(AdaptCmd),
    /// Translate text with a bundle or a training run (beam search, §6.1).
    Translate(TranslateCmd),
    /// Parse English sentences into trees EVALB reads (§6.3: beam 21, α 0.3).
    Parse(ParseCmd),
    /// Score sentence pairs or an n-best list: log p(target | source) under a model.
    Score(ScoreCmd),
    /// Evaluate: sacreBLEU-identical BLEU, EVALB-identical bracket F1, perplexity.
    Eval {
        #[command(subcommand)]
        metric: EvalCmd,
    },
    /// Write a bundle (config.json, tokenizer.json, model.safetensors) for the browser.
    Export(ExportCmd),
    /// Turn a Hugging Face Marian (OPUS-MT) model folder into a bundle: any of the
    /// Helsinki-NLP translators, decoded and fine-tuned by this engine.
    Import(ImportCmd),
    /// Measure training and decoding speed on a synthetic workload.
    Bench(BenchCmd),
    /// Tune and compile a GPU run's every batch shape ahead, into the persistent GPU cache.
    Warmup(WarmupCmd),
    /// Print Table 3's parameter counts, computed, next to the paper's; with `--results`,
    /// write the report of a run of it (table3.md and a perplexity chart).
    Table3(cmd::table3::Table3Cmd),
    /// Recipes: a TOML file of stages (prepare, train, average, teacher, select, export,
    /// test) that makes a model from its data in one command, rerunnable where it stopped.
    Recipe {
        #[command(subcommand)]
        action: RecipeCmd,
    },
}

fn main() {
    // Before any thread starts: it sets a variable of the environment.
    #[cfg(feature = "cuda")]
    transduce_train::distributed::nccl::non_blocking_communicators();
    memory::keep_freed_memory();
    pipe::stop_quietly_on_closed_pipe();
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Prepare(cmd) => cmd::prepare::run(cmd),
        Command::Train(cmd) => cmd::train::run(cmd),
        Command::Average(cmd) => cmd::average::run(cmd),
        Command::Adapt(cmd) => cmd::adapt::run(cmd),
        Command::Translate(cmd) => cmd::translate::run(cmd),
        Command::Parse(cmd) => cmd::parse::run(cmd),
        Command::Score(cmd) => cmd::score::run(cmd),
        Command::Eval { metric } => cmd::eval::run(metric),
        Command::Export(cmd) => cmd::export::run(cmd),
        Command::Import(cmd) => cmd::import::run(cmd),
        Command::Bench(cmd) => cmd::bench::run(cmd),
        Command::Warmup(cmd) => cmd::warmup::run(cmd),
        Command::Recipe { action } => recipe::command::run(action),
        Command::Table3(cmd) => cmd::table3::run(cmd),
    }
}
