//! `transduce translate`: translate lines with a bundle, a run or an ensemble (§6.1).

use std::path::{Path, PathBuf};

use clap::Args;
use transduce::decode::DecodeOptions;
use transduce::task::channel::Channel;
use transduce::{Bundle, Task};

use super::{EnsembleArgs, read_input, write_output};
use crate::line_decoder::{
    Batching, Candidate, Decoder, default_threads, nbest_lines, translate_lines,
};
use crate::options;
use transduce_train::backend::Backend;
use transduce_train::error::{Error, Result};
use transduce_train::model_folder;

#[derive(Args)]
pub struct TranslateCmd {
    #[command(flatten)]
    pub model: EnsembleArgs,
    /// Input file (default: standard input).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Output file (default: standard output).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Beam size, 1 = greedy (default: the bundle's; §6.1's 4 for a run folder).
    #[arg(long, value_parser = options::beam)]
    pub beam: Option<usize>,
    /// Length penalty α (default: the bundle's; §6.1's 0.6 for a run folder).
    #[arg(long, value_parser = options::non_negative)]
    pub alpha: Option<f64>,
    /// Output may be this many tokens longer than the input (default: the bundle's; 50).
    #[arg(long)]
    pub max_extra: Option<usize>,
    /// Write the N best translations of each line instead of the best one, best first, one
    /// a line as Moses and Marian write n-best lists: `LINE ||| TRANSLATION ||| LOG-PROB |||
    /// SCORE`, LINE counted from 0, LOG-PROB the natural-log probability of its wordpieces
    /// (EOS included), SCORE what the beam ranks by (LOG-PROB over the §6.1 length penalty).
    /// At most the beam size; for rescoring with `transduce score`. Two entries may read
    /// alike: the search can reach one text through two splits into wordpieces.
    #[arg(long, value_name = "N", value_parser = options::count)]
    pub nbest: Option<usize>,
    /// Rerank the beam's finished translations with this reverse translator (a bundle or
    /// run folder, e.g. de-en for an en-de model): noisy-channel reranking, each ranked by
    /// its beam score + weight · log p(source | translation) / lp(|source|). Costs one
    /// teacher-forced pass of the reverse model per candidate (`--compute` applies to it too).
    #[arg(long, value_name = "MODEL")]
    pub channel: Option<PathBuf>,
    /// The channel term's weight (default: the bundle's `channel.weight`, chosen on val).
    #[arg(long, value_name = "WEIGHT", requires = "channel", value_parser = options::non_negative)]
    pub channel_weight: Option<f64>,
    /// Sentences decoded together.
    #[arg(long, default_value_t = 32, value_parser = options::count)]
    pub batch_size: usize,
    /// Threads decoding on the CPU, each taking the next batch (default: `RAYON_NUM_THREADS`
    /// where set, else every core). The outputs are the same for any number.
    #[arg(long, value_parser = options::count)]
    pub threads: Option<usize>,
    /// The target language of a model of many targets (OPUS-MT's multilingual models, the
    /// tc-bible family): its token `>>LANG<<` goes before every line, as such a model
    /// expects (e.g. `--to nld`, in the codes the model's vocabulary uses).
    #[arg(long, value_name = "LANG")]
    pub to: Option<String>,
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(cmd: TranslateCmd) -> Result<()> {
    // One model on wgpu decodes on the GPU decoder: the bundle is read on the CPU and its
    // weights uploaded. An ensemble on wgpu goes through burn's wgpu backend.
    let gpu_decoder = cmd.model.backend == Backend::Wgpu && cmd.model.models.len() == 1;
    let device = if gpu_decoder {
        Backend::Cpu.device()?
    } else {
        cmd.model.backend.device()?
    };
    let task = Task::Translate {
        source: String::new(),
        target: String::new(),
    };
    let mut bundles = model_folder::load_ensemble(
        &cmd.model.models,
        &cmd.model.checkpoints,
        task,
        &device,
        true,
    )?;
    cmd.model.apply_compute(&mut bundles);
    // Translation decodes on the host decoder (or the GPU decoder, which uploads the host's
    // copy): the weights file kept for a burn model is not needed (75 MB of resident memory
    // at opus-mt-en-de's size).
    for bundle in &mut bundles {
        bundle.release_weights();
    }
    let mut lines = read_input(cmd.input.as_deref())?;
    if let Some(language) = &cmd.to {
        let token = target_token(&bundles[0], language)?;
        for line in lines.iter_mut().filter(|l| !l.trim().is_empty()) {
            *line = format!("{token} {line}");
        }
    }
    let defaults = &bundles[0].config.decoding;
    let options = DecodeOptions {
        beam: cmd.beam.unwrap_or(defaults.beam),
        alpha: cmd.alpha.unwrap_or(defaults.alpha),
        max_extra: cmd.max_extra.unwrap_or(defaults.max_extra),
        length_norm: defaults.length_norm,
    };
    let gpu_model = if gpu_decoder {
        Some(crate::gpu::open(&bundles[0])?)
    } else {
        None
    };
    let decoder = match &gpu_model {
        Some(model) => Decoder::Gpu(model),
        None => Decoder::of_bundles(&bundles)?,
    };
    if let Some(n) = cmd.nbest
        && n > options.beam
    {
        return Err(Error::Usage(format!(
            "--nbest {n} asks for more translations than beam search keeps \
             (beam {}): give --beam {n} or more",
            options.beam
        )));
    }
    let reverse = match &cmd.channel {
        Some(path) => {
            let mut bundle = load_channel(path, &device)?;
            cmd.model.apply_compute(std::slice::from_mut(&mut bundle));
            bundle.release_weights();
            let weight = match (cmd.channel_weight, &bundles[0].config.channel) {
                (Some(w), _) => w,
                (None, Some(c)) => c.weight,
                (None, None) => {
                    return Err(Error::Usage(
                        "--channel: the model records no channel weight chosen on val; \
                         give --channel-weight"
                            .into(),
                    ));
                }
            };
            Some((path, bundle, weight))
        }
        None => None,
    };
    // The direction is checked before any work.
    let channel = match &reverse {
        Some((path, bundle, weight)) => Some(
            Channel::new(&bundles[0], bundle, *weight)
                .map_err(|e| Error::Usage(format!("--channel {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let batching = Batching {
        batch_size: cmd.batch_size,
        threads: cmd.threads.unwrap_or_else(default_threads),
        progress: !cmd.quiet,
    };
    let out = match (cmd.nbest, &channel) {
        (None, None) => translate_lines(&bundles, &decoder, &lines, &options, batching)?,
        (n, _) => {
            // With a channel every finished hypothesis is a candidate.
            let keep = if channel.is_some() {
                options.beam
            } else {
                n.unwrap_or(1)
            };
            let mut lists = nbest_lines(&bundles, &decoder, &lines, &options, batching, keep)?;
            if let Some(channel) = &channel {
                if !cmd.quiet {
                    // The scoring pass has no progress bar; it takes about as long as the search.
                    let n: usize = lists.iter().map(Vec::len).sum();
                    eprintln!("scoring {n} translations with the reverse model (--channel)");
                }
                crate::channel_rerank::rerank(channel, &lines, &mut lists, options.alpha)?;
            }
            match n {
                Some(n) => {
                    for list in &mut lists {
                        list.truncate(n);
                    }
                    nbest_format(&lists)
                }
                None => lists
                    .into_iter()
                    .map(|list| list.into_iter().next().unwrap_or_default().text)
                    .collect(),
            }
        }
    };
    write_output(&out, cmd.output.as_deref())?;
    Ok(())
}

/// `>>LANG<<`, where the model's vocabulary holds it; else an error naming the tokens it has.
fn target_token(bundle: &Bundle, language: &str) -> Result<String> {
    let token = format!(">>{}<<", language.trim());
    let tokens = bundle.tokenizer.language_tokens();
    if tokens.contains(&token) {
        return Ok(token);
    }
    let has = if tokens.is_empty() {
        "it has none: it translates into one language, so leave --to out".to_string()
    } else {
        format!("it has {}", tokens.join(" "))
    };
    Err(Error::Usage(format!(
        "--to {language}: the model has no target-language token {token}; {has}"
    )))
}

/// The reverse translator `--channel` names (a translator; its direction is checked
/// where the [`Channel`] is made).
fn load_channel(path: &Path, device: &transduce::burn::prelude::Device) -> Result<Bundle> {
    let task = Task::Translate {
        source: String::new(),
        target: String::new(),
    };
    let bundle = model_folder::load(path, None, task, device)?;
    super::eval::refuse_parser(&bundle, path)?;
    Ok(bundle)
}

/// The n-best lines `--nbest` writes, in input order.
fn nbest_format(lists: &[Vec<Candidate>]) -> Vec<String> {
    lists
        .iter()
        .enumerate()
        .flat_map(|(i, list)| {
            list.iter().map(move |c| {
                format!(
                    "{i} ||| {} ||| {:.6} ||| {:.6}",
                    c.text, c.log_prob, c.score
                )
            })
        })
        .collect()
}
