//! `kind = "export"`: a bundle (int8 by default) as `transduce export` makes it, with the
//! recipe's provenance in its card and optionally its CTranslate2 model (`ct2 = true`).

use std::any::Any;
use std::path::{Path, PathBuf};

use transduce_train::error::{Error, Result, io};

use crate::cmd::{self, export::ExportCmd};

use super::super::argv::Argv;
use super::super::card::{edit_card, origin};
use super::super::format::Input;
use super::super::plan::{Model, Output, Plan};
use super::super::state;
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// An export stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Export {
    pub model: Model,
    /// A select stage's `select.json`: the beam and α the bundle decodes with.
    pub select: Option<PathBuf>,
    pub parse: bool,
    pub source: String,
    pub target: String,
    pub dtype: String,
    pub beam: Option<usize>,
    pub alpha: Option<f64>,
    pub ct2: bool,
}

/// A bundle folder.
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Bundle(plan.nodes[node].dir.join("bundle")))
}

impl Export {
    pub fn read(f: &Fields) -> Result<Export> {
        let select = match f.get("select") {
            None => None,
            Some(_) => match f.single("select")? {
                Input::Stage(r) if r.sub.is_none() => match f.reference_output("select", &r)? {
                    Output::Selection(file) => Some(file),
                    other => {
                        return Err(f.expected("select", "a select stage", &other));
                    }
                },
                input => Some(f.file("select", &input)?),
            },
        };
        let dtype = f.text("dtype", "int8")?;
        if !matches!(dtype.as_str(), "int8" | "f16" | "f32") {
            return Err(f.err("dtype", format!("`{dtype}`: expected int8, f16 or f32")));
        }
        let beam = f.count("beam")?;
        if select.is_some() && (beam.is_some() || f.get("alpha").is_some()) {
            let name = if beam.is_some() { "beam" } else { "alpha" };
            return Err(f.err(name, "the `select` stage chooses beam and α".into()));
        }
        Ok(Export {
            model: f.model("model")?,
            select,
            parse: f.task_parse("task")?,
            source: f.text("source", "en")?,
            target: f.text("target", "de")?,
            dtype,
            beam,
            alpha: f.number("alpha")?,
            ct2: f.flag("ct2")?,
        })
    }
}

impl Spec for Export {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let (plan, node) = (at.plan, at.node);
        let bundle = at.dir.join("bundle");
        let mut args = vec![
            "--model".to_string(),
            self.model.path.display().to_string(),
            "--out".into(),
            bundle.display().to_string(),
            "--task".into(),
            if self.parse { "parse" } else { "translate" }.into(),
            "--source".into(),
            self.source.clone(),
            "--target".into(),
            self.target.clone(),
            "--command".into(),
            at.options.command.clone(),
        ];
        if let Some(c) = &self.model.checkpoint {
            args.extend(["--checkpoint".into(), c.display().to_string()]);
        }
        match self.dtype.as_str() {
            "int8" => args.push("--int8".into()),
            "f16" => args.push("--f16".into()),
            _ => {}
        }
        let (mut beam, mut alpha) = (self.beam, self.alpha);
        if let Some(file) = &self.select {
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
        // The provenance: this stage and every stage it came from, as the recipes say; the
        // recipe's description becomes the card's notes (how to run it for real).
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
        if self.ct2 {
            ct2_export(&bundle, &at.dir.join("ct2"))?;
        }
        Ok(())
    }

    fn cost(&self, _at: &CostAt) -> Option<(f64, &'static str)> {
        Some((2.0, "seconds"))
    }

    /// The bundle's files, and with `ct2` its CTranslate2 model.
    fn output_check(&self, plan: &Plan, node: usize) -> Result<Option<String>> {
        let mut files = state::output_files(&plan.output(node)?);
        if self.ct2 {
            files.push(plan.nodes[node].dir.join("ct2/model.bin"));
        }
        Ok(state::missing(&files))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The CTranslate2 exporter, carried by the binary: written out and run by `ct2_export`, so
/// the stage works from any folder (scripts/ct2.py imports the same file).
const CT2_EXPORTER: &str = include_str!("ct2_export.py");

/// The CTranslate2 model of a bundle, by the carried exporter (`ct2_export.py`: CTranslate2's
/// own converter API); its Python is `TRANSDUCE_CT2_PYTHON`, else the one `scripts/test.sh`
/// installs, else `python3`.
fn ct2_export(bundle: &Path, out: &Path) -> Result<()> {
    // This process's own file: two exports at once do not share one.
    let script =
        std::env::temp_dir().join(format!("transduce-ct2-export-{}.py", std::process::id()));
    std::fs::write(&script, CT2_EXPORTER).map_err(io(&script))?;
    let python = std::env::var_os("TRANSDUCE_CT2_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            let venv = PathBuf::from(home).join(".cache/transduce-tools/ct2-venv/bin/python");
            venv.exists().then_some(venv)
        })
        .unwrap_or_else(|| PathBuf::from("python3"));
    eprintln!("CTranslate2 export: {} ct2_export.py", python.display());
    let status = std::process::Command::new(&python)
        .arg(&script)
        .arg("--bundle")
        .arg(bundle)
        .arg("--out")
        .arg(out)
        .status();
    let _ = std::fs::remove_file(&script);
    let status = status.map_err(io(&python))?;
    if !status.success() {
        return Err(Error::Usage(format!(
            "the CTranslate2 export failed ({status}); it needs ctranslate2, tokenizers, \
             safetensors and numpy in {} (`source scripts/common.sh && ensure_ct2`, or set \
             TRANSDUCE_CT2_PYTHON)",
            python.display()
        )));
    }
    Ok(())
}
