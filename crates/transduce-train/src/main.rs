//! `transduce`: prepare data, train the Transformer (§5), average checkpoints, translate,
//! evaluate and export bundles for the browser.

mod average;
mod backend;
mod bench;
mod data;
mod error;
mod fsutil;
mod memory;
mod options;
mod parse;
mod pipe;
mod prepare;
mod source;
mod train;
mod translate;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use transduce::bundle::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, WeightDtype};
use transduce::decode::DecodeOptions;
use transduce::task::parse::{PLACEHOLDER, linearize, open_token};
use transduce::{ModelConfig, Task};

use backend::Backend;
use error::{CliError, Result, io};

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
    /// Translate text with a bundle or a training run (beam search, §6.1).
    Translate(TranslateCmd),
    /// Parse English sentences into trees EVALB reads (§6.3: beam 21, α 0.3).
    Parse(ParseCmd),
    /// Evaluate: sacreBLEU-identical BLEU, EVALB-identical bracket F1, perplexity.
    Eval {
        #[command(subcommand)]
        metric: EvalCmd,
    },
    /// Write a bundle (config.json, tokenizer.json, model.safetensors) for the browser.
    Export(ExportCmd),
    /// Measure training and decoding speed on a synthetic workload.
    Bench(BenchCmd),
    /// Print Table 3's parameter counts, computed, next to the paper's.
    Table3,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TaskKind {
    /// A parallel corpus: --src and --tgt.
    Translate,
    /// A treebank (§6.3): --trees.
    Parse,
}

#[derive(Args)]
struct PrepareCmd {
    #[arg(long, value_enum, default_value = "translate")]
    task: TaskKind,
    /// Source side of the training corpus (one sentence a line, .gz accepted).
    #[arg(long, required_if_eq("task", "translate"))]
    src: Option<PathBuf>,
    /// Target side of the training corpus.
    #[arg(long, required_if_eq("task", "translate"))]
    tgt: Option<PathBuf>,
    /// Source side of the validation corpus.
    #[arg(long, requires = "valid_tgt")]
    valid_src: Option<PathBuf>,
    /// Target side of the validation corpus.
    #[arg(long, requires = "valid_src")]
    valid_tgt: Option<PathBuf>,
    /// Training treebank for --task parse (one tree a line or .mrg layout, .gz accepted).
    #[arg(long, required_if_eq("task", "parse"))]
    trees: Option<PathBuf>,
    /// Validation treebank for --task parse.
    #[arg(long)]
    valid_trees: Option<PathBuf>,
    /// Size of the shared BPE vocabulary (§5.1: about 37,000 for WMT14 en–de; §6.3:
    /// 16,000 for WSJ parsing).
    #[arg(long, default_value_t = 37_000, value_parser = options::vocab_size)]
    vocab_size: usize,
    /// Use this tokenizer instead of learning one: a tokenizer.json, or a bundle, run or
    /// prepared folder holding one. Models trained on data prepared with one tokenizer
    /// share a vocabulary, so they can be ensembled.
    #[arg(long, conflicts_with = "vocab_size")]
    tokenizer: Option<PathBuf>,
    /// Pairs with a side longer than this many tokens are dropped (and counted).
    #[arg(long, default_value_t = 256, value_parser = options::count)]
    max_len: usize,
    /// Output folder.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
struct ParseCmd {
    #[command(flatten)]
    model: EnsembleArgs,
    /// Input: one sentence a line as space-separated treebank tokens, or a treebank tree
    /// a line (its words and POS tags are used). Default: standard input.
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Input lines are raw English (never trees): split into treebank tokens first.
    #[arg(long)]
    raw: bool,
    /// Beam size (§6.3: 21).
    #[arg(long, default_value_t = 21, value_parser = options::count)]
    beam: usize,
    /// Length penalty α (§6.3: 0.3).
    #[arg(long, default_value_t = 0.3, value_parser = options::non_negative)]
    alpha: f64,
    /// Output may be this many tokens longer than the input (§6.3: 300).
    #[arg(long, default_value_t = 300)]
    max_extra: usize,
    /// Decode without the well-formedness constraint (malformed output is repaired).
    #[arg(long)]
    no_constraint: bool,
    /// With several --model: `mean` decodes them as one ensemble (shared vocabulary);
    /// `vote` lets each parse alone and keeps the constituents at least half of them
    /// propose (any vocabularies).
    #[arg(long, value_enum, default_value = "mean")]
    combine: parse::Combine,
    /// Ignore the model: output the right-branching baseline.
    #[arg(long)]
    right_branching: bool,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 8, value_parser = options::count)]
    batch_size: usize,
    #[arg(long)]
    quiet: bool,
}

// The models `translate` and `parse` decode with. The commands themselves require
// `--model`, so that `parse --right-branching` can go without.
#[derive(Args)]
struct EnsembleArgs {
    /// A bundle folder, or a training run folder. Repeat it to decode with an ensemble:
    /// models sharing one vocabulary, each next token scored by the mean of their
    /// log-probabilities (`parse` can also let them vote: --combine).
    #[arg(long = "model", value_name = "MODEL")]
    models: Vec<PathBuf>,
    /// With a run folder: a checkpoint folder or a .safetensors file (default: newest).
    /// With several models, one per model in order.
    #[arg(long = "checkpoint", value_name = "CHECKPOINT")]
    checkpoints: Vec<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
}

#[derive(Args)]
struct TrainCmd {
    /// Prepared data folder (from `transduce prepare`).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Run folder: checkpoints, metrics.jsonl, run.json.
    #[arg(long)]
    out: PathBuf,
    /// Model preset: base, big, parsing, tiny, mini, small, or a Table 3 row (A1 … E).
    #[arg(long, default_value = "base")]
    preset: String,
    /// Model config as JSON (overrides --preset).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Continue the run in --out from its newest checkpoint.
    #[arg(long)]
    resume: bool,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// Data-parallel training on these devices of --backend, e.g. `0,1,2,3` (the paper
    /// used 8 GPUs): each step takes accum × devices batches, one share per device. wgpu
    /// numbers the machine's adapters (listing one twice opens two devices on it); CUDA
    /// its GPUs. Default: the backend's one default device.
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// Source/target tokens per batch, padding included (§5.1: 25,000).
    #[arg(long, default_value_t = 25_000, value_parser = options::count)]
    max_tokens: usize,
    /// Batches accumulated per optimizer step.
    #[arg(long, default_value_t = 1, value_parser = options::count)]
    accum: usize,
    /// Warm-up steps of the learning-rate schedule (§5.3).
    #[arg(long, default_value_t = 4000, value_parser = options::count_u64)]
    warmup: u64,
    /// Factor on the §5.3 learning rate.
    #[arg(long, default_value_t = 1.0, value_parser = options::positive)]
    lr_factor: f64,
    /// Residual/embedding dropout P_drop (default: the preset's).
    #[arg(long, value_parser = options::probability)]
    dropout: Option<f64>,
    /// Label smoothing ε_ls (default: the preset's).
    #[arg(long, value_parser = options::probability)]
    label_smoothing: Option<f64>,
    /// Parsing, beyond the paper: add to each decoder input the encoder state of the word
    /// the next XX slot fills (word focus), so long sentences keep their alignment.
    #[arg(long)]
    word_focus: bool,
    #[arg(long, value_parser = options::count_u64)]
    max_steps: Option<u64>,
    #[arg(long, value_parser = options::count_u64)]
    max_epochs: Option<u64>,
    /// Stop after this many minutes of training (across resumes).
    #[arg(long, value_parser = options::positive)]
    max_minutes: Option<f64>,
    /// Checkpoint interval in minutes (§5.2 used 10).
    #[arg(long, default_value_t = 10.0, value_parser = options::positive)]
    checkpoint_minutes: f64,
    /// Checkpoint interval in steps (in addition to minutes).
    #[arg(long, value_parser = options::count_u64)]
    checkpoint_steps: Option<u64>,
    /// Checkpoints kept.
    #[arg(long, default_value_t = 20, value_parser = options::count)]
    keep: usize,
    /// Validate every N steps (0: at checkpoints).
    #[arg(long, default_value_t = 0)]
    valid_every: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct AverageCmd {
    /// Run folder.
    #[arg(long)]
    run: PathBuf,
    /// How many of the newest checkpoints.
    #[arg(long, default_value_t = 5, value_parser = options::count)]
    last: usize,
    /// Output file (default: RUN/averaged-last-N.safetensors).
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Args)]
struct ModelArgs {
    /// A bundle folder, or a training run folder.
    #[arg(long)]
    model: PathBuf,
    /// With a run folder: a checkpoint folder or a .safetensors file (default: newest).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
}

#[derive(Args)]
struct TranslateCmd {
    #[command(flatten)]
    model: EnsembleArgs,
    /// Input file (default: standard input).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long)]
    output: Option<PathBuf>,
    /// Beam size, 1 = greedy (default: the bundle's; §6.1's 4 for a run folder).
    #[arg(long, value_parser = options::count)]
    beam: Option<usize>,
    /// Length penalty α (default: the bundle's; §6.1's 0.6 for a run folder).
    #[arg(long, value_parser = options::non_negative)]
    alpha: Option<f64>,
    /// Output may be this many tokens longer than the input (default: the bundle's; 50).
    #[arg(long)]
    max_extra: Option<usize>,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 32, value_parser = options::count)]
    batch_size: usize,
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
enum EvalCmd {
    /// BLEU exactly as sacreBLEU 2.6 computes it, with its signature.
    Bleu {
        /// System output, one sentence a line.
        #[arg(long)]
        hyp: PathBuf,
        /// Reference translations (repeat for several references).
        #[arg(long = "ref", required = true)]
        refs: Vec<PathBuf>,
        /// 13a (sacreBLEU's default), intl, or none.
        #[arg(long, default_value = "13a")]
        tokenize: String,
        /// Case-insensitive BLEU.
        #[arg(long)]
        lowercase: bool,
        /// exp (default), floor, add-k, or none.
        #[arg(long, default_value = "exp")]
        smooth_method: String,
        /// Value for floor / add-k smoothing.
        #[arg(long, value_parser = options::non_negative)]
        smooth_value: Option<f64>,
        /// Sentence-level BLEU (effective order), one score per line.
        #[arg(long)]
        sentence: bool,
    },
    /// Bracket scores exactly as EVALB with COLLINS.prm prints them.
    F1 {
        /// Gold trees, one per line.
        #[arg(long)]
        gold: PathBuf,
        /// Parser output, one per line.
        #[arg(long)]
        test: PathBuf,
    },
    /// Perplexity per target wordpiece of a model: a translation model on a parallel
    /// corpus (`--src`, `--tgt`), a parsing model on treebank trees (`--trees`).
    Ppl {
        #[command(flatten)]
        model: ModelArgs,
        /// Source sentences, one a line (translation).
        #[arg(long, requires = "tgt", conflicts_with = "trees")]
        src: Option<PathBuf>,
        /// Reference translations, one a line.
        #[arg(long, requires = "src")]
        tgt: Option<PathBuf>,
        /// Treebank trees (parsing): each tree's words are the source and its
        /// linearization (§6.3) the target, as `prepare --task parse` makes them.
        #[arg(long, required_unless_present = "src")]
        trees: Option<PathBuf>,
    },
}

#[derive(Args)]
struct ExportCmd {
    #[command(flatten)]
    model: ModelArgs,
    /// Output bundle folder.
    #[arg(long)]
    out: PathBuf,
    /// Store weights in half precision (half the size).
    #[arg(long)]
    f16: bool,
    /// What the model does (a run folder does not say).
    #[arg(long, value_enum, default_value = "translate")]
    task: TaskKind,
    /// Source language code (translation).
    #[arg(long, default_value = "en")]
    source: String,
    /// Target language code (translation).
    #[arg(long, default_value = "de")]
    target: String,
    /// A metric to record in config.json, as key=value (repeatable).
    #[arg(long = "metric")]
    metrics: Vec<String>,
    /// A command to record in the provenance (repeatable).
    #[arg(long = "command")]
    commands: Vec<String>,
    /// Default beam size stored in the bundle (default: the task's, §6.1/§6.3).
    #[arg(long, value_parser = options::count)]
    beam: Option<usize>,
    /// Default length penalty α stored in the bundle, e.g. one chosen on the dev set as
    /// §6.1 chose 0.6 (default: the task's).
    #[arg(long, value_parser = options::non_negative)]
    alpha: Option<f64>,
}

#[derive(Args)]
struct BenchCmd {
    #[arg(long, default_value = "small")]
    preset: String,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: Backend,
    /// Tokens per training batch.
    #[arg(long, default_value_t = 4096, value_parser = options::count)]
    batch_tokens: usize,
    /// Timed training steps.
    #[arg(long, default_value_t = 5, value_parser = options::count)]
    steps: usize,
}

fn main() {
    memory::keep_freed_memory();
    pipe::stop_quietly_on_closed_pipe();
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn read_input(path: Option<&Path>) -> Result<Vec<String>> {
    match path {
        Some(p) => {
            let bytes = data::corpus::read_bytes(p)?;
            if bytes.is_empty() {
                return Ok(Vec::new());
            }
            data::corpus::read_lines(p)
        }
        None => {
            let stdin = std::io::stdin();
            let mut lines = Vec::new();
            for (i, line) in stdin.lock().split(b'\n').enumerate() {
                let line = line.map_err(io(Path::new("<stdin>")))?;
                let line = line.strip_suffix(b"\r").unwrap_or(&line).to_vec();
                lines.push(String::from_utf8(line).map_err(|e| CliError::Utf8 {
                    path: PathBuf::from("<stdin>"),
                    line: i + 1,
                    detail: e.utf8_error().to_string(),
                })?);
            }
            Ok(lines)
        }
    }
}

/// Writes one line per entry to `path`, or to standard output.
fn write_output(lines: &[String], path: Option<&Path>) -> Result<()> {
    let mut text = lines.join("\n");
    if !lines.is_empty() {
        text.push('\n');
    }
    match path {
        Some(p) => std::fs::write(p, text).map_err(io(p)),
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(io(Path::new("<stdout>"))),
    }
}

fn eval_bleu(
    hyp: &Path,
    refs: &[PathBuf],
    tokenize: &str,
    lowercase: bool,
    smooth_method: &str,
    smooth_value: Option<f64>,
    sentence: bool,
) -> Result<()> {
    use transduce_metrics::bleu;
    let usage = |e: bleu::BleuError| CliError::Usage(e.to_string());
    let options = bleu::BleuOptions {
        lowercase,
        tokenize: tokenize.parse().map_err(usage)?,
        smooth_method: smooth_method.parse().map_err(usage)?,
        smooth_value,
        effective_order: None,
    };
    let hyps = read_input(Some(hyp))?;
    let streams: Vec<Vec<String>> = refs
        .iter()
        .map(|r| read_input(Some(r)))
        .collect::<Result<_>>()?;
    for (r, stream) in refs.iter().zip(&streams) {
        if stream.len() != hyps.len() {
            return Err(CliError::LineCount {
                src_path: hyp.to_path_buf(),
                src_lines: hyps.len(),
                tgt_path: r.clone(),
                tgt_lines: stream.len(),
            });
        }
    }
    if sentence {
        for (i, h) in hyps.iter().enumerate() {
            let sentence_refs: Vec<&str> = streams.iter().map(|s| s[i].as_str()).collect();
            let score = bleu::sentence_bleu(h, &sentence_refs, &options).map_err(usage)?;
            println!("{}", score.format_with_signature());
        }
    } else {
        let score = bleu::corpus_bleu_streams(&hyps, &streams, &options).map_err(usage)?;
        println!("{}", score.format_with_signature());
    }
    Ok(())
}

fn model_config(cmd: &TrainCmd, vocab: usize) -> Result<ModelConfig> {
    let mut config = match &cmd.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(io(path))?;
            serde_json::from_str(&text).map_err(|e| CliError::Format {
                path: path.clone(),
                message: format!("line {} column {}: {e}", e.line(), e.column()),
            })?
        }
        None => ModelConfig::preset(&cmd.preset)?,
    };
    config.vocab_size = vocab;
    if let Some(p) = cmd.dropout {
        config.dropout = p;
    }
    if let Some(e) = cmd.label_smoothing {
        config.label_smoothing = e;
    }
    if cmd.word_focus {
        config.word_focus = true;
    }
    config.validate()?;
    Ok(config)
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Prepare(cmd) => {
            let vocabulary = match &cmd.tokenizer {
                Some(path) => prepare::Vocabulary::Reuse(path),
                None => prepare::Vocabulary::Learn(cmd.vocab_size),
            };
            match cmd.task {
                TaskKind::Translate => {
                    let missing = || CliError::Usage("--src and --tgt are required".into());
                    prepare::prepare(prepare::PrepareArgs {
                        src: cmd.src.as_deref().ok_or_else(missing)?,
                        tgt: cmd.tgt.as_deref().ok_or_else(missing)?,
                        valid_src: cmd.valid_src.as_deref(),
                        valid_tgt: cmd.valid_tgt.as_deref(),
                        vocabulary,
                        max_len: cmd.max_len,
                        out: &cmd.out,
                    })?;
                }
                TaskKind::Parse => {
                    let trees = cmd.trees.as_deref().ok_or_else(|| {
                        CliError::Usage("--trees is required with --task parse".into())
                    })?;
                    prepare::prepare_parse(prepare::ParsePrepareArgs {
                        train: trees,
                        valid: cmd.valid_trees.as_deref(),
                        vocabulary,
                        max_len: cmd.max_len,
                        out: &cmd.out,
                    })?;
                }
            }
        }
        Command::Train(cmd) => {
            let devices = cmd.backend.devices(&cmd.devices)?;
            for device in &devices {
                eprintln!("device: {device:?}");
            }
            let (data_dir, run_config) = if cmd.resume {
                let run = train::RunConfig::read(&cmd.out)?;
                (run.data.clone(), Some(run))
            } else {
                let data = cmd
                    .data
                    .clone()
                    .ok_or_else(|| CliError::Usage("--data is required for a new run".into()))?;
                (data, None)
            };
            let prepared = prepare::Prepared::load(&data_dir)?;
            let config = match run_config {
                Some(run) => run,
                None => train::RunConfig {
                    model: model_config(&cmd, prepared.tokenizer.vocab_size())?,
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
                    },
                    data: data_dir.clone(),
                },
            };
            let mut config = config;
            if cmd.resume {
                // Stop conditions may be extended when resuming.
                config.options.max_steps = cmd.max_steps.or(config.options.max_steps);
                config.options.max_epochs = cmd.max_epochs.or(config.options.max_epochs);
                config.options.max_minutes = cmd.max_minutes.or(config.options.max_minutes);
            }
            let focus = train::focus_rule(&config.model, &prepared.tokenizer)?;
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
            let summary = train::Trainer {
                run_dir: &cmd.out,
                config,
                train: &prepared.train,
                valid: prepared.valid.as_ref(),
                focus,
                devices,
                resume: cmd.resume,
                progress: !cmd.quiet,
            }
            .run()?;
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
        Command::Average(cmd) => {
            let out = cmd.out.unwrap_or_else(|| {
                cmd.run
                    .join(format!("averaged-last-{}.safetensors", cmd.last))
            });
            let steps = average::average(&cmd.run, cmd.last, &out)?;
            eprintln!("averaged steps {steps:?} into {}", out.display());
        }
        Command::Translate(cmd) => {
            let device = cmd.model.backend.device()?;
            let task = Task::Translate {
                source: String::new(),
                target: String::new(),
            };
            let bundles = source::load_ensemble(
                &cmd.model.models,
                &cmd.model.checkpoints,
                task,
                &device,
                true,
            )?;
            let lines = read_input(cmd.input.as_deref())?;
            let defaults = &bundles[0].config.decoding;
            let options = DecodeOptions {
                beam: cmd.beam.unwrap_or(defaults.beam),
                alpha: cmd.alpha.unwrap_or(defaults.alpha),
                max_extra: cmd.max_extra.unwrap_or(defaults.max_extra),
            };
            let out =
                translate::translate_lines(&bundles, &lines, &options, cmd.batch_size, !cmd.quiet)?;
            write_output(&out, cmd.output.as_deref())?;
        }
        Command::Parse(cmd) => {
            let input_name = cmd
                .input
                .as_ref()
                .map_or("<stdin>".to_string(), |p| p.display().to_string());
            let lines = read_input(cmd.input.as_deref())?;
            let sentences = parse::read_sentences(&lines, cmd.raw, &input_name)?;
            let (bundles, method) = if cmd.right_branching {
                (Vec::new(), parse::Method::RightBranching)
            } else {
                let device = cmd.model.backend.device()?;
                if cmd.model.models.is_empty() {
                    return Err(CliError::Usage(
                        "--model is required (or --right-branching)".into(),
                    ));
                }
                let bundles = source::load_ensemble(
                    &cmd.model.models,
                    &cmd.model.checkpoints,
                    Task::Parse,
                    &device,
                    cmd.combine == parse::Combine::Mean,
                )?;
                let method = parse::Method::Model {
                    constrained: !cmd.no_constraint,
                    options: DecodeOptions {
                        beam: cmd.beam,
                        alpha: cmd.alpha,
                        max_extra: cmd.max_extra,
                    },
                    batch_size: cmd.batch_size,
                    combine: cmd.combine,
                };
                (bundles, method)
            };
            let (out, malformed) =
                parse::parse_sentences(&bundles, &sentences, &method, !cmd.quiet)?;
            if !cmd.right_branching {
                eprintln!(
                    "{} sentences; {malformed} decoder outputs were not well-formed trees and were repaired",
                    out.len()
                );
            }
            write_output(&out, cmd.output.as_deref())?;
        }
        Command::Eval { metric } => match metric {
            EvalCmd::Bleu {
                hyp,
                refs,
                tokenize,
                lowercase,
                smooth_method,
                smooth_value,
                sentence,
            } => eval_bleu(
                &hyp,
                &refs,
                &tokenize,
                lowercase,
                &smooth_method,
                smooth_value,
                sentence,
            )?,
            EvalCmd::F1 { gold, test } => {
                use transduce_metrics::evalb;
                let gold_text =
                    String::from_utf8_lossy(&data::corpus::read_bytes(&gold)?).to_string();
                let test_text =
                    String::from_utf8_lossy(&data::corpus::read_bytes(&test)?).to_string();
                let report =
                    evalb::evaluate_text(&gold_text, &test_text, &evalb::EvalbParams::collins())
                        .map_err(|e| {
                            CliError::Usage(format!(
                                "{} vs {}: {e}",
                                gold.display(),
                                test.display()
                            ))
                        })?;
                for line in report.stderr_lines() {
                    eprintln!("{line}");
                }
                print!("{report}");
            }
            EvalCmd::Ppl {
                model,
                src,
                tgt,
                trees,
            } => eval_ppl(&model, src, tgt, trees)?,
        },
        Command::Export(cmd) => {
            let device = cmd.model.backend.device()?;
            let task = match cmd.task {
                TaskKind::Parse => Task::Parse,
                TaskKind::Translate => Task::Translate {
                    source: cmd.source.clone(),
                    target: cmd.target.clone(),
                },
            };
            let mut bundle = source::load(
                &cmd.model.model,
                cmd.model.checkpoint.as_deref(),
                task,
                &device,
            )?;
            for m in &cmd.metrics {
                let (k, v) = m
                    .split_once('=')
                    .ok_or_else(|| CliError::Usage(format!("--metric {m}: expected key=value")))?;
                let value = v
                    .parse::<f64>()
                    .map(serde_json::Value::from)
                    .unwrap_or_else(|_| serde_json::Value::from(v));
                bundle.config.metrics.insert(k.to_string(), value);
            }
            bundle
                .config
                .provenance
                .commands
                .extend(cmd.commands.iter().cloned());
            let decoding = &mut bundle.config.decoding;
            decoding.beam = cmd.beam.unwrap_or(decoding.beam);
            decoding.alpha = cmd.alpha.unwrap_or(decoding.alpha);
            if decoding.beam == 0 || !(decoding.alpha.is_finite() && decoding.alpha >= 0.0) {
                return Err(CliError::Usage(format!(
                    "--beam must be at least 1 and --alpha a number ≥ 0 (got {} and {})",
                    decoding.beam, decoding.alpha
                )));
            }
            let dtype = if cmd.f16 {
                WeightDtype::F16
            } else {
                WeightDtype::F32
            };
            let files = bundle.to_bytes(dtype)?;
            std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
            fsutil::write_atomic(&cmd.out.join(CONFIG_FILE), &files.config)?;
            fsutil::write_atomic(&cmd.out.join(TOKENIZER_FILE), &files.tokenizer)?;
            fsutil::write_atomic(&cmd.out.join(WEIGHTS_FILE), &files.weights)?;
            eprintln!(
                "wrote {} ({:.1} MB of weights)",
                cmd.out.display(),
                files.weights.len() as f64 / 1e6
            );
        }
        Command::Bench(cmd) => {
            let device = cmd.backend.device()?;
            let config = ModelConfig::preset(&cmd.preset)?;
            eprintln!(
                "device: {device:?}; preset {} ({} parameters)",
                cmd.preset,
                config.num_params()
            );
            let r = bench::run(&config, &device, cmd.batch_tokens, cmd.steps)?;
            println!(
                "matmul 1024×1024:   {:>10.1} GFLOP/s (result within {:.1e} of the CPU result)",
                r.matmul_gflops, r.matmul_error
            );
            if r.matmul_error > 1e-3 {
                eprintln!(
                    "warning: this backend's matmul result is wrong; its GFLOP/s mean nothing"
                );
            }
            println!(
                "training:           {:>10.0} tokens/s ({:.1} GFLOP/s, {:.0}% of matmul)",
                r.train_tokens_per_sec,
                r.train_gflops,
                100.0 * r.train_gflops / r.matmul_gflops
            );
            println!(
                "decoding (beam 4):  {:>10.2} sentences/s",
                r.decode_sentences_per_sec
            );
        }
        Command::Table3 => print!("{}", transduce::config::table3_report()),
    }
    Ok(())
}

/// `eval ppl`: perplexity per target wordpiece, on sentence pairs or on treebank trees.
fn eval_ppl(
    model: &ModelArgs,
    src: Option<PathBuf>,
    tgt: Option<PathBuf>,
    trees: Option<PathBuf>,
) -> Result<()> {
    let device = model.backend.device()?;
    let task = match trees {
        Some(_) => Task::Parse,
        None => Task::Translate {
            source: String::new(),
            target: String::new(),
        },
    };
    let bundle = source::load(&model.model, model.checkpoint.as_deref(), task, &device)?;
    let tree_vocabulary = bundle.tokenizer.token_to_id(PLACEHOLDER).is_some();
    let ids = match (src, tgt, trees) {
        (_, _, Some(trees)) => {
            if !tree_vocabulary {
                return Err(CliError::Usage(format!(
                    "--trees needs a parsing model; {} has no `{PLACEHOLDER}` \
                     slot token in its vocabulary",
                    model.model.display()
                )));
            }
            let mut summary = prepare::PrepareSummary::default();
            let pairs: Vec<_> = prepare::read_treebank(&trees, &mut summary)?
                .iter()
                .map(linearize)
                .collect();
            let ids = prepare::encode_trees(&bundle.tokenizer, &pairs, usize::MAX, &mut summary)?;
            let skipped = summary.skipped_trees.len() + summary.empty_trees + summary.dropped_empty;
            if skipped + summary.dropped_unknown_label > 0 {
                eprintln!(
                    "{}: scored {} trees; skipped {skipped} malformed or empty, \
                     {} with labels outside the model's vocabulary",
                    trees.display(),
                    ids.len(),
                    summary.dropped_unknown_label
                );
            }
            ids
        }
        (Some(src), Some(tgt), None) => {
            // A run folder has no task of its own: its vocabulary tells.
            let parser = matches!(bundle.config.task, Task::Parse)
                || (tree_vocabulary && bundle.tokenizer.token_to_id(&open_token("S")).is_some());
            if parser {
                return Err(CliError::Usage(format!(
                    "{} is a parsing model: score it on trees with --trees",
                    model.model.display()
                )));
            }
            let pairs = data::corpus::read_parallel(&src, &tgt)?;
            let mut ids = data::cache::Pairs::default();
            for (s, t) in &pairs {
                let (s, t) = (bundle.tokenizer.encode(s)?, bundle.tokenizer.encode(t)?);
                if !s.is_empty() && !t.is_empty() {
                    ids.push(s, t);
                }
            }
            ids
        }
        _ => {
            return Err(CliError::Usage(
                "give --trees (a parser), or --src and --tgt (a translator)".into(),
            ));
        }
    };
    if ids.is_empty() {
        return Err(CliError::Usage("nothing to score: no usable pairs".into()));
    }
    let focus = train::focus_rule(&bundle.config.model, &bundle.tokenizer)?;
    let nll = train::evaluate_nll(&bundle.model, &ids, focus.as_ref(), 4096)?;
    println!(
        "perplexity {:.6} (loss {nll:.6} nats per target wordpiece, {} pairs)",
        nll.exp(),
        ids.len()
    );
    Ok(())
}
