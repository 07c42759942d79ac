//! `transduce adapt`: a translator bundle fine-tuned on a file of the user's own sentence
//! pairs ([`transduce::train::adapt`], the recipe the page's Adapt panel runs), written as a
//! new bundle a site can ship.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use transduce::bundle::{BundleFiles, CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE, WeightDtype};
use transduce::train::adapt::{AdaptOptions, Adapter, Pair, parse_pairs};

use transduce_train::error::{Error, Result, io};
use transduce_train::fsutil;

/// A bundle's general pairs for adaptation's replay, when it ships them.
pub const REPLAY_FILE: &str = "replay.tsv";

#[derive(Args)]
pub struct AdaptCmd {
    /// The translator bundle folder to start from.
    #[arg(long)]
    pub model: PathBuf,
    /// The pairs to learn: one `source<TAB>translation` a line, UTF-8.
    #[arg(long)]
    pub pairs: PathBuf,
    /// Output bundle folder.
    #[arg(long)]
    pub out: PathBuf,
    /// General pairs mixed into every step so the model keeps what it knew (same format).
    /// Default: the bundle's replay.tsv, where it has one.
    #[arg(long, conflicts_with = "no_replay")]
    pub replay: Option<PathBuf>,
    /// Train on the user's pairs alone.
    #[arg(long)]
    pub no_replay: bool,
    /// Optimizer steps (default: the recipe's).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Adam's learning rate, constant (default: the recipe's).
    #[arg(long)]
    pub lr: Option<f64>,
    /// The user's pairs per step (default: the recipe's).
    #[arg(long)]
    pub pairs_per_step: Option<usize>,
    /// General pairs per step (default: the recipe's).
    #[arg(long)]
    pub replay_per_step: Option<usize>,
    /// Fixes the batches and dropout masks (default: the recipe's).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How to store the weights (default: as the bundle stored them).
    #[arg(long, value_enum)]
    pub weights: Option<Storage>,
}

/// `--weights`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Storage {
    F32,
    F16,
    Int8,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(io(path))
}

fn pairs_of(path: &Path) -> Result<Vec<Pair>> {
    Ok(parse_pairs(&read(path)?, &path.display().to_string())?)
}

pub fn run(cmd: AdaptCmd) -> Result<()> {
    if !cmd.model.join(CONFIG_FILE).exists() {
        return Err(Error::Usage(format!(
            "{}: not a bundle folder (no {CONFIG_FILE})",
            cmd.model.display()
        )));
    }
    let files = BundleFiles {
        config: read(&cmd.model.join(CONFIG_FILE))?,
        tokenizer: read(&cmd.model.join(TOKENIZER_FILE))?,
        weights: read(&cmd.model.join(WEIGHTS_FILE))?,
    };
    let pairs = pairs_of(&cmd.pairs)?;
    let replay_path = match (&cmd.replay, cmd.no_replay) {
        (Some(path), _) => Some(path.clone()),
        (None, true) => None,
        (None, false) => Some(cmd.model.join(REPLAY_FILE)).filter(|p| p.exists()),
    };
    let replay = match &replay_path {
        Some(path) => pairs_of(path)?,
        None => Vec::new(),
    };
    let defaults = AdaptOptions::default();
    let options = AdaptOptions {
        steps: cmd.steps.unwrap_or(defaults.steps),
        learning_rate: cmd.lr.unwrap_or(defaults.learning_rate),
        pairs_per_step: cmd.pairs_per_step.unwrap_or(defaults.pairs_per_step),
        replay_per_step: cmd.replay_per_step.unwrap_or(defaults.replay_per_step),
        seed: cmd.seed.unwrap_or(defaults.seed),
    };
    // Option errors name the flag, before training.
    options.validate().map_err(|e| match e {
        transduce::Error::InvalidConfig { field, message } => {
            let flag = match field.as_str() {
                "learningRate" => "lr",
                "pairsPerStep" => "pairs-per-step",
                "replayPerStep" => "replay-per-step",
                other => other,
            };
            Error::Usage(format!("--{flag}: {message}"))
        }
        e => Error::Model(e),
    })?;
    let names = (
        cmd.pairs.display().to_string(),
        replay_path
            .as_ref()
            .map_or(String::new(), |p| p.display().to_string()),
    );
    let mut adapter = Adapter::new(&files, &pairs, &replay, (&names.0, &names.1), options)
        .map_err(|e| match e {
            transduce::Error::Pairs { .. } => Error::Model(e),
            e => Error::Format {
                path: cmd.model.clone(),
                message: e.to_string(),
            },
        })?;
    eprintln!(
        "adapting {} on {} pairs{}: {} steps",
        cmd.model.display(),
        pairs.len(),
        match &replay_path {
            Some(path) => format!(
                " with {} general pairs from {}",
                replay.len(),
                path.display()
            ),
            None => " (no replay)".into(),
        },
        adapter.steps()
    );
    let start = Instant::now();
    while adapter.done() < adapter.steps() {
        let step = adapter.step()?;
        eprintln!(
            "step {}/{}  loss {:.4}  {:.1} s",
            step.step,
            step.steps,
            step.loss,
            start.elapsed().as_secs_f64()
        );
    }
    let dtype = match cmd.weights {
        Some(Storage::F32) => WeightDtype::F32,
        Some(Storage::F16) => WeightDtype::F16,
        Some(Storage::Int8) => WeightDtype::Int8,
        None => adapter.stored(),
    };
    let out = adapter.finish(dtype)?;
    std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
    // Weights and tokenizer first, config.json last: a folder with a config is whole.
    fsutil::write_atomic(&cmd.out.join(WEIGHTS_FILE), &out.weights)?;
    fsutil::write_atomic(&cmd.out.join(TOKENIZER_FILE), &out.tokenizer)?;
    if let Some(path) = replay_path.filter(|p| p.parent() == Some(cmd.model.as_path())) {
        // The replay travels with the bundle, so it can be adapted again.
        fsutil::write_atomic(&cmd.out.join(REPLAY_FILE), &read(&path)?)?;
    }
    fsutil::write_atomic(&cmd.out.join(CONFIG_FILE), &out.config)?;
    eprintln!(
        "wrote {} ({:.1} s)",
        cmd.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
