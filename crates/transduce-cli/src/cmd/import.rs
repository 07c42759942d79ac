//! `transduce import`: a Hugging Face Marian (OPUS-MT) folder, or a model on the hub by
//! name (`hf:ORG/NAME[@REVISION]`, [`crate::hub`]), becomes a bundle ([`transduce_import`]).

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use transduce::WeightDtype;
use transduce::bundle::{CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE};

use transduce_import::hub::{self, Reference};
use transduce_import::{ErrorCode, ModelFiles, OPTIONAL, Options, PYTORCH, REQUIRED, SAFETENSORS};

use transduce_train::error::{Error, Result, io};
use transduce_train::fsutil;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WeightsArg {
    /// The original's values (f16 or bf16 checkpoints are widened exactly).
    F32,
    /// Half precision: half the size.
    F16,
    /// Matrices and embeddings in int8 with a scale per row (about a quarter of f32): what
    /// the CPU decoder multiplies in, and the page's choice.
    Int8,
}

#[derive(Args)]
pub struct ImportCmd {
    /// The model: a folder holding config.json, model.safetensors or pytorch_model.bin,
    /// source.spm, vocab.json (generation_config.json and README.md when present), as the
    /// Hugging Face hub serves OPUS-MT models; or a name on the hub,
    /// `hf:ORG/NAME[@REVISION]` (e.g. hf:Helsinki-NLP/opus-mt-en-fr), read from or
    /// downloaded into the Hugging Face cache that transformers shares (`$HF_HUB_CACHE`,
    /// else `$HF_HOME/hub`, else ~/.cache/huggingface/hub; `$TRANSDUCE_HUB_CACHE` overrides;
    /// `HF_HUB_OFFLINE=1` reads the cache without asking the hub).
    pub dir: PathBuf,
    /// The hub `hf:` names are fetched from (`$HF_ENDPOINT`, else https://huggingface.co).
    #[arg(long)]
    pub hub: Option<String>,
    /// Output bundle folder.
    #[arg(long)]
    pub out: PathBuf,
    /// How the bundle stores its weights.
    #[arg(long, value_enum, default_value = "f32")]
    pub weights: WeightsArg,
    /// The weights' licence, when the folder's README.md does not name it (e.g. cc-by-4.0).
    #[arg(long)]
    pub licence: Option<String>,
    /// The source model's name for the model card (default: the config's hub id, else the
    /// folder's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Source language code (default: read from an `opus-mt-SRC-TGT` name).
    #[arg(long, requires = "target")]
    pub source: Option<String>,
    /// Target language code.
    #[arg(long, requires = "source")]
    pub target: Option<String>,
}

pub fn run(cmd: ImportCmd) -> Result<()> {
    let start = Instant::now();
    let weights = match cmd.weights {
        WeightsArg::F32 => WeightDtype::F32,
        WeightsArg::F16 => WeightDtype::F16,
        WeightsArg::Int8 => WeightDtype::Int8,
    };
    let given = cmd.dir.to_string_lossy().into_owned();
    let (files, origin, command, name) = match Reference::parse(&given) {
        Some(reference) => {
            let reference = reference.map_err(Error::Usage)?;
            let hub = cmd
                .hub
                .clone()
                .or_else(|| std::env::var("HF_ENDPOINT").ok().filter(|h| !h.is_empty()))
                .unwrap_or_else(|| hub::DEFAULT_HUB.to_string());
            let fetched = crate::hub::fetch(&reference, &hub, &crate::hub::cache_root())?;
            let pinned = reference.at(&fetched.commit);
            let command = hub::command(&pinned, &hub, weights);
            let origin = Origin::Hub(pinned);
            (fetched.files, origin, command, Some(reference.repo()))
        }
        None => {
            if cmd.hub.is_some() {
                return Err(Error::Usage(
                    "--hub goes with a model name (hf:ORG/NAME), not a folder".into(),
                ));
            }
            let command = std::iter::once("transduce".to_string())
                .chain(std::env::args().skip(1))
                .collect::<Vec<_>>()
                .join(" ");
            (
                read_folder(&cmd.dir)?,
                Origin::Folder(cmd.dir.clone()),
                command,
                None,
            )
        }
    };
    let folder = match &origin {
        Origin::Folder(dir) => dir
            .canonicalize()
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .or_else(|| Some(dir.display().to_string())),
        Origin::Hub(_) => None,
    };
    let imported = transduce_import::import(
        files,
        &Options {
            weights,
            licence: cmd.licence,
            name: cmd.name.or(name),
            folder,
            source: cmd.source,
            target: cmd.target,
            command,
        },
    )
    .map_err(|e| origin.error(e))?;
    std::fs::create_dir_all(&cmd.out).map_err(io(&cmd.out))?;
    let files = &imported.files;
    fsutil::write_atomic(&cmd.out.join(TOKENIZER_FILE), &files.tokenizer)?;
    fsutil::write_atomic(&cmd.out.join(WEIGHTS_FILE), &files.weights)?;
    fsutil::write_atomic(&cmd.out.join("README.md"), imported.card.as_bytes())?;
    // config.json last: a folder without it is not a bundle, so an interrupted import never
    // leaves one that loads with the wrong weights.
    fsutil::write_atomic(&cmd.out.join(CONFIG_FILE), &files.config)?;
    eprintln!(
        "imported {} into {} ({:.1} MB of weights) in {:.1} s",
        imported.name,
        cmd.out.display(),
        files.weights.len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Where the model's files came from, to name them in errors.
enum Origin {
    Folder(PathBuf),
    Hub(Reference),
}

impl Origin {
    fn error(&self, e: transduce_import::Error) -> Error {
        match (e.code, self) {
            (ErrorCode::NoLicence, Origin::Folder(dir)) => Error::Usage(format!(
                "{}: no `license:` in its YAML header; name the weights' licence with \
                 --licence (e.g. --licence cc-by-4.0)",
                dir.join("README.md").display()
            )),
            (ErrorCode::NoLicence, Origin::Hub(r)) => Error::Usage(format!(
                "{r}: README.md has no `license:` in its YAML header; name the weights' \
                 licence with --licence (e.g. --licence cc-by-4.0)"
            )),
            (ErrorCode::NoLanguages, _) => Error::Usage(format!(
                "{}: pass --source and --target",
                e.message
                    .trim_end_matches(": name the source and target languages")
            )),
            (_, Origin::Folder(dir)) => Error::Format {
                path: e.file.as_ref().map_or(dir.clone(), |f| dir.join(f)),
                message: e.message,
            },
            (_, Origin::Hub(r)) => Error::Usage(format!("{r}: {e}")),
        }
    }
}

/// The files of a model folder the import reads.
fn read_folder(dir: &std::path::Path) -> Result<ModelFiles> {
    if !dir.is_dir() {
        return Err(Error::Format {
            path: dir.to_path_buf(),
            message: "not a folder (expected a Hugging Face Marian model folder, or a name \
                      hf:ORG/NAME)"
                .into(),
        });
    }
    let mut files = ModelFiles::new();
    for name in REQUIRED.iter().chain(&OPTIONAL) {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => files.insert(*name, bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && OPTIONAL.contains(name) => {}
            Err(e) => return Err(Error::Io { path, source: e }),
        }
    }
    let weights = [SAFETENSORS, PYTORCH]
        .into_iter()
        .find(|f| dir.join(f).exists())
        .ok_or_else(|| Error::Format {
            path: dir.to_path_buf(),
            message: "neither model.safetensors nor pytorch_model.bin is here".into(),
        })?;
    let path = dir.join(weights);
    files.insert(weights, std::fs::read(&path).map_err(io(&path))?);
    Ok(files)
}
