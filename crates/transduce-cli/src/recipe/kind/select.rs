//! `kind = "select"`: the beam × α grid on the validation sets (§6.1 chose beam 4 and
//! α 0.6 so, on the development set); the best mean BLEU wins, written to `select.json`.

use std::any::Any;
use std::collections::BTreeMap;

use transduce_train::error::{Error, Result};
use transduce_train::fsutil;

use super::super::cost::{decode_seconds, model_params, preset_params, set_lines};
use super::super::plan::{Model, Output, Plan};
use super::super::scoring::{Decoding, model_args, round2};
use super::super::sets::{self, SetData, TestSet};
use super::fields::{Fields, list, number_of};
use super::spec::{At, CostAt, Spec};

/// A select stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Select {
    pub model: Model,
    pub val: Vec<TestSet>,
    pub beams: Vec<usize>,
    pub alphas: Vec<f64>,
}

/// The chosen beam and α (`select.json`).
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Selection(plan.nodes[node].dir.join("select.json")))
}

impl Select {
    pub fn read(f: &Fields) -> Result<Select> {
        let beams = match f.get("beams") {
            None => vec![4],
            Some(v) => list(v, |x| match x {
                toml::Value::Integer(n) if *n >= 1 => Some(*n as usize),
                _ => None,
            })
            .ok_or_else(|| f.err("beams", format!("{v} is not a list of beam sizes")))?,
        };
        let alphas = match f.get("alphas") {
            None => vec![0.6],
            Some(v) => list(v, |x| number_of(x).filter(|a| *a >= 0.0))
                .ok_or_else(|| f.err("alphas", format!("{v} is not a list of numbers ≥ 0")))?,
        };
        Ok(Select {
            model: f.model("model")?,
            val: sets::read(f.plan, f.node, "val")?,
            beams,
            alphas,
        })
    }

    /// The grid at a scale: at `smoke` its first beam and two αs.
    fn grid(&self, smoke: bool) -> (&[usize], &[f64]) {
        if smoke {
            (&self.beams[..1], &self.alphas[..self.alphas.len().min(2)])
        } else {
            (&self.beams[..], &self.alphas[..])
        }
    }
}

impl Spec for Select {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let dir = &at.dir;
        let (beams, alphas) = self.grid(at.smoke());
        let backend = at.options.backend_arg();
        let val = sets::at_scale(&self.val, dir, at.scale)?;
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
                    let args = model_args(std::slice::from_ref(&self.model))?;
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

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        let smoke = at.smoke();
        let lines = set_lines(&self.val, smoke);
        let params = model_params(&self.model).or_else(|| preset_params("small"))?;
        let (beams, alphas) = self.grid(smoke);
        let per_line: f64 = beams
            .iter()
            .map(|&b| decode_seconds(params, b) * alphas.len() as f64)
            .sum();
        Some((lines as f64 * per_line, "from the model's size"))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
