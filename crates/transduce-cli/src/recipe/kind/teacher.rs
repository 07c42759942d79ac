//! `kind = "teacher"`: a bundle or ensemble translating a corpus for distillation (Kim &
//! Rush 2016), optionally reranked by a reverse model (`channel`) or rescored by a second
//! model (`rescore`), or back-translating monolingual text (`back`).

use std::any::Any;
use std::path::PathBuf;

use transduce_train::data;
use transduce_train::error::{Error, Result, io};

use super::super::cost::{count_lines, decode_seconds, model_params, preset_params};
use super::super::outputs::{translate, write_lines};
use super::super::plan::{Model, Output, Plan};
use super::super::rescore;
use super::super::scoring::{bundle_alpha, model_args};
use super::super::sets::{SMOKE_EVAL_LINES, read_corpus};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// A second model that rescores a teacher's candidates (scripts' `DISTILL_RESCORE`): both
/// translate, every candidate is scored under both, the weighted best is kept.
#[derive(Clone, Debug)]
pub struct Rescore {
    pub model: Model,
    /// The weight of the teacher's own score; the rescoring model's is 1 − weight.
    pub weight: f64,
}

/// A teacher stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Teacher {
    pub models: Vec<Model>,
    pub channel: Option<(Model, Option<f64>)>,
    pub rescore: Option<Rescore>,
    /// Back-translation (Sennrich et al. 2016): `src` is the target language's monolingual
    /// text and the model translates it back; the pairs are (its translation, the
    /// original).
    pub back: bool,
    pub src: Vec<PathBuf>,
    pub tgt: Vec<PathBuf>,
    pub beam: Option<usize>,
    pub alpha: Option<f64>,
}

/// A folder of sentence pairs (`src.txt`, `tgt.txt`).
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Corpus(plan.nodes[node].dir.clone()))
}

impl Teacher {
    pub fn read(f: &Fields) -> Result<Teacher> {
        let models = f
            .inputs("models")?
            .iter()
            .map(|i| f.input_model("models", i))
            .collect::<Result<Vec<_>>>()?;
        let channel = match f.get("channel") {
            None => None,
            Some(_) => {
                if models.len() != 1 {
                    return Err(f.err("channel", "a channel reranks one model".into()));
                }
                Some((f.model("channel")?, f.number("channel_weight")?))
            }
        };
        if channel.is_none() && f.has("channel_weight") {
            return Err(f.err("channel_weight", "there is no `channel`".into()));
        }
        let rescore = match f.get("rescore") {
            None => None,
            Some(_) => {
                if models.len() != 1 {
                    return Err(f.err("rescore", "a rescoring model checks one model".into()));
                }
                if channel.is_some() {
                    return Err(f.err("rescore", "give `channel` or `rescore`, not both".into()));
                }
                let weight = f.number("rescore_weight")?.unwrap_or(0.6);
                if weight > 1.0 {
                    return Err(f.err(
                        "rescore_weight",
                        format!("{weight} is the teacher's share: at most 1"),
                    ));
                }
                Some(Rescore {
                    model: f.model("rescore")?,
                    weight,
                })
            }
        };
        if rescore.is_none() && f.has("rescore_weight") {
            return Err(f.err("rescore_weight", "there is no `rescore`".into()));
        }
        let back = f.flag("back")?;
        if back && f.has("tgt") {
            return Err(f.err(
                "tgt",
                "a back-translation's targets are its `src` (the monolingual text)".into(),
            ));
        }
        Ok(Teacher {
            models,
            channel,
            rescore,
            back,
            src: f.files("src")?,
            tgt: f.optional_files("tgt")?,
            beam: f.count("beam")?,
            alpha: f.number("alpha")?,
        })
    }
}

impl Spec for Teacher {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let (dir, backend) = (&at.dir, at.options.backend_arg());
        let limit = at.smoke().then_some(SMOKE_EVAL_LINES);
        let sources = read_corpus(&self.src, limit)?;
        let references = if self.tgt.is_empty() {
            None
        } else {
            let r = read_corpus(&self.tgt, limit)?;
            if r.len() != sources.len() {
                return Err(Error::Usage(format!(
                    "the teacher's tgt has {} lines but its src {}",
                    r.len(),
                    sources.len()
                )));
            }
            Some(r)
        };
        // Each distinct source is translated once.
        let mut unique: Vec<&str> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for s in &sources {
            if seen.insert(s.as_str()) {
                unique.push(s);
            }
        }
        let unique_file = dir.join("sources.txt");
        write_lines(&unique_file, unique.iter().copied())?;
        let teacher_file = dir.join("teacher.txt");
        let mut args = model_args(&self.models)?;
        if let Some((reverse, weight)) = &self.channel {
            if reverse.checkpoint.is_some() {
                return Err(Error::Usage(
                    "a channel model of averaged weights: export it first (an export stage)".into(),
                ));
            }
            args.extend(["--channel".into(), reverse.path.display().to_string()]);
            if let Some(w) = weight {
                args.extend(["--channel-weight".into(), w.to_string()]);
            }
        }
        match &self.rescore {
            None => {
                if let Some(b) = self.beam {
                    args.extend(["--beam".into(), b.to_string()]);
                }
                if let Some(a) = self.alpha {
                    args.extend(["--alpha".into(), a.to_string()]);
                }
                args.extend(["--backend".into(), backend]);
                translate(args, &unique_file, &teacher_file)?;
            }
            Some(second) => {
                // Each model decodes with its own α, at beam 4 unless `beam` says
                // otherwise; `alpha` (else the teacher bundle's) is the reranking's
                // length penalty.
                let alpha = match self.alpha {
                    Some(a) => a,
                    None => bundle_alpha(&self.models[0].path)?,
                };
                let decoding = [
                    "--beam".to_string(),
                    self.beam.unwrap_or(4).to_string(),
                    "--backend".into(),
                    backend,
                ];
                let mut other = model_args(std::slice::from_ref(&second.model))?;
                args.extend(decoding.iter().cloned());
                other.extend(decoding);
                let scorers = [
                    rescore::Scorer {
                        args,
                        weight: second.weight,
                    },
                    rescore::Scorer {
                        args: other,
                        weight: 1.0 - second.weight,
                    },
                ];
                let work = dir.join("rescore");
                std::fs::create_dir_all(&work).map_err(io(&work))?;
                rescore::translate(&scorers, alpha, &unique_file, &teacher_file, &work)?;
            }
        }
        let translations = data::corpus::read_lines(&teacher_file)?;
        let by_source: std::collections::HashMap<&str, &str> = unique
            .iter()
            .copied()
            .zip(translations.iter().map(String::as_str))
            .collect();
        // References kept where given; each source again with the teacher's translation,
        // unless their word counts differ more than twofold (a loop, a dropped clause).
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(refs) = &references {
            pairs.extend(
                sources
                    .iter()
                    .map(String::as_str)
                    .zip(refs.iter().map(String::as_str)),
            );
        }
        let mut kept = 0;
        for s in &sources {
            let t = by_source.get(s.as_str()).copied().unwrap_or_default();
            let (a, b) = (s.split_whitespace().count(), t.split_whitespace().count());
            if a > 0 && b > 0 && a <= 2 * b && b <= 2 * a {
                // A back-translation's source is the model's, its target the text's.
                pairs.push(if self.back { (t, s) } else { (s, t) });
                kept += 1;
            }
        }
        eprintln!(
            "teacher: {} sources translated, {kept} of {} pairs kept by the length filter",
            unique.len(),
            sources.len()
        );
        write_lines(&dir.join("src.txt"), pairs.iter().map(|p| p.0))?;
        write_lines(&dir.join("tgt.txt"), pairs.iter().map(|p| p.1))
    }

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        let lines = if at.smoke() {
            SMOKE_EVAL_LINES
        } else {
            count_lines(&self.src)
        };
        // A rescoring model decodes every source too (its scoring pass is cheaper).
        let params: f64 = self
            .models
            .iter()
            .chain(self.rescore.as_ref().map(|r| &r.model))
            .filter_map(model_params)
            .sum();
        let params = if params > 0.0 {
            params
        } else {
            preset_params("small")?
        };
        Some((
            lines as f64 * decode_seconds(params, self.beam.unwrap_or(4)),
            "from the model's size",
        ))
    }

    fn data_files(&self) -> Vec<PathBuf> {
        self.src.iter().chain(&self.tgt).cloned().collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
