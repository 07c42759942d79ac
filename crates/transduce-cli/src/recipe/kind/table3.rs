//! `kind = "table3"`: the paper's Table 3 beside ours. Each row's run is scored on dev
//! (perplexity per wordpiece, BLEU with the paper's beam 4 and α 0.6), and `table3.md`
//! and its chart are written.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::PathBuf;

use transduce_train::error::{Error, Result};
use transduce_train::{fsutil, train};

use crate::{cmd, table3};

use super::super::cost::{count_lines, decode_seconds};
use super::super::format::Input;
use super::super::plan::{Output, Plan};
use super::super::row::Row;
use super::super::scoring::Decoding;
use super::super::sets::{self, SMOKE_EVAL_LINES, SetData, TestSet};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};
use super::train::Train;

/// A table3 stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Table3 {
    /// Each row and its training run.
    pub rows: Vec<Row>,
    pub src: PathBuf,
    pub reference: PathBuf,
    pub beam: usize,
    pub alpha: f64,
    /// What was scaled and how, printed above the table.
    pub note: String,
}

/// A Table 3 report folder (`table3.md`, `table3-ppl.svg`, `results.json`).
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Report(plan.nodes[node].dir.clone()))
}

impl Table3 {
    pub fn read(f: &Fields) -> Result<Table3> {
        let mut rows: Vec<Row> = Vec::new();
        for input in f.inputs("rows")? {
            let Input::Stage(r) = &input else {
                return Err(f.err("rows", "expected `@stage`s of train stages".into()));
            };
            let target = match f.reference_output("rows", r)? {
                Output::Run(_) if r.sub.is_none() => f.target(r),
                other => {
                    return Err(f.expected("rows", "a train stage", &other));
                }
            };
            // The train stage's own reading of its row (its errors are its own).
            let row = match target.map(|t| Train::read(&f.of(t))).transpose()? {
                Some(Train { row: Some(row), .. }) => row,
                _ => {
                    return Err(f.err("rows", format!("`@{}` trains no Table 3 `row`", r.stage)));
                }
            };
            if rows.iter().any(|other| other.name == row.name) {
                return Err(f.err("rows", format!("row {} twice", row.name)));
            }
            rows.push(row);
        }
        Ok(Table3 {
            rows,
            src: f.single_file("src")?,
            reference: f.single_file("ref")?,
            beam: f.count("beam")?.unwrap_or(4),
            alpha: f.number("alpha")?.unwrap_or(0.6),
            note: f.text("note", "")?,
        })
    }
}

impl Spec for Table3 {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let dir = &at.dir;
        let dev = sets::at_scale(
            &[TestSet {
                name: "dev".into(),
                data: SetData::Pairs {
                    src: self.src.clone(),
                    reference: self.reference.clone(),
                },
            }],
            dir,
            at.scale,
        )?;
        let SetData::Pairs { src, reference } = &dev[0].data else {
            unreachable!("a set of pairs stays one")
        };
        let (beam, alpha) = (self.beam, self.alpha);
        let backend = at.options.backend_arg();
        let mut measured = BTreeMap::new();
        for Row { name, run, .. } in &self.rows {
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
                backend: at.options.backend,
            };
            let loss = cmd::eval::pair_loss(&model, src, reference)?;
            let hyp = dir.join(format!("{name}.hyp"));
            let args = vec!["--model".to_string(), run.display().to_string()];
            let decoding = Decoding {
                beam,
                alpha,
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
            scale: at.scale.name().into(),
            note: self.note.clone(),
            rows: measured,
        };
        fsutil::write_atomic(
            &dir.join(table3::RESULTS_FILE),
            serde_json::to_string_pretty(&results)
                .unwrap_or_default()
                .as_bytes(),
        )?;
        table3::write(&results, dir)?;
        let (rho, n) = table3::ppl_correlation(&results);
        eprintln!(
            "wrote {} ({n} rows; Spearman ρ of dev perplexity {})",
            dir.join(table3::MARKDOWN_FILE).display(),
            rho.map_or("not defined".into(), |r| format!("{r:.3}"))
        );
        Ok(())
    }

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        // Each row: its dev set decoded with beam 4, as a model of its size.
        let lines = if at.smoke() {
            SMOKE_EVAL_LINES
        } else {
            count_lines(std::slice::from_ref(&self.src))
        };
        let per_row: f64 = self
            .rows
            .iter()
            .map(|row| lines as f64 * decode_seconds(row.params(), 4))
            .sum();
        Some((per_row, "from the models' sizes"))
    }

    fn data_files(&self) -> Vec<PathBuf> {
        vec![self.src.clone(), self.reference.clone()]
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
