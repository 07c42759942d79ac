//! Whether a stage is done: its marker (`stage.json` in its folder) records the settings
//! and the inputs it ran with, and its output must exist and check out. A rerun of a recipe
//! therefore continues where it stopped: done stages are skipped, a training run resumes
//! from its newest checkpoint, an unfinished stage of another kind runs again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use transduce_train::error::{Result, io};
use transduce_train::{fsutil, prepared, train};

use super::format::Kind;
use super::plan::{Output, Plan};

pub const MARKER_FILE: &str = "stage.json";

/// What a stage ran with, and whether it finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub recipe: String,
    pub stage: String,
    pub scale: String,
    /// The stage's fields (a train stage's stop conditions aside: a run may be extended).
    pub settings: serde_json::Value,
    /// Each input stage's id when this stage started.
    pub inputs: BTreeMap<String, String>,
    /// A fresh id each time the stage finishes: the stages after it compare it with theirs.
    pub id: String,
    pub done: bool,
}

impl Marker {
    pub fn read(dir: &Path) -> Option<Marker> {
        let text = std::fs::read_to_string(dir.join(MARKER_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let json = serde_json::to_string_pretty(self).expect("a marker serializes");
        fsutil::write_atomic(&dir.join(MARKER_FILE), json.as_bytes())
    }
}

/// Where a stage stands.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Done,
    /// Nothing there yet.
    Todo,
    /// A training run stopped at this step: it resumes.
    Resume(u64),
    /// Left unfinished, or made from other settings or inputs: made again.
    Redo(String),
    /// A training run that this recipe cannot continue: it is not thrown away.
    Refused(String),
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            State::Done => write!(f, "done"),
            State::Todo => write!(f, "to do"),
            State::Resume(step) => write!(f, "resumes at step {step}"),
            State::Redo(why) => write!(f, "to redo ({why})"),
            State::Refused(why) => write!(f, "refused: {why}"),
        }
    }
}

/// The settings a marker records for a stage.
pub fn settings(plan: &Plan, node: usize) -> serde_json::Value {
    let (_, stage) = plan.stage_of(node);
    let mut settings = stage.settings();
    if stage.kind == Kind::Train
        && let Some(map) = settings.as_object_mut()
    {
        for key in ["max_steps", "max_minutes", "max_epochs"] {
            map.remove(key);
        }
    }
    settings
}

/// The ids of a stage's inputs now; `None` where an input is still to run.
pub fn input_ids(plan: &Plan, node: usize, pending: &[bool]) -> Option<BTreeMap<String, String>> {
    let mut ids = BTreeMap::new();
    for (dep, _) in &plan.nodes[node].deps {
        if pending[*dep] {
            return None;
        }
        let marker = Marker::read(&plan.nodes[*dep].dir)?;
        // Named from the stage's own recipe, not the plan's root: the same stage has the
        // same inputs whichever recipe's run finds it (en-de's plan runs de-en-free's
        // stages, and a later run of de-en-free must find them done).
        let (recipe, stage) = plan.stage_of(*dep);
        let key = if plan.nodes[*dep].recipe == plan.nodes[node].recipe {
            stage.name.clone()
        } else {
            format!("{}:{}", recipe.name, stage.name)
        };
        ids.insert(key, marker.id);
    }
    Some(ids)
}

/// Where stage `node` stands; `pending[n]` says whether stage n will run before it. A
/// train stage is done at `target_steps`; a finished stage of another kind when
/// `output_check` (its kind's) finds nothing wrong with its output.
pub fn state(
    plan: &Plan,
    node: usize,
    target_steps: u64,
    output_check: impl FnOnce() -> Result<Option<String>>,
    pending: &[bool],
) -> Result<State> {
    let dir = &plan.nodes[node].dir;
    let (recipe, stage) = plan.stage_of(node);
    let train = stage.kind == Kind::Train;
    let Some(marker) = Marker::read(dir) else {
        let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
        return Ok(if empty {
            State::Todo
        } else if train && dir.join(train::RUN_FILE).exists() {
            State::Refused(format!(
                "{} holds a run this stage did not start; move it away",
                dir.display()
            ))
        } else {
            State::Redo("leftovers without a marker".into())
        });
    };
    let changed = if marker.recipe != recipe.name || marker.stage != stage.name {
        Some(format!(
            "it belongs to stage {}:{}",
            marker.recipe, marker.stage
        ))
    } else if marker.scale != plan.context.scale.name() {
        Some(format!("it ran at scale {}", marker.scale))
    } else if marker.settings != settings(plan, node) {
        Some("its settings changed".to_string())
    } else if input_ids(plan, node, pending).as_ref() != Some(&marker.inputs) {
        Some("an input was made again".to_string())
    } else {
        None
    };
    if train {
        let run_started = dir.join(train::RUN_FILE).exists();
        if let Some(why) = changed {
            return Ok(if run_started {
                State::Refused(format!(
                    "{why} since {} was trained; move it away to train anew",
                    dir.display()
                ))
            } else {
                State::Redo(why)
            });
        }
        if !run_started {
            return Ok(State::Redo("the run never started".into()));
        }
        // A run stopped before its first checkpoint has nothing to resume from.
        let Some(step) = train::checkpoint::list(dir)?.last().map(|(step, _)| *step) else {
            return Ok(State::Redo("it stopped before its first checkpoint".into()));
        };
        return Ok(if step >= target_steps && marker.done {
            State::Done
        } else {
            State::Resume(step)
        });
    }
    if let Some(why) = changed {
        return Ok(State::Redo(why));
    }
    if !marker.done {
        return Ok(State::Redo("it did not finish".into()));
    }
    match output_check()? {
        None => Ok(State::Done),
        Some(why) => Ok(State::Redo(why)),
    }
}

/// The files an output must hold (a kind may ask for more: an export's CTranslate2 model).
pub fn output_files(output: &Output) -> Vec<PathBuf> {
    match output {
        Output::Prepared(d) => vec![
            d.join(transduce::bundle::TOKENIZER_FILE),
            d.join(prepared::TRAIN_FILE),
        ],
        Output::Run(d) => vec![d.join(train::RUN_FILE)],
        Output::Weights { file, .. } => vec![file.clone()],
        Output::Corpus(d) => vec![d.join("src.txt"), d.join("tgt.txt")],
        Output::Selection(f) | Output::Scores(f) => vec![f.clone()],
        Output::Bundle(d) => vec![
            d.join(transduce::bundle::CONFIG_FILE),
            d.join(transduce::bundle::TOKENIZER_FILE),
            d.join(transduce::bundle::WEIGHTS_FILE),
        ],
        Output::Report(d) => vec![
            d.join(crate::table3::RESULTS_FILE),
            d.join(crate::table3::MARKDOWN_FILE),
            d.join(crate::table3::CHART_FILE),
        ],
    }
}

/// The first of `files` that is missing, said so.
pub fn missing(files: &[PathBuf]) -> Option<String> {
    files
        .iter()
        .find(|p| !p.exists())
        .map(|p| format!("{} is missing", p.display()))
}

/// A new id for a finished stage.
pub fn fresh_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{:x}", std::process::id())
}
