//! Table 3 of the paper beside our own run of it: `table3.md` (the paper's columns, our
//! figures next to each of the paper's, and Spearman's ρ of dev perplexity across rows)
//! and `table3-ppl.svg`, from a file of our measured figures per row.
//!
//! The rows (and their settings and parameter counts) are `transduce::config::table3`'s,
//! the ones `transduce table3` prints and the presets `A1` … `big` train; only the paper's
//! measured columns are typed in here.

mod chart;
mod spearman;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use transduce::config::{Table3Row, table3};

use transduce_train::error::{Error, Result, io};
use transduce_train::fsutil;

pub use spearman::spearman;

/// The paper's Table 3 (newstest2013, per-wordpiece perplexity, BLEU with beam 4 and
/// α 0.6, no checkpoint averaging): row, train steps, PPL (dev), BLEU (dev).
pub const PAPER: [(&str, u64, f64, f64); 20] = [
    ("base", 100_000, 4.92, 25.8),
    ("A1", 100_000, 5.29, 24.9),
    ("A2", 100_000, 5.00, 25.5),
    ("A3", 100_000, 4.91, 25.8),
    ("A4", 100_000, 5.01, 25.4),
    ("B1", 100_000, 5.16, 25.1),
    ("B2", 100_000, 5.01, 25.4),
    ("C1", 100_000, 6.11, 23.7),
    ("C2", 100_000, 5.19, 25.3),
    ("C3", 100_000, 4.88, 25.5),
    ("C4", 100_000, 5.75, 24.5),
    ("C5", 100_000, 4.66, 26.0),
    ("C6", 100_000, 5.12, 25.4),
    ("C7", 100_000, 4.75, 26.2),
    ("D1", 100_000, 5.77, 24.6),
    ("D2", 100_000, 4.95, 25.5),
    ("D3", 100_000, 4.67, 25.3),
    ("D4", 100_000, 5.47, 25.7),
    ("E", 100_000, 4.92, 25.7),
    ("big", 300_000, 4.33, 26.4),
];

/// Rows whose params column the paper leaves blank (the base model's count).
const BLANK_PARAMS: [&str; 9] = ["A1", "A2", "A3", "A4", "D1", "D2", "D3", "D4", "E"];

/// The report's files in its folder (the results it was made from beside them).
pub const MARKDOWN_FILE: &str = "table3.md";
pub const CHART_FILE: &str = "table3-ppl.svg";
pub const RESULTS_FILE: &str = "results.json";

/// Our figures for one row, as the run measured them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    pub steps: u64,
    /// Per-wordpiece perplexity on dev.
    pub ppl: f64,
    /// BLEU on dev (sacreBLEU's default signature).
    pub bleu: f64,
    /// Parameters of the model trained (at a reduced scale, of the reduced model).
    pub params: u64,
}

/// The file of our figures: `{ "scale": "…", "note": "…", "rows": { "base": { … }, … } }`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Results {
    pub scale: String,
    /// What was scaled and how (width, steps, data), printed above the table.
    #[serde(default)]
    pub note: String,
    pub rows: BTreeMap<String, Measured>,
}

impl Results {
    /// Reads and checks the file: every row named must be one of Table 3's.
    pub fn read(path: &Path) -> Result<Results> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        let format = |message: String| Error::Format {
            path: path.to_path_buf(),
            message,
        };
        let results: Results = serde_json::from_str(&text)
            .map_err(|e| format(format!("line {}, column {}: {e}", e.line(), e.column())))?;
        for (name, m) in &results.rows {
            if !PAPER.iter().any(|p| p.0 == name) {
                let names: Vec<&str> = PAPER.iter().map(|p| p.0).collect();
                return Err(format(format!(
                    "rows.{name}: not a row of Table 3 ({})",
                    names.join(", ")
                )));
            }
            if !(m.ppl.is_finite() && m.ppl >= 1.0) {
                return Err(format(format!(
                    "rows.{name}.ppl: {} is not a perplexity",
                    m.ppl
                )));
            }
            if !(m.bleu.is_finite() && (0.0..=100.0).contains(&m.bleu)) {
                return Err(format(format!(
                    "rows.{name}.bleu: {} is not a BLEU score",
                    m.bleu
                )));
            }
        }
        Ok(results)
    }
}

/// ρ of dev perplexity, ours against the paper's, over the rows we have; with the count.
pub fn ppl_correlation(results: &Results) -> (Option<f64>, usize) {
    let (ours, paper): (Vec<f64>, Vec<f64>) = PAPER
        .iter()
        .filter_map(|(name, _, ppl, _)| results.rows.get(*name).map(|m| (m.ppl, *ppl)))
        .unzip();
    (spearman(&ours, &paper), ours.len())
}

fn steps_k(steps: u64) -> String {
    if steps >= 1000 && steps.is_multiple_of(1000) {
        format!("{}K", steps / 1000)
    } else {
        steps.to_string()
    }
}

/// `table3.md`: the paper's columns, each measured one as "paper / ours".
pub fn markdown(results: &Results) -> String {
    let rows = table3();
    let row_of = |name: &str| -> &Table3Row {
        rows.iter()
            .find(|r| r.name == name)
            .expect("PAPER names the rows of config::table3")
    };
    let base = &row_of("base").config;
    let mut out = String::new();
    out.push_str(&format!(
        "# Table 3 (variations on the Transformer), scale `{}`\n\n",
        results.scale
    ));
    if !results.note.trim().is_empty() {
        out.push_str(results.note.trim());
        out.push_str("\n\n");
    }
    out.push_str(
        "Each measured column is the paper's / ours. Settings are the paper's, blank where \
         they equal base's (the paper's convention); perplexity per wordpiece on dev, BLEU \
         on dev (sacreBLEU's default signature), params in millions.\n\n",
    );
    out.push_str(
        "| row | N | d_model | d_ff | h | d_k | d_v | P_drop | ε_ls | train steps | PPL (dev) \
         | BLEU (dev) | params ×10⁶ |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let ours_or_dash = |v: Option<String>| v.unwrap_or_else(|| "—".into());
    for (name, paper_steps, paper_ppl, paper_bleu) in PAPER {
        let row = row_of(name);
        let c = &row.config;
        let is_base = name == "base";
        let cell = |value: String, same: bool| {
            if same && !is_base {
                String::new()
            } else {
                value
            }
        };
        let ours = results.rows.get(name);
        let paper_params = if BLANK_PARAMS.contains(&name) {
            String::new()
        } else {
            format!("{:.0}", row.paper_params_millions)
        };
        let label = if name == "E" {
            "E (learned positions)".to_string()
        } else {
            name.to_string()
        };
        out.push_str(&format!(
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {:.2} / {} | {:.1} / {} | {} / {} |\n",
            cell(c.n_layers.to_string(), c.n_layers == base.n_layers),
            cell(c.d_model.to_string(), c.d_model == base.d_model),
            cell(c.d_ff.to_string(), c.d_ff == base.d_ff),
            cell(c.n_heads.to_string(), c.n_heads == base.n_heads),
            cell(c.d_k.to_string(), c.d_k == base.d_k),
            cell(c.d_v.to_string(), c.d_v == base.d_v),
            cell(format!("{:.1}", c.dropout), c.dropout == base.dropout),
            cell(
                format!("{:.1}", c.label_smoothing),
                c.label_smoothing == base.label_smoothing
            ),
            steps_k(paper_steps),
            ours_or_dash(ours.map(|m| steps_k(m.steps))),
            paper_ppl,
            ours_or_dash(ours.map(|m| format!("{:.2}", m.ppl))),
            paper_bleu,
            ours_or_dash(ours.map(|m| format!("{:.1}", m.bleu))),
            if paper_params.is_empty() { "(65)".into() } else { paper_params },
            ours_or_dash(ours.map(|m| format!("{:.1}", m.params as f64 / 1e6))),
        ));
    }
    let (rho, n) = ppl_correlation(results);
    out.push_str(&format!(
        "\nSpearman's ρ of dev perplexity, ours against the paper's, over {n} rows: {}.\n",
        rho.map_or(
            "not defined (fewer than two rows, or no order)".into(),
            |r| format!("**{r:.3}**")
        )
    ));
    out.push_str(
        "(65) marks a params cell the paper leaves blank (the base model's); the chart \
         `table3-ppl.svg` plots both perplexity columns.\n",
    );
    out
}

/// Writes `table3.md` and `table3-ppl.svg` into `dir`.
pub fn write(results: &Results, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    fsutil::write_atomic(&dir.join(MARKDOWN_FILE), markdown(results).as_bytes())?;
    let points: Vec<(&str, f64, Option<f64>)> = PAPER
        .iter()
        .map(|(name, _, ppl, _)| (*name, *ppl, results.rows.get(*name).map(|m| m.ppl)))
        .collect();
    fsutil::write_atomic(
        &dir.join(CHART_FILE),
        chart::ppl_chart(&points, &results.scale).as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(rows: &[(&str, f64, f64)]) -> Results {
        Results {
            scale: "reduced".into(),
            note: "d_model ÷ 4".into(),
            rows: rows
                .iter()
                .map(|&(name, ppl, bleu)| {
                    (
                        name.to_string(),
                        Measured {
                            steps: 1500,
                            ppl,
                            bleu,
                            params: 4_250_000,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn paper_rows_are_config_rows() {
        let names: Vec<&str> = table3().iter().map(|r| r.name).collect();
        let paper: Vec<&str> = PAPER.iter().map(|p| p.0).collect();
        assert_eq!(names, paper);
    }

    #[test]
    fn report_by_hand() {
        // Paper PPL: base 4.92, C1 6.11, C5 4.66, D1 5.77 → ranks 2, 4, 1, 3.
        // Ours: 20, 30, 25, 40 → ranks 1, 3, 2, 4. d = 1, 1, −1, −1, Σd² = 4,
        // ρ = 1 − 6·4/(4·15) = 0.6.
        let r = results(&[
            ("base", 20.0, 10.0),
            ("C1", 30.0, 5.0),
            ("C5", 25.0, 9.0),
            ("D1", 40.0, 3.0),
        ]);
        let (rho, n) = ppl_correlation(&r);
        assert_eq!(n, 4);
        assert!((rho.unwrap() - 0.6).abs() < 1e-12, "{rho:?}");
        let md = markdown(&r);
        assert!(md.contains("over 4 rows: **0.600**"), "{md}");
        assert!(md.contains("d_model ÷ 4"), "{md}");
        let line = |row: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| {row} ")))
                .unwrap_or_else(|| panic!("no row {row} in {md}"))
                .to_string()
        };
        assert_eq!(
            line("base"),
            "| base | 6 | 512 | 2048 | 8 | 64 | 64 | 0.1 | 0.1 | 100K / 1500 | 4.92 / 20.00 \
             | 25.8 / 10.0 | 65 / 4.2 |"
        );
        // Settings equal to base's are blank; a blank params cell of the paper's shows (65).
        assert_eq!(
            line("C5"),
            "| C5 |  | 1024 |  |  | 128 | 128 |  |  | 100K / 1500 | 4.66 / 25.00 | 26.0 / 9.0 \
             | 168 / 4.2 |"
        );
        assert_eq!(
            line("A1"),
            "| A1 |  |  |  | 1 | 512 | 512 |  |  | 100K / — | 5.29 / — | 24.9 / — | (65) / — |"
        );
        assert!(
            line("big")
                .contains("| 16 |  |  | 0.3 |  | 300K / — | 4.33 / — | 26.4 / — | 213 / — |")
        );
        assert!(line("E (learned positions)").contains("4.92 / —"));
        assert_eq!(md.matches("\n| ").count(), 21, "a header and 20 rows: {md}");
    }

    #[test]
    fn chart_has_both_series() {
        let r = results(&[("base", 20.0, 10.0), ("C1", 30.0, 5.0)]);
        let dir = tempfile::tempdir().unwrap();
        write(&r, dir.path()).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("table3-ppl.svg")).unwrap();
        assert!(svg.starts_with("<svg "), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 20 + 2);
        assert!(svg.contains("<title>C1 ours: 30.00</title>"), "{svg}");
        assert!(svg.contains("<title>big paper: 4.33</title>"), "{svg}");
        assert!(dir.path().join("table3.md").exists());
    }

    #[test]
    fn bad_results_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        std::fs::write(
            &path,
            r#"{"scale": "reduced", "rows": {"F9": {"steps": 1, "ppl": 5, "bleu": 1, "params": 1}}}"#,
        )
        .unwrap();
        let m = Results::read(&path).unwrap_err().to_string();
        assert!(m.contains("rows.F9: not a row of Table 3"), "{m}");
        std::fs::write(
            &path,
            r#"{"scale": "reduced", "rows": {"A1": {"steps": 1, "ppl": 0.5, "bleu": 1, "params": 1}}}"#,
        )
        .unwrap();
        let m = Results::read(&path).unwrap_err().to_string();
        assert!(m.contains("rows.A1.ppl"), "{m}");
        std::fs::write(&path, "{\"scale\": \"x\",\n \"rowz\": {}}").unwrap();
        let m = Results::read(&path).unwrap_err().to_string();
        assert!(m.contains("line 2"), "{m}");
    }
}
