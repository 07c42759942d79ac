//! A stage's cost for `--dry-run`, roughly: a training run's remaining steps at the speed
//! its own metrics show, or else at the CPU speed measured in docs/BENCHMARKS.md scaled
//! by parameter count; decoding stages by sentences × grid points at a third of that.
//!
//! A step's work is the target tokens its batch really holds: the prepared data's own
//! batches where the data is there, else [`TARGET_FILL`] of `max_tokens` (the budget
//! bounds each side's padded size, so a batch's target side is nearly full, not half).

use std::path::Path;

use transduce::ModelConfig;

use transduce_train::train;

use super::format::Scale;
use super::plan::{Model, Plan};
use super::spec::Spec;
use super::stage::SMOKE_EVAL_LINES;
use super::state::State;

/// Target tokens a second `small` (7.6M parameters) trains at on this 2-core CPU
/// (docs/BENCHMARKS.md, release build); other models in inverse proportion to size.
const SMALL_TOKENS_PER_SECOND: f64 = 2352.0;
const SMALL_PARAMS: f64 = 7.6e6;

/// Target tokens (EOS included, padding not) of a batch per token of `max_tokens`, before
/// the data is prepared: the trainer reported 10,835 for 12,000 (the mixed en-de's GPU
/// stage) and about 3,500 for 4,000 (Multi30k, recipes/table3.toml).
const TARGET_FILL: f64 = 0.88;

/// Seconds a stage may take from where it stands, and how that was estimated. `spec_of`
/// gives any planned stage's spec (`node`'s is `spec_of(node)`).
pub fn estimate<'a>(
    plan: &Plan,
    spec_of: &dyn Fn(usize) -> &'a Spec,
    state: &State,
    node: usize,
) -> Option<(f64, &'static str)> {
    if *state == State::Done {
        return Some((0.0, "done"));
    }
    let spec = spec_of(node);
    let smoke = plan.context.scale == Scale::Smoke;
    match spec {
        Spec::Train {
            options,
            init,
            row,
            continues,
            ..
        } => {
            let target = spec.target_steps(plan.context.scale);
            let continued = || {
                let source = plan.nodes[node]
                    .deps
                    .iter()
                    .find(|(_, f)| f == "continues")?;
                Some(spec_of(source.0).target_steps(plan.context.scale))
            };
            let from = match state {
                State::Resume(step) => *step,
                _ => continued().unwrap_or(0),
            };
            let dir = &plan.nodes[node].dir;
            // A continued run, not begun, steps as the run it continues did.
            if let Some(per_step) = measured_seconds_per_step(dir)
                .or_else(|| continues.as_deref().and_then(measured_seconds_per_step))
            {
                return Some(((target - from.min(target)) as f64 * per_step, "measured"));
            }
            let params = if let Some(row) = row {
                row.model.clone().with_vocab(8000).num_params() as f64
            } else if smoke {
                init.as_ref()
                    .and_then(model_params)
                    .or_else(|| preset_params("tiny"))?
            } else {
                match (options.get("preset"), init) {
                    (Some(toml::Value::String(p)), _) => preset_params(p)?,
                    // A start not built yet has the architecture of the stage that makes it.
                    (None, Some(m)) => {
                        model_params(m).or_else(|| planned_params(plan, spec_of, node))?
                    }
                    _ => preset_params("base")?,
                }
            };
            let max_tokens = match options.get("max_tokens") {
                Some(toml::Value::Integer(n)) if !smoke => *n as usize,
                _ if smoke => 600,
                _ => 25_000,
            };
            let accum = match options.get("accum") {
                Some(toml::Value::Integer(n)) if !smoke => *n as f64,
                _ => 1.0,
            };
            let Spec::Train { data, .. } = spec else {
                unreachable!("matched above")
            };
            let tokens =
                batch_target_tokens(data, max_tokens).unwrap_or(max_tokens as f64 * TARGET_FILL);
            let per_step = tokens * accum / tokens_per_second(params);
            Some((
                (target - from.min(target)) as f64 * per_step,
                "from the model's size",
            ))
        }
        Spec::Teacher {
            models,
            rescore,
            src,
            beam,
            ..
        } => {
            let lines = if smoke {
                SMOKE_EVAL_LINES
            } else {
                count_lines(src)
            };
            // A rescoring model decodes every source too (its scoring pass is cheaper).
            let params: f64 = models
                .iter()
                .chain(rescore.as_ref().map(|r| &r.model))
                .filter_map(model_params)
                .sum();
            let params = if params > 0.0 {
                params
            } else {
                preset_params("small")?
            };
            Some((
                lines as f64 * decode_seconds(params, beam.unwrap_or(4)),
                "from the model's size",
            ))
        }
        Spec::Select {
            model,
            val,
            beams,
            alphas,
        } => {
            let lines = set_lines(val, smoke);
            let params = model_params(model).or_else(|| preset_params("small"))?;
            let (beams, alphas) = if smoke {
                (&beams[..1], &alphas[..alphas.len().min(2)])
            } else {
                (&beams[..], &alphas[..])
            };
            let per_line: f64 = beams
                .iter()
                .map(|&b| decode_seconds(params, b) * alphas.len() as f64)
                .sum();
            Some((lines as f64 * per_line, "from the model's size"))
        }
        Spec::Test { sets, .. } => {
            let lines = set_lines(sets, smoke);
            Some((
                lines as f64 * decode_seconds(preset_params("small")?, 4),
                "as a small model",
            ))
        }
        Spec::Prepare(p) => {
            // BPE learning and encoding, about 2 MB of text a second.
            let bytes: u64 = if smoke {
                100_000
            } else {
                p.src
                    .iter()
                    .chain(&p.tsv)
                    .filter_map(|p| std::fs::metadata(p).ok())
                    .map(|m| m.len() * 2)
                    .sum()
            };
            Some((bytes as f64 / 2e6 + 1.0, "from the data's size"))
        }
        Spec::Table3 { rows, src, .. } => {
            // Each row: its dev set decoded with beam 4, as a model of its size.
            let lines = if smoke {
                SMOKE_EVAL_LINES
            } else {
                count_lines(std::slice::from_ref(src))
            };
            let per_row: f64 = rows
                .iter()
                .map(|row| {
                    let params = row.model.clone().with_vocab(8000).num_params() as f64;
                    lines as f64 * decode_seconds(params, 4)
                })
                .sum();
            Some((per_row, "from the models' sizes"))
        }
        Spec::Average { .. } | Spec::Export { .. } => Some((2.0, "seconds")),
    }
}

/// `1 h 05 min`, `12 min`, `40 s`.
pub fn format_seconds(s: f64) -> String {
    if s < 60.0 {
        format!("{:.0} s", s.max(1.0))
    } else if s < 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        let m = (s / 60.0).round() as u64;
        format!("{} h {:02} min", m / 60, m % 60)
    }
}

fn tokens_per_second(params: f64) -> f64 {
    SMALL_TOKENS_PER_SECOND * SMALL_PARAMS / params.max(1e5)
}

/// One sentence decoded: about 25 target tokens × beam, forward only (a third of a step).
fn decode_seconds(params: f64, beam: usize) -> f64 {
    25.0 * beam as f64 / (3.0 * tokens_per_second(params))
}

fn preset_params(name: &str) -> Option<f64> {
    let mut config = ModelConfig::preset(name).ok()?;
    config.vocab_size = 8000;
    Some(config.num_params() as f64)
}

/// The parameters of the model `node` starts from, before it is built: walked back through
/// the stages that make it (an average or export of a run, a run continued from another) to
/// the first that names its architecture (a preset, a Table 3 row) or whose model is
/// already built.
fn planned_params<'a>(
    plan: &Plan,
    spec_of: &dyn Fn(usize) -> &'a Spec,
    node: usize,
) -> Option<f64> {
    let mut seen = vec![false; plan.nodes.len()];
    let mut next = Some(node);
    while let Some(n) = next.take() {
        if std::mem::replace(&mut seen[n], true) {
            return None;
        }
        let made_by = |field: Option<&str>| {
            plan.nodes[n]
                .deps
                .iter()
                .find(|(_, f)| field.is_none_or(|name| f == name))
                .map(|(d, _)| *d)
        };
        if n != node
            && let Spec::Train { options, row, .. } = spec_of(n)
        {
            if let Some(row) = row {
                return Some(row.model.clone().with_vocab(8000).num_params() as f64);
            }
            if let Some(toml::Value::String(p)) = options.get("preset") {
                return preset_params(p);
            }
        }
        next = match spec_of(n) {
            Spec::Train {
                continues: Some(_), ..
            } => made_by(Some("continues")),
            Spec::Train { init: Some(m), .. } if n != node => {
                if let Some(params) = model_params(m) {
                    return Some(params);
                }
                made_by(Some("init"))
            }
            Spec::Train { .. } if n == node => made_by(Some("init")),
            // A stage of the default architecture (`base`).
            Spec::Train { .. } => return preset_params("base"),
            // An average, export or selection: the model of its first input.
            _ => made_by(None),
        };
    }
    None
}

/// A bundle's or run's parameter count, where it exists already.
fn model_params(model: &Model) -> Option<f64> {
    let bundle = model.path.join(transduce::bundle::CONFIG_FILE);
    if let Ok(bytes) = std::fs::read(&bundle) {
        let config = transduce::bundle::BundleConfig::from_json(&bytes).ok()?;
        return Some(config.model.num_params() as f64);
    }
    let run = train::RunConfig::read(&model.path).ok()?;
    Some(run.model.num_params() as f64)
}

/// The mean target tokens of the batches `transduce train` makes of prepared data (§5.1's
/// bucketing at `max_tokens`), where the data is prepared.
fn batch_target_tokens(data: &Path, max_tokens: usize) -> Option<f64> {
    let pairs =
        transduce_train::data::cache::read(&data.join(transduce_train::prepared::TRAIN_FILE))
            .ok()?;
    let src: Vec<usize> = pairs.src.iter().map(Vec::len).collect();
    let tgt: Vec<usize> = pairs.tgt.iter().map(Vec::len).collect();
    let batches = transduce_train::data::batch::make_batches(&src, &tgt, max_tokens);
    let total: usize = tgt.iter().map(|n| n + 1).sum();
    (!batches.is_empty()).then(|| total as f64 / batches.len() as f64)
}

/// Seconds per step from a run's metrics.jsonl (its last line with a step and a time).
fn measured_seconds_per_step(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(train::config::METRICS_FILE)).ok()?;
    text.lines().rev().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let step = v["step"].as_f64()?;
        let secs = v["elapsed_secs"].as_f64()?;
        (step > 0.0).then_some(secs / step)
    })
}

/// The sentences of test or validation sets, as many as a run at the scale decodes.
fn set_lines(sets: &[super::spec::TestSet], smoke: bool) -> usize {
    if smoke {
        return SMOKE_EVAL_LINES * sets.len();
    }
    sets.iter()
        .map(|s| count_lines(&[s.data.lines_file().to_path_buf()]))
        .sum()
}

fn count_lines(files: &[std::path::PathBuf]) -> usize {
    files
        .iter()
        .filter_map(|f| transduce_train::data::corpus::read_bytes(f).ok())
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use transduce_train::data::cache::{self, Pairs};

    #[test]
    fn a_batch_holds_nearly_max_tokens_of_target_not_half() {
        let dir = tempfile::tempdir().unwrap();
        let mut pairs = Pairs::default();
        // 200 pairs of 9 source and 9 target pieces: 10 a side with BOS/EOS, so 100-token
        // batches hold 10 pairs, 100 target tokens each.
        for i in 0..200u32 {
            pairs.push(vec![i % 50; 9], vec![i % 40; 9]);
        }
        cache::write(
            &dir.path().join(transduce_train::prepared::TRAIN_FILE),
            &pairs,
        )
        .unwrap();
        let tokens = batch_target_tokens(dir.path(), 100).unwrap();
        assert_eq!(tokens, 100.0);
        // Not prepared yet: none (the estimate falls back on TARGET_FILL).
        assert!(batch_target_tokens(&dir.path().join("none"), 100).is_none());
    }

    #[test]
    fn seconds_read_as_minutes_and_hours() {
        assert_eq!(format_seconds(40.0), "40 s");
        assert_eq!(format_seconds(720.0), "12 min");
        assert_eq!(format_seconds(3900.0), "1 h 05 min");
    }
}
