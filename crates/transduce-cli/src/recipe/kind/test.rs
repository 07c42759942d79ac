//! `kind = "test"`: BLEU (as sacreBLEU computes it) or bracket F1 (as EVALB does) of an
//! exported bundle on named test sets, written into the bundle's card.

use std::any::Any;
use std::path::PathBuf;

use transduce_train::error::{Error, Result};
use transduce_train::fsutil;

use crate::cmd::{self, parse::ParseCmd};

use super::super::argv::Argv;
use super::super::card::edit_card;
use super::super::cost::{decode_seconds, preset_params, set_lines};
use super::super::format::Input;
use super::super::outputs::translate;
use super::super::plan::{Output, Plan};
use super::super::scoring::{bleu, bracket_f1, round2};
use super::super::sets::{self, SetData, TestSet};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// A test stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Test {
    /// An export stage's bundle: its card gets the scores.
    pub bundle: PathBuf,
    pub sets: Vec<TestSet>,
}

/// Test scores (`scores.json`); the bundle's card holds them too.
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Scores(plan.nodes[node].dir.join("scores.json")))
}

impl Test {
    pub fn read(f: &Fields) -> Result<Test> {
        let bundle = match f.single("model")? {
            Input::Stage(r) if r.sub.is_none() => match f.reference_output("model", &r)? {
                Output::Bundle(d) => d,
                other => {
                    return Err(f.expected(
                        "model",
                        "an export stage (its card gets the scores)",
                        &other,
                    ));
                }
            },
            _ => {
                return Err(f.err(
                    "model",
                    "expected `@stage` of an export stage (its card gets the scores)".into(),
                ));
            }
        };
        Ok(Test {
            bundle,
            sets: sets::read(f.plan, f.node, "sets")?,
        })
    }
}

impl Spec for Test {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let (dir, bundle) = (&at.dir, &self.bundle);
        let sets = sets::at_scale(&self.sets, dir, at.scale)?;
        let backend = at.options.backend_arg();
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
                SetData::Tsv(_) => unreachable!("sets::at_scale splits every TSV"),
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

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        let lines = set_lines(&self.sets, at.smoke());
        Some((
            lines as f64 * decode_seconds(preset_params("small")?, 4),
            "as a small model",
        ))
    }

    /// The scores must still be in the bundle's card (a new export loses them).
    fn output_check(&self, plan: &Plan, node: usize) -> Result<Option<String>> {
        let Output::Scores(f) = plan.output(node)? else {
            unreachable!("a test stage's output is its scores")
        };
        let Ok(text) = std::fs::read_to_string(&f) else {
            return Ok(Some(format!("{} is missing", f.display())));
        };
        let scores: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::Format {
            path: f.clone(),
            message: e.to_string(),
        })?;
        let config = self.bundle.join(transduce::bundle::CONFIG_FILE);
        let card: serde_json::Value = std::fs::read_to_string(&config)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let missing = scores["metrics"]
            .as_object()
            .is_none_or(|m| m.iter().any(|(k, v)| card["metrics"].get(k) != Some(v)));
        if missing {
            return Ok(Some(format!(
                "{}'s card lacks the scores",
                self.bundle.display()
            )));
        }
        Ok(None)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
