//! Finding a model to run: a bundle folder (`config.json`), or a run folder (`run.json`)
//! with its newest checkpoint, a chosen checkpoint, or averaged weights.

use std::path::{Path, PathBuf};

use transduce::bundle::{
    BUNDLE_FORMAT, BundleConfig, BundleFiles, CONFIG_FILE, Provenance, TOKENIZER_FILE,
    WEIGHTS_FILE, load_weights,
};
use transduce::burn::prelude::*;
use transduce::decode::DecodeOptions;
use transduce::{Bundle, Task, Tokenizer};

use crate::error::{Error, Result, io};
use crate::train::{RUN_FILE, RunConfig, checkpoint};

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(io(path))
}

/// The tokenizer in `path`: a `tokenizer.json`, or a folder holding one (a bundle, a run
/// folder or a prepared data folder).
pub fn tokenizer(path: &Path) -> Result<Tokenizer> {
    let file = if path.is_dir() {
        path.join(TOKENIZER_FILE)
    } else {
        path.to_path_buf()
    };
    Tokenizer::from_bytes(&read(&file)?).map_err(|e| Error::Format {
        path: file,
        message: e.to_string(),
    })
}

/// The weights file a run folder and an optional `--checkpoint` point at.
pub fn weights_path(run_dir: &Path, checkpoint_arg: Option<&Path>) -> Result<PathBuf> {
    match checkpoint_arg {
        Some(p) if p.is_dir() => Ok(p.join(checkpoint::MODEL_FILE)),
        Some(p) => Ok(p.to_path_buf()),
        None => checkpoint::list(run_dir)?
            .pop()
            .map(|(_, dir)| dir.join(checkpoint::MODEL_FILE))
            .ok_or_else(|| Error::Usage(format!("{} has no checkpoints yet", run_dir.display()))),
    }
}

/// The weights a new run starts from (`train --init`), and the architecture their folder
/// records, where it records one.
pub struct InitWeights {
    pub weights: PathBuf,
    pub model: Option<transduce::ModelConfig>,
}

/// Finds the weights `train --init PATH` names: a bundle folder, a run folder (its newest
/// checkpoint), a checkpoint folder or a safetensors file (e.g. averaged weights). Where
/// the folder records a vocabulary, it must be `data`'s (the prepared folder at `data_dir`).
pub fn init_weights(path: &Path, data: &Tokenizer, data_dir: &Path) -> Result<InitWeights> {
    let (weights, model) = if path.join(CONFIG_FILE).exists() {
        let config_path = path.join(CONFIG_FILE);
        let config = BundleConfig::from_json(&read(&config_path)?).map_err(|e| Error::Format {
            path: config_path,
            message: e.to_string(),
        })?;
        (path.join(WEIGHTS_FILE), Some(config.model))
    } else if path.join(RUN_FILE).exists() {
        (
            weights_path(path, None)?,
            Some(RunConfig::read(path)?.model),
        )
    } else {
        let weights = if path.is_dir() {
            path.join(checkpoint::MODEL_FILE)
        } else {
            path.to_path_buf()
        };
        if !weights.is_file() {
            return Err(Error::Usage(format!(
                "--init {}: neither a bundle, a run, a checkpoint nor a weights file",
                path.display()
            )));
        }
        (weights, None)
    };
    // A bundle or run carries its tokenizer; bare weights cannot be checked here (a vocabulary
    // of another size still fails on the embedding's shape).
    if model.is_some() && tokenizer(path)?.to_json()? != data.to_json()? {
        return Err(Error::Usage(format!(
            "--init {} has another vocabulary than --data {}: prepare the data with \
             --tokenizer {}",
            path.display(),
            data_dir.display(),
            path.display(),
        )));
    }
    Ok(InitWeights { weights, model })
}

/// Loads a bundle folder, or builds a bundle in memory from a run folder.
pub fn load(
    path: &Path,
    checkpoint_arg: Option<&Path>,
    task: Task,
    device: &Device,
) -> Result<Bundle> {
    if path.join(CONFIG_FILE).exists() {
        let files = BundleFiles {
            config: read(&path.join(CONFIG_FILE))?,
            tokenizer: read(&path.join(TOKENIZER_FILE))?,
            weights: read(&path.join(WEIGHTS_FILE))?,
        };
        return Bundle::from_files(files, device).map_err(|e| Error::Format {
            path: path.to_path_buf(),
            message: e.to_string(),
        });
    }
    if !path.join(RUN_FILE).exists() {
        return Err(Error::Usage(format!(
            "{}: neither a bundle (no {CONFIG_FILE}) nor a training run (no {RUN_FILE})",
            path.display()
        )));
    }
    let run = RunConfig::read(path)?;
    let tokenizer = tokenizer(path)?;
    let weights = weights_path(path, checkpoint_arg)?;
    let model = load_weights(&run.model, &read(&weights)?, device).map_err(|e| Error::Format {
        path: weights.clone(),
        message: e.to_string(),
    })?;
    let decoding = match task {
        Task::Parse => DecodeOptions {
            beam: 21,
            alpha: 0.3,
            max_extra: 300,
            ..DecodeOptions::default()
        },
        Task::Translate { .. } => DecodeOptions::default(),
    };
    // How far the run got: its newest checkpoint's step and training time.
    let newest = match checkpoint::list(path)?.pop() {
        Some((_, dir)) => Some(checkpoint::read_state(&dir)?),
        None => None,
    };
    Ok(Bundle::new(
        BundleConfig {
            format: BUNDLE_FORMAT,
            task,
            model: run.model,
            decoding,
            provenance: Provenance {
                created_by: format!("transduce {}", env!("CARGO_PKG_VERSION")),
                data: vec![run.data.display().to_string()],
                steps: newest.as_ref().map_or(0, |s| s.step),
                training_seconds: newest.as_ref().map_or(0.0, |s| s.elapsed_secs.round()),
                notes: format!("weights: {}", weights.display()),
                ..Default::default()
            },
            weights: None,
            metrics: Default::default(),
            sha256: Default::default(),
            channel: None,
            adaptation: None,
        },
        tokenizer,
        model,
    )?)
}

/// Loads the models of an ensemble (`--model` given several times), each a bundle or a run
/// folder. `checkpoints` pairs with `paths` in order: none, or one per model. All are of
/// one kind of task; with `shared_vocab` (decoding as one ensemble) they must also share
/// one vocabulary, token for token, and the first one's tokenizer and decoding defaults
/// serve the ensemble.
pub fn load_ensemble(
    paths: &[PathBuf],
    checkpoints: &[PathBuf],
    task: Task,
    device: &Device,
    shared_vocab: bool,
) -> Result<Vec<Bundle>> {
    if paths.is_empty() {
        return Err(Error::Usage("--model is required".into()));
    }
    if !checkpoints.is_empty() && checkpoints.len() != paths.len() {
        return Err(Error::Usage(format!(
            "{} --checkpoint for {} --model: give none, or one for each model in order",
            checkpoints.len(),
            paths.len()
        )));
    }
    let mut bundles: Vec<Bundle> = Vec::with_capacity(paths.len());
    for (i, path) in paths.iter().enumerate() {
        let bundle = load(
            path,
            checkpoints.get(i).map(PathBuf::as_path),
            task.clone(),
            device,
        )?;
        if let Some(first) = bundles.first() {
            let n = first.config.model.vocab_size;
            if shared_vocab
                && (bundle.config.model.vocab_size != n
                    || bundle.tokenizer.id_strings(n) != first.tokenizer.id_strings(n))
            {
                let or_vote = if matches!(task, Task::Parse) {
                    ", or let them vote (`--combine vote`)"
                } else {
                    ""
                };
                return Err(Error::Usage(format!(
                    "{}: its vocabulary differs from {}'s; the models of an ensemble must \
                     share one tokenizer (prepare them from the same data folder){or_vote}",
                    path.display(),
                    paths[0].display()
                )));
            }
            // A run folder has no language codes of its own: compare the kind of task.
            if std::mem::discriminant(&bundle.config.task)
                != std::mem::discriminant(&first.config.task)
            {
                return Err(Error::Usage(format!(
                    "{}: task {:?}, but {} is {:?}",
                    path.display(),
                    bundle.config.task,
                    paths[0].display(),
                    first.config.task
                )));
            }
        }
        bundles.push(bundle);
    }
    Ok(bundles)
}
