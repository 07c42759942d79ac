//! `kind = "average"`: the mean of a run's newest `last` checkpoints (§6.1's averaging), or
//! of several weights (a soup), as `transduce average` makes it.

use std::any::Any;
use std::path::{Path, PathBuf};

use transduce_train::checkpoint_mean;
use transduce_train::error::Result;

use super::super::format::Input;
use super::super::plan::{Output, Plan};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// An average stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Average {
    /// A run's newest `last` checkpoints, or else these weights (a soup).
    pub run: Option<PathBuf>,
    pub last: usize,
    pub inputs: Vec<PathBuf>,
}

/// Averaged weights of the architecture of the run its first input comes from.
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    let (_, stage) = plan.stage_of(node);
    let field = if stage.fields.contains_key("run") {
        "run"
    } else {
        "inputs"
    };
    let first = plan.inputs(node, field)?.into_iter().next();
    let run = match first {
        Some(Input::Stage(r)) => match plan.reference_output(node, field, &r)? {
            Output::Run(d) | Output::Weights { run: d, .. } => d,
            other => return Err(plan.expected(node, field, "a run", &other)),
        },
        Some(Input::Path(p)) => run_of_weights(&p),
        None => return Err(plan.missing(node, "run")),
    };
    Ok(Output::Weights {
        run,
        file: plan.nodes[node].dir.join("averaged.safetensors"),
    })
}

/// The run folder that weights in it belong to: `RUN/checkpoints/step-N/model.safetensors`
/// or `RUN/averaged.safetensors`; a bundle or other folder is its own.
fn run_of_weights(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    while let Some(parent) = p.parent() {
        if p.join(transduce_train::train::RUN_FILE).exists() {
            return p;
        }
        p = parent.to_path_buf();
    }
    path.to_path_buf()
}

impl Average {
    pub fn read(f: &Fields) -> Result<Average> {
        let (run, inputs) = if f.has("run") {
            if f.has("inputs") {
                return Err(f.err("inputs", "give `run` or `inputs`, not both".into()));
            }
            let run = match f.single("run")? {
                Input::Path(p) => p,
                Input::Stage(r) => match f.reference_output("run", &r)? {
                    Output::Run(d) if r.sub.is_none() => d,
                    other => {
                        return Err(f.expected("run", "a train stage", &other));
                    }
                },
            };
            (Some(run), Vec::new())
        } else {
            let mut files = Vec::new();
            for input in f.inputs("inputs")? {
                files.push(match &input {
                    Input::Stage(r) if r.sub.is_none() => match f.reference_output("inputs", r)? {
                        Output::Weights { file, .. } => file,
                        other => {
                            return Err(f.expected(
                                "inputs",
                                "weights (an average stage, or a file)",
                                &other,
                            ));
                        }
                    },
                    _ => f.file("inputs", &input)?,
                });
            }
            if files.len() < 2 {
                return Err(f.err("inputs", "a soup needs two weights or more".into()));
            }
            (None, files)
        };
        Ok(Average {
            run,
            last: f.count("last")?.unwrap_or(5),
            inputs,
        })
    }
}

impl Spec for Average {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let out = at.dir.join("averaged.safetensors");
        match &self.run {
            Some(run) => {
                let last = if at.smoke() {
                    self.last.min(2)
                } else {
                    self.last
                };
                let steps = checkpoint_mean::average(run, last, &out)?;
                eprintln!("averaged steps {steps:?} into {}", out.display());
            }
            None => {
                checkpoint_mean::average_files(&self.inputs, &out)?;
                eprintln!(
                    "averaged {} weights into {}",
                    self.inputs.len(),
                    out.display()
                );
            }
        }
        Ok(())
    }

    fn cost(&self, _at: &CostAt) -> Option<(f64, &'static str)> {
        Some((2.0, "seconds"))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
