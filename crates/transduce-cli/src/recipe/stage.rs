//! Running one stage: each kind goes through the subcommand that does its work by hand
//! (`prepare`, `train`, `average`, `translate`, `parse`, `export`), with the arguments
//! that subcommand's own parser reads, so a recipe and a command line train alike.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use transduce::bundle::{BundleConfig, CONFIG_FILE, RecipeOrigin, RecipeStage};

use crate::cmd::{export::ExportCmd, parse::ParseCmd, prepare::PrepareCmd, train::TrainCmd};
use crate::{cmd, table3};
use transduce_train::backend::Backend;
use transduce_train::error::{Error, Result, io};
use transduce_train::{checkpoint_mean, data, fsutil, train};

use super::format::Scale;
use super::outputs::{translate, write_lines};
use super::plan::{Model, Plan};
use super::spec::{Argv, ROW_CONFIG_FILE, SetData, Spec, TestSet};

/// Lines of each training corpus at `--scale smoke`.
pub const SMOKE_TRAIN_LINES: usize = 300;
/// Lines of each validation, test or teacher corpus at `--scale smoke`.
pub const SMOKE_EVAL_LINES: usize = 8;
/// Trees of each test treebank at `--scale smoke` (a parser's beam is 21 wide).
const SMOKE_TREES: usize = 2;

/// What the runner passes through to the stages.
pub struct Options {
    pub backend: Backend,
    pub devices: Vec<usize>,
    /// The command as the user gave it, for the provenance.
    pub command: String,
}

/// Runs stage `node` into its folder; `resume` continues a training run.
pub fn run(plan: &Plan, node: usize, spec: &Spec, resume: bool, options: &Options) -> Result<()> {
    let dir = plan.nodes[node].dir.clone();
    let scale = plan.context.scale;
    let smoke = scale == Scale::Smoke;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let backend = options
        .backend
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_else(|| "cpu".into());
    match spec {
        Spec::Prepare(p) => {
            let inputs = dir.join("inputs");
            let train_limit = smoke.then_some(SMOKE_TRAIN_LINES);
            let valid_limit = smoke.then_some(SMOKE_EVAL_LINES * 4);
            // TSV files are split into two sides first, and joined after src / tgt.
            let (mut src, mut tgt) = (p.src.clone(), p.tgt.clone());
            let (mut valid_src, mut valid_tgt) = (p.valid_src.clone(), p.valid_tgt.clone());
            for (files, name, limit, s, t) in [
                (&p.tsv, "train", train_limit, &mut src, &mut tgt),
                (
                    &p.valid_tsv,
                    "valid",
                    valid_limit,
                    &mut valid_src,
                    &mut valid_tgt,
                ),
            ] {
                if !files.is_empty() {
                    let (a, b) = split_tsv(files, limit, &inputs.join(format!("{name}-tsv")))?;
                    s.push(a);
                    t.push(b);
                }
            }
            let mut args: Vec<String> = vec!["--out".into(), dir.display().to_string()];
            let mut add = |flag: &str, files: &[PathBuf], name: &str, limit| -> Result<()> {
                if !files.is_empty() {
                    let file = corpus(files, limit, &inputs.join(name))?;
                    args.extend([flag.to_string(), file.display().to_string()]);
                }
                Ok(())
            };
            if p.parse {
                add("--trees", &src, "train.trees", train_limit)?;
                add("--valid-trees", &valid_src, "valid.trees", valid_limit)?;
            } else {
                add("--src", &src, "train.src", train_limit)?;
                add("--tgt", &tgt, "train.tgt", train_limit)?;
                add("--valid-src", &valid_src, "valid.src", valid_limit)?;
                add("--valid-tgt", &valid_tgt, "valid.tgt", valid_limit)?;
            }
            args.extend([
                "--task".into(),
                if p.parse { "parse" } else { "translate" }.into(),
            ]);
            if let Some(t) = &p.tokenizer {
                args.extend(["--tokenizer".into(), t.display().to_string()]);
            } else {
                let v = p.vocab_size.unwrap_or(37_000);
                let v = if smoke { v.min(400) } else { v };
                args.extend(["--vocab-size".into(), v.to_string()]);
            }
            if let Some(m) = p.max_len {
                args.extend(["--max-len".into(), m.to_string()]);
            }
            cmd::prepare::run(Argv::<PrepareCmd>::read(&args)?)
        }
        Spec::Train {
            row,
            gpu_precision,
            continues,
            ..
        } => {
            // A continued run starts as the run it continues, stopped: its folder, resumed.
            let resume = match continues {
                Some(source) if !resume => {
                    copy_run(source, &dir)?;
                    true
                }
                _ => resume,
            };
            if let Some(row) = row
                && !resume
            {
                let json = serde_json::to_string_pretty(&row.model).expect("a config serializes");
                fsutil::write_atomic(&dir.join(ROW_CONFIG_FILE), json.as_bytes())?;
            }
            let mut args = spec.train_args(&dir, scale, resume);
            if let Some(p) = gpu_precision
                && options.backend != Backend::Cpu
                && !resume
            {
                args.extend(["--precision".into(), p.clone()]);
            }
            args.extend(["--backend".into(), backend]);
            if !options.devices.is_empty() {
                let devices: Vec<String> = options.devices.iter().map(usize::to_string).collect();
                args.extend(["--devices".into(), devices.join(",")]);
            }
            cmd::train::run(Argv::<TrainCmd>::read(&args)?)
        }
        Spec::Average { run, last, inputs } => {
            let out = dir.join("averaged.safetensors");
            match run {
                Some(run) => {
                    let last = if smoke { (*last).min(2) } else { *last };
                    let steps = checkpoint_mean::average(run, last, &out)?;
                    eprintln!("averaged steps {steps:?} into {}", out.display());
                }
                None => {
                    checkpoint_mean::average_files(inputs, &out)?;
                    eprintln!("averaged {} weights into {}", inputs.len(), out.display());
                }
            }
            Ok(())
        }
        Spec::Teacher {
            models,
            channel,
            rescore,
            back,
            src,
            tgt,
            beam,
            alpha,
        } => {
            let limit = smoke.then_some(SMOKE_EVAL_LINES);
            let sources = read_corpus(src, limit)?;
            let references = if tgt.is_empty() {
                None
            } else {
                let r = read_corpus(tgt, limit)?;
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
            let mut args = model_args(models)?;
            if let Some((reverse, weight)) = channel {
                if reverse.checkpoint.is_some() {
                    return Err(Error::Usage(
                        "a channel model of averaged weights: export it first (an export stage)"
                            .into(),
                    ));
                }
                args.extend(["--channel".into(), reverse.path.display().to_string()]);
                if let Some(w) = weight {
                    args.extend(["--channel-weight".into(), w.to_string()]);
                }
            }
            match rescore {
                None => {
                    if let Some(b) = beam {
                        args.extend(["--beam".into(), b.to_string()]);
                    }
                    if let Some(a) = alpha {
                        args.extend(["--alpha".into(), a.to_string()]);
                    }
                    args.extend(["--backend".into(), backend]);
                    translate(args, &unique_file, &teacher_file)?;
                }
                Some(rescore) => {
                    // Each model decodes with its own α, at beam 4 unless `beam` says
                    // otherwise; `alpha` (else the teacher bundle's) is the reranking's
                    // length penalty.
                    let alpha = match alpha {
                        Some(a) => *a,
                        None => bundle_alpha(&models[0].path)?,
                    };
                    let decoding = [
                        "--beam".to_string(),
                        beam.unwrap_or(4).to_string(),
                        "--backend".into(),
                        backend,
                    ];
                    let mut other = model_args(std::slice::from_ref(&rescore.model))?;
                    args.extend(decoding.iter().cloned());
                    other.extend(decoding);
                    let scorers = [
                        super::rescore::Scorer {
                            args,
                            weight: rescore.weight,
                        },
                        super::rescore::Scorer {
                            args: other,
                            weight: 1.0 - rescore.weight,
                        },
                    ];
                    let work = dir.join("rescore");
                    std::fs::create_dir_all(&work).map_err(io(&work))?;
                    super::rescore::translate(&scorers, alpha, &unique_file, &teacher_file, &work)?;
                }
            }
            let translations = data::corpus::read_lines(&teacher_file)?;
            let by_source: std::collections::HashMap<&str, &str> = unique
                .iter()
                .copied()
                .zip(translations.iter().map(String::as_str))
                .collect();
            // References kept where given; each source again with the teacher's
            // translation, unless their word counts differ more than twofold (a loop, a
            // dropped clause).
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
                    pairs.push(if *back { (t, s) } else { (s, t) });
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
        Spec::Select {
            model,
            val,
            beams,
            alphas,
        } => {
            let (beams, alphas) = if smoke {
                (&beams[..1], &alphas[..alphas.len().min(2)])
            } else {
                (&beams[..], &alphas[..])
            };
            let val = sets_at_scale(val, &dir, scale)?;
            let mut grid = Vec::new();
            let mut best: Option<(f64, usize, f64, BTreeMap<String, f64>)> = None;
            for &beam in beams {
                for &alpha in alphas {
                    let mut scores = BTreeMap::new();
                    for set in &val {
                        let SetData::Pairs { src, reference } = &set.data else {
                            return Err(Error::Usage(format!(
                                "select: set `{}` is a treebank; select scores translations",
                                set.name
                            )));
                        };
                        let hyp = dir.join(format!("{}.beam{beam}.alpha{alpha}.txt", set.name));
                        let args = model_args(std::slice::from_ref(model))?;
                        let decoding = Decoding {
                            beam,
                            alpha,
                            backend: &backend,
                        };
                        let bleu = decoding.bleu(args, src, reference, &hyp)?;
                        scores.insert(set.name.clone(), bleu);
                    }
                    let mean = scores.values().sum::<f64>() / scores.len() as f64;
                    let shown: Vec<String> =
                        scores.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
                    eprintln!(
                        "val BLEU with beam {beam}, α {alpha}: {} (mean {mean:.2})",
                        shown.join(", ")
                    );
                    grid.push(serde_json::json!({
                        "beam": beam, "alpha": alpha, "bleu": scores, "mean": round2(mean)
                    }));
                    // The first best wins a tie: the smallest beam, then the smallest α.
                    if best.as_ref().is_none_or(|b| mean > b.0) {
                        best = Some((mean, beam, alpha, scores));
                    }
                }
            }
            let (mean, beam, alpha, scores) =
                best.ok_or_else(|| Error::Usage("select: an empty grid".into()))?;
            eprintln!("chosen: beam {beam}, α {alpha} (mean val BLEU {mean:.2})");
            let json = serde_json::json!({
                "beam": beam, "alpha": alpha, "mean": round2(mean), "bleu": scores, "grid": grid
            });
            fsutil::write_atomic(
                &dir.join("select.json"),
                serde_json::to_string_pretty(&json)
                    .unwrap_or_default()
                    .as_bytes(),
            )
        }
        Spec::Export {
            model,
            select,
            parse,
            source,
            target,
            dtype,
            beam,
            alpha,
            ct2,
        } => {
            let bundle = dir.join("bundle");
            let mut args = vec![
                "--model".to_string(),
                model.path.display().to_string(),
                "--out".into(),
                bundle.display().to_string(),
                "--task".into(),
                if *parse { "parse" } else { "translate" }.into(),
                "--source".into(),
                source.clone(),
                "--target".into(),
                target.clone(),
                "--command".into(),
                options.command.clone(),
            ];
            if let Some(c) = &model.checkpoint {
                args.extend(["--checkpoint".into(), c.display().to_string()]);
            }
            match dtype.as_str() {
                "int8" => args.push("--int8".into()),
                "f16" => args.push("--f16".into()),
                _ => {}
            }
            let (mut beam, mut alpha) = (*beam, *alpha);
            if let Some(file) = select {
                let text = std::fs::read_to_string(file).map_err(io(file))?;
                let chosen: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| Error::Format {
                        path: file.clone(),
                        message: e.to_string(),
                    })?;
                beam = chosen["beam"].as_u64().map(|b| b as usize);
                alpha = chosen["alpha"].as_f64();
                if let Some(scores) = chosen["bleu"].as_object() {
                    for (name, v) in scores {
                        args.extend(["--metric".into(), format!("bleu_{name}={v}")]);
                    }
                }
            }
            if let Some(b) = beam {
                args.extend(["--beam".into(), b.to_string()]);
            }
            if let Some(a) = alpha {
                args.extend(["--alpha".into(), a.to_string()]);
            }
            cmd::export::run(Argv::<ExportCmd>::read(&args)?)?;
            // The provenance: this stage and every stage it came from, as the recipes say;
            // the recipe's description becomes the card's notes (how to run it for real).
            let description = plan.recipes[plan.nodes[node].recipe].description.trim();
            edit_card(&bundle, |config| {
                config.provenance.recipe = Some(origin(plan, node));
                if !description.is_empty() {
                    let notes = &mut config.provenance.notes;
                    *notes = if notes.is_empty() {
                        description.to_string()
                    } else {
                        format!("{description}\n{notes}")
                    };
                }
                Ok(())
            })?;
            if *ct2 {
                ct2_export(plan, &bundle, &dir.join("ct2"))?;
            }
            Ok(())
        }
        Spec::Table3 {
            rows,
            src,
            reference,
            beam,
            alpha,
            note,
        } => {
            let dev = sets_at_scale(
                &[TestSet {
                    name: "dev".into(),
                    data: SetData::Pairs {
                        src: src.clone(),
                        reference: reference.clone(),
                    },
                }],
                &dir,
                scale,
            )?;
            let SetData::Pairs { src, reference } = &dev[0].data else {
                unreachable!("a set of pairs stays one")
            };
            let mut measured = BTreeMap::new();
            for super::spec::Row { name, run, .. } in rows {
                let step = train::checkpoint::list(run)?
                    .last()
                    .map(|(step, _)| *step)
                    .ok_or_else(|| {
                        Error::Usage(format!("row {name}: {} has no checkpoint", run.display()))
                    })?;
                // Per wordpiece on dev, as the paper's note to Table 3 says; the newest
                // checkpoint, not an average (the paper's Table 3 averages none).
                let model = cmd::ModelArgs {
                    model: run.clone(),
                    checkpoint: None,
                    backend: options.backend,
                };
                let loss = cmd::eval::pair_loss(&model, src, reference)?;
                let hyp = dir.join(format!("{name}.hyp"));
                let args = vec!["--model".to_string(), run.display().to_string()];
                let decoding = Decoding {
                    beam: *beam,
                    alpha: *alpha,
                    backend: &backend,
                };
                let score = decoding.bleu(args, src, reference, &hyp)?;
                let ppl = loss.nll.exp();
                eprintln!(
                    "{name}: step {step}, dev perplexity {ppl:.2} ({} pairs), BLEU {score:.2} \
                     (beam {beam}, α {alpha})",
                    loss.pairs
                );
                measured.insert(
                    name.clone(),
                    table3::Measured {
                        steps: step,
                        ppl,
                        bleu: score,
                        params: loss.params as u64,
                    },
                );
            }
            let results = table3::Results {
                scale: scale.name().into(),
                note: note.clone(),
                rows: measured,
            };
            fsutil::write_atomic(
                &dir.join(table3::RESULTS_FILE),
                serde_json::to_string_pretty(&results)
                    .unwrap_or_default()
                    .as_bytes(),
            )?;
            table3::write(&results, &dir)?;
            let (rho, n) = table3::ppl_correlation(&results);
            eprintln!(
                "wrote {} ({n} rows; Spearman ρ of dev perplexity {})",
                dir.join(table3::MARKDOWN_FILE).display(),
                rho.map_or("not defined".into(), |r| format!("{r:.3}"))
            );
            Ok(())
        }
        Spec::Test { bundle, sets } => {
            let sets = sets_at_scale(sets, &dir, scale)?;
            let mut metrics = serde_json::Map::new();
            for set in &sets {
                let hyp = dir.join(format!("{}.hyp", set.name));
                match &set.data {
                    SetData::Pairs { src, reference } => {
                        let args = vec![
                            "--model".to_string(),
                            bundle.display().to_string(),
                            "--backend".into(),
                            backend.clone(),
                        ];
                        translate(args, src, &hyp)?;
                        let (score, signature) = bleu(&hyp, reference)?;
                        eprintln!("{}: BLEU {score:.2} ({signature})", set.name);
                        metrics.insert(format!("bleu_{}", set.name), round2(score).into());
                        metrics.insert("bleu_signature".into(), signature.into());
                    }
                    SetData::Tsv(_) => unreachable!("sets_at_scale splits every TSV"),
                    SetData::Trees(trees) => {
                        let args = vec![
                            "--model".to_string(),
                            bundle.display().to_string(),
                            "--input".into(),
                            trees.display().to_string(),
                            "--output".into(),
                            hyp.display().to_string(),
                            "--quiet".into(),
                        ];
                        cmd::parse::run(Argv::<ParseCmd>::read(&args)?)?;
                        let f1 = bracket_f1(trees, &hyp)?;
                        eprintln!("{}: bracket F1 {f1:.2} (EVALB COLLINS.prm)", set.name);
                        metrics.insert(format!("f1_{}", set.name), round2(f1).into());
                    }
                }
            }
            edit_card(bundle, |config| {
                for (k, v) in &metrics {
                    config.metrics.insert(k.clone(), v.clone());
                }
                Ok(())
            })?;
            let json = serde_json::json!({ "bundle": bundle, "metrics": metrics });
            fsutil::write_atomic(
                &dir.join("scores.json"),
                serde_json::to_string_pretty(&json)
                    .unwrap_or_default()
                    .as_bytes(),
            )
        }
    }
}

/// The provenance of a bundle from stage `node`: its lineage in the plan's order.
fn origin(plan: &Plan, node: usize) -> RecipeOrigin {
    let mut wanted = vec![false; plan.nodes.len()];
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if !wanted[n] {
            wanted[n] = true;
            stack.extend(plan.nodes[n].deps.iter().map(|(d, _)| *d));
        }
    }
    // The plan's order runs inputs first; a stage outside it (run alone) comes last.
    let mut lineage_nodes: Vec<usize> = plan.order.iter().copied().filter(|&n| wanted[n]).collect();
    for (n, &w) in wanted.iter().enumerate() {
        if w && !lineage_nodes.contains(&n) {
            lineage_nodes.push(n);
        }
    }
    let (recipe, stage) = plan.stage_of(node);
    RecipeOrigin {
        file: recipe.path.display().to_string(),
        stage: stage.name.clone(),
        scale: plan.context.scale.name().into(),
        lineage: lineage_nodes
            .into_iter()
            .map(|n| {
                let (r, s) = plan.stage_of(n);
                RecipeStage {
                    recipe: r.name.clone(),
                    stage: s.name.clone(),
                    kind: s.kind.name().into(),
                    settings: s.settings(),
                }
            })
            .collect(),
    }
}

/// Reads a bundle's config.json, changes it, writes it back (the other files' hashes in
/// it stay true: they are not touched).
fn edit_card(bundle: &Path, edit: impl FnOnce(&mut BundleConfig) -> Result<()>) -> Result<()> {
    let path = bundle.join(CONFIG_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let mut config = BundleConfig::from_json(&bytes).map_err(|e| Error::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    edit(&mut config)?;
    fsutil::write_atomic(&path, config.to_json().as_bytes())
}

/// `--model`/`--checkpoint` arguments for a model or an ensemble.
fn model_args(models: &[Model]) -> Result<Vec<String>> {
    let mut args = Vec::new();
    for m in models {
        args.extend(["--model".to_string(), m.path.display().to_string()]);
    }
    let with = models.iter().filter(|m| m.checkpoint.is_some()).count();
    if with == models.len() {
        for m in models {
            if let Some(c) = &m.checkpoint {
                args.extend(["--checkpoint".to_string(), c.display().to_string()]);
            }
        }
    } else if with > 0 {
        return Err(Error::Usage(
            "an ensemble of averaged weights and other models: export the averages first \
             (an export stage)"
                .into(),
        ));
    }
    Ok(args)
}

/// A beam and α to decode a set with, and what it scores.
struct Decoding<'a> {
    beam: usize,
    alpha: f64,
    backend: &'a str,
}

impl Decoding<'_> {
    /// Translates `src` into `hyp` with `model` (`--model …` arguments) and scores it
    /// against `reference`: corpus BLEU.
    fn bleu(
        &self,
        mut model: Vec<String>,
        src: &Path,
        reference: &Path,
        hyp: &Path,
    ) -> Result<f64> {
        model.extend([
            "--beam".into(),
            self.beam.to_string(),
            "--alpha".into(),
            self.alpha.to_string(),
            "--backend".into(),
            self.backend.to_string(),
        ]);
        translate(model, src, hyp)?;
        Ok(bleu(hyp, reference)?.0)
    }
}

/// The length penalty α a bundle decodes with (its card's `decoding`).
fn bundle_alpha(bundle: &Path) -> Result<f64> {
    let path = bundle.join(CONFIG_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let config = BundleConfig::from_json(&bytes).map_err(|e| Error::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(config.decoding.alpha)
}

/// Corpus BLEU as sacreBLEU computes it by default, and its signature.
fn bleu(hyp: &Path, reference: &Path) -> Result<(f64, String)> {
    use transduce_metrics::bleu;
    let usage = |e: bleu::BleuError| Error::Usage(e.to_string());
    let options = bleu::BleuOptions {
        lowercase: false,
        tokenize: "13a".parse().map_err(usage)?,
        smooth_method: "exp".parse().map_err(usage)?,
        smooth_value: None,
        effective_order: None,
    };
    let hyps = cmd::read_input(Some(hyp))?;
    let refs = cmd::read_input(Some(reference))?;
    if refs.len() != hyps.len() {
        return Err(Error::LineCount {
            src_path: hyp.to_path_buf(),
            src_lines: hyps.len(),
            tgt_path: reference.to_path_buf(),
            tgt_lines: refs.len(),
        });
    }
    let score = bleu::corpus_bleu_streams(&hyps, &[refs], &options).map_err(usage)?;
    Ok((score.score, format!("BLEU|{}", score.signature())))
}

/// Bracket F1 as EVALB with COLLINS.prm computes it.
fn bracket_f1(gold: &Path, test: &Path) -> Result<f64> {
    use transduce_metrics::evalb;
    let gold_text = String::from_utf8_lossy(&data::corpus::read_bytes(gold)?).to_string();
    let test_text = String::from_utf8_lossy(&data::corpus::read_bytes(test)?).to_string();
    let report = evalb::evaluate_text(&gold_text, &test_text, &evalb::EvalbParams::collins())
        .map_err(|e| Error::Usage(format!("{} vs {}: {e}", gold.display(), test.display())))?;
    Ok(report.summary_all.bracketing_fmeasure())
}

/// The sets as a stage decodes them: TSV files split into their sides, and at `smoke`
/// every file cut to the scale's lines (into `dir`).
fn sets_at_scale(sets: &[TestSet], dir: &Path, scale: Scale) -> Result<Vec<TestSet>> {
    let smoke = scale == Scale::Smoke;
    sets.iter()
        .map(|set| {
            let cut = |p: &PathBuf, ext: &str, n: usize| {
                if !smoke {
                    return Ok(p.clone());
                }
                corpus(
                    std::slice::from_ref(p),
                    Some(n),
                    &dir.join(format!("{}.{ext}", set.name)),
                )
            };
            let data = match &set.data {
                SetData::Pairs { src, reference } => SetData::Pairs {
                    src: cut(src, "src", SMOKE_EVAL_LINES)?,
                    reference: cut(reference, "ref", SMOKE_EVAL_LINES)?,
                },
                SetData::Tsv(tsv) => {
                    let limit = smoke.then_some(SMOKE_EVAL_LINES);
                    let (src, reference) = split_tsv(
                        std::slice::from_ref(tsv),
                        limit,
                        &dir.join(format!("{}.tsv", set.name)),
                    )?;
                    SetData::Pairs { src, reference }
                }
                SetData::Trees(t) => SetData::Trees(cut(t, "trees", SMOKE_TREES)?),
            };
            Ok(TestSet {
                name: set.name.clone(),
                data,
            })
        })
        .collect()
}

/// The lines of several files (gzip or not), the first `limit` of them.
fn read_corpus(files: &[PathBuf], limit: Option<usize>) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for f in files {
        lines.extend(data::corpus::read_lines(f)?);
        if limit.is_some_and(|n| lines.len() >= n) {
            break;
        }
    }
    if let Some(n) = limit {
        lines.truncate(n);
    }
    Ok(lines)
}

/// One file of the corpus: the file itself when it is one and whole, else the files
/// joined (and cut to `limit` lines) into `out`.
fn corpus(files: &[PathBuf], limit: Option<usize>, out: &Path) -> Result<PathBuf> {
    if let ([only], None) = (files, limit) {
        return Ok(only.clone());
    }
    let lines = read_corpus(files, limit)?;
    write_lines(out, lines.iter().map(String::as_str))?;
    Ok(out.to_path_buf())
}

/// The two sides of `source<TAB>target` files (the first `limit` lines), written to
/// `OUT.src` and `OUT.tgt`; a line without a tab is an error naming its file and line.
fn split_tsv(files: &[PathBuf], limit: Option<usize>, out: &Path) -> Result<(PathBuf, PathBuf)> {
    let (mut src, mut tgt) = (Vec::new(), Vec::new());
    'files: for f in files {
        for (i, line) in data::corpus::read_lines(f)?.into_iter().enumerate() {
            if limit.is_some_and(|n| src.len() >= n) {
                break 'files;
            }
            let Some((s, t)) = line.split_once('\t') else {
                return Err(Error::Format {
                    path: f.clone(),
                    message: format!("line {}: expected source<TAB>target", i + 1),
                });
            };
            src.push(s.to_string());
            tgt.push(t.to_string());
        }
    }
    let (a, b) = (out.with_extension("src"), out.with_extension("tgt"));
    write_lines(&a, src.iter().map(String::as_str))?;
    write_lines(&b, tgt.iter().map(String::as_str))?;
    Ok((a, b))
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A copy of training run `from` in `to`, the run's file last (a copy cut short leaves no
/// run to resume, so the stage starts again). Checkpoints are hard links where the file
/// system allows: the trainer writes a checkpoint once and deletes it whole.
fn copy_run(from: &Path, to: &Path) -> Result<()> {
    fn copy_dir(from: &Path, to: &Path, link: bool) -> Result<()> {
        std::fs::create_dir_all(to).map_err(io(to))?;
        for entry in std::fs::read_dir(from).map_err(io(from))? {
            let entry = entry.map_err(io(from))?;
            let (src, dst) = (entry.path(), to.join(entry.file_name()));
            let name = entry.file_name();
            if name == train::RUN_FILE || name == super::state::MARKER_FILE {
                continue;
            }
            if entry.file_type().map_err(io(&src))?.is_dir() {
                copy_dir(&src, &dst, link || name == "checkpoints")?;
            } else if !(link && std::fs::hard_link(&src, &dst).is_ok()) {
                std::fs::copy(&src, &dst).map_err(io(&src))?;
            }
        }
        Ok(())
    }
    let run = from.join(train::RUN_FILE);
    if !run.exists() {
        return Err(Error::Usage(format!(
            "{} holds no training run to continue",
            from.display()
        )));
    }
    copy_dir(from, to, false)?;
    std::fs::copy(&run, to.join(train::RUN_FILE)).map_err(io(&run))?;
    eprintln!("continuing the run in {}", from.display());
    Ok(())
}

/// The CTranslate2 model of a bundle, by `scripts/ct2.py export` (CTranslate2's own
/// converter API); its Python is `TRANSDUCE_CT2_PYTHON`, else the one `scripts/test.sh`
/// installs, else `python3`.
fn ct2_export(plan: &Plan, bundle: &Path, out: &Path) -> Result<()> {
    // The checkout the recipe is in, else the one the command runs in, else the one this
    // binary was built from.
    let recipe_dir = std::path::absolute(plan.recipes[0].dir()).unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_default();
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = recipe_dir
        .ancestors()
        .chain(cwd.ancestors())
        .chain([built_from.as_path()])
        .map(|d| d.join("scripts/ct2.py"))
        .find(|p| p.exists())
        .ok_or_else(|| {
            Error::Usage(
                "ct2 = true needs scripts/ct2.py: run the recipe from the transduce checkout"
                    .into(),
            )
        })?;
    let python = std::env::var_os("TRANSDUCE_CT2_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let venv = PathBuf::from(home).join(".cache/transduce-tools/ct2-venv/bin/python");
            venv.exists().then_some(venv)
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    eprintln!(
        "CTranslate2 export: {} {} export",
        python.display(),
        script.display()
    );
    let status = std::process::Command::new(&python)
        .arg(&script)
        .args(["export", "--bundle"])
        .arg(bundle)
        .arg("--out")
        .arg(out)
        .status()
        .map_err(io(&python))?;
    if !status.success() {
        return Err(Error::Usage(format!(
            "{} export failed ({status}); it needs ctranslate2 (`source scripts/common.sh && \
             ensure_ct2`, or set TRANSDUCE_CT2_PYTHON)",
            script.display()
        )));
    }
    Ok(())
}
