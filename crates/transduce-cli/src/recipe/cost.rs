//! What a stage's cost for `--dry-run` is estimated from (each kind's own `cost` adds them
//! up), roughly: a training run's remaining steps at the speed
//! its own metrics show, or else at the CPU speed measured in docs/BENCHMARKS.md scaled
//! by parameter count; decoding stages by sentences × grid points at a third of that.
//!
//! A step's work is the target tokens its batch really holds: the prepared data's own
//! batches where the data is there, else [`TARGET_FILL`] of `max_tokens` (the budget
//! bounds each side's padded size, so a batch's target side is nearly full, not half).

use std::path::Path;

use transduce::ModelConfig;

use transduce_train::train;

use super::plan::Model;
use super::sets::{SMOKE_EVAL_LINES, TestSet};

/// Target tokens a second `small` (7.6M parameters) trains at on this 2-core CPU
/// (docs/BENCHMARKS.md, release build); other models in inverse proportion to size.
const SMALL_TOKENS_PER_SECOND: f64 = 2352.0;
const SMALL_PARAMS: f64 = 7.6e6;

/// Target tokens (EOS included, padding not) of a batch per token of `max_tokens`, before
/// the data is prepared: the trainer reported 10,835 for 12,000 (the mixed en-de's GPU
/// stage) and about 3,500 for 4,000 (Multi30k, recipes/table3.toml).
pub const TARGET_FILL: f64 = 0.88;

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

pub fn tokens_per_second(params: f64) -> f64 {
    SMALL_TOKENS_PER_SECOND * SMALL_PARAMS / params.max(1e5)
}

/// One sentence decoded: about 25 target tokens × beam, forward only (a third of a step).
pub fn decode_seconds(params: f64, beam: usize) -> f64 {
    25.0 * beam as f64 / (3.0 * tokens_per_second(params))
}

pub fn preset_params(name: &str) -> Option<f64> {
    let mut config = ModelConfig::preset(name).ok()?;
    config.vocab_size = 8000;
    Some(config.num_params() as f64)
}

/// A bundle's or run's parameter count, where it exists already.
pub fn model_params(model: &Model) -> Option<f64> {
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
pub fn batch_target_tokens(data: &Path, max_tokens: usize) -> Option<f64> {
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
pub fn measured_seconds_per_step(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(train::config::METRICS_FILE)).ok()?;
    text.lines().rev().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        let step = v["step"].as_f64()?;
        let secs = v["elapsed_secs"].as_f64()?;
        (step > 0.0).then_some(secs / step)
    })
}

/// The sentences of test or validation sets, as many as a run at the scale decodes.
pub fn set_lines(sets: &[TestSet], smoke: bool) -> usize {
    if smoke {
        return SMOKE_EVAL_LINES * sets.len();
    }
    sets.iter()
        .map(|s| count_lines(&[s.data.lines_file().to_path_buf()]))
        .sum()
}

pub fn count_lines(files: &[std::path::PathBuf]) -> usize {
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
