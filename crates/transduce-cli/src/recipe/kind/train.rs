//! `kind = "train"`: a training run (`transduce train`), from scratch, from `init`, as a
//! row of Table 3 (`row`), or continuing another stage's run (`continues`). Its other
//! fields are the trainer's options, checked by the trainer's own parser at every scale.

use std::any::Any;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;

use transduce_train::backend::Backend;
use transduce_train::error::{Error, Result, io};
use transduce_train::{fsutil, train};

use crate::cmd::{self, train::TrainCmd};

use super::super::argv::Argv;
use super::super::cost::{
    TARGET_FILL, batch_target_tokens, measured_seconds_per_step, model_params, preset_params,
    tokens_per_second,
};
use super::super::format::{Input, Scale};
use super::super::plan::{Model, Output, Plan};
use super::super::row::Row;
use super::super::state::{MARKER_FILE, State};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// The file a row's model config is written to, in the stage's folder.
pub const ROW_CONFIG_FILE: &str = "row-model.json";

/// Trainer options a recipe may not set: the runner sets them.
const RUNNER_OPTIONS: [&str; 7] = [
    "out", "resume", "quiet", "backend", "devices", "data", "init",
];

/// A train stage's settings, resolved.
#[derive(Clone, Debug)]
pub struct Train {
    pub data: PathBuf,
    pub init: Option<Model>,
    /// The trainer's options as the recipe gives them (`max_steps = 4000`, …).
    pub options: BTreeMap<String, toml::Value>,
    pub max_steps: u64,
    /// A row of Table 3 (`row`, at `width_divisor` and `depth_divisor`): the runner writes
    /// its model config into the stage's folder and trains it with `--config`.
    pub row: Option<Row>,
    /// `--precision` when `recipe run --backend` is a GPU (the CPU trains in f32 only):
    /// a stage that ran in bf16 on a GPU keeps its setting and still runs on a CPU.
    pub gpu_precision: Option<String>,
    /// The run this one continues (`continues = "@stage"`): the runner copies its folder
    /// into this stage's and resumes it to `max_steps`, with the run's own settings (the
    /// other fields above are that run's), as a stopped run resumes.
    pub continues: Option<PathBuf>,
    /// How many runs this one continues through `continues` (0: a run of its own). At
    /// scale `smoke` each run of such a chain trains 2 steps past the one before.
    pub chain: u64,
}

/// A training run folder (its newest checkpoint is the model).
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Run(plan.nodes[node].dir.clone()))
}

impl Train {
    pub fn read(f: &Fields) -> Result<Train> {
        if f.has("continues") {
            return Train::read_continued(f);
        }
        let data = match f.single("data")? {
            Input::Path(p) => p,
            Input::Stage(r) => match f.reference_output("data", &r)? {
                Output::Prepared(d) if r.sub.is_none() => d,
                other => {
                    return Err(f.expected("data", "prepared data (a prepare stage)", &other));
                }
            },
        };
        let init = match f.get("init") {
            None => None,
            Some(_) => Some(f.model("init")?),
        };
        let row = match f.get("row") {
            None => {
                for name in ["width_divisor", "depth_divisor"] {
                    if f.has(name) {
                        return Err(f.err(name, "it divides a `row`'s model".into()));
                    }
                }
                None
            }
            Some(toml::Value::String(name)) => {
                for field in ["preset", "config", "init"] {
                    if f.has(field) {
                        return Err(f.err(field, "a `row` is the stage's model".into()));
                    }
                }
                let divisor = f.count("width_divisor")?.unwrap_or(1);
                let depth = f.count("depth_divisor")?.unwrap_or(1);
                let model = super::super::row::model(name, divisor, depth).map_err(|m| {
                    let field = if m.contains("not a row") {
                        "row"
                    } else if m.contains("depth_divisor") {
                        "depth_divisor"
                    } else {
                        "width_divisor"
                    };
                    f.err(field, m)
                })?;
                Some(Row {
                    name: name.clone(),
                    model,
                    run: f.dir(),
                })
            }
            Some(v) => {
                return Err(f.err(
                    "row",
                    format!("{v} is not a row name of Table 3 (\"base\", \"A1\", …)"),
                ));
            }
        };
        let options: BTreeMap<String, toml::Value> = f
            .values()
            .filter(|(k, _)| {
                !matches!(
                    k.as_str(),
                    "data" | "init" | "row" | "width_divisor" | "depth_divisor" | "gpu_precision"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for key in options.keys() {
            if RUNNER_OPTIONS.contains(&key.as_str()) {
                return Err(f.err(
                    key,
                    "the recipe runner sets this one (--backend and --devices are \
                     `recipe run`'s options)"
                        .into(),
                ));
            }
        }
        let max_steps = match options.get("max_steps") {
            Some(toml::Value::Integer(n)) if *n >= 1 => *n as u64,
            Some(v) => return Err(f.err("max_steps", format!("{v} is not a step count"))),
            None => return Err(f.missing("max_steps")),
        };
        let gpu_precision = match f.get("gpu_precision") {
            None => None,
            Some(toml::Value::String(p)) => {
                crate::options::precision(p).map_err(|e| f.err("gpu_precision", e))?;
                Some(p.clone())
            }
            Some(v) => return Err(f.err("gpu_precision", format!("{v} is not a string"))),
        };
        let spec = Train {
            data,
            init,
            options,
            max_steps,
            row,
            gpu_precision,
            continues: None,
            chain: 0,
        };
        // The trainer's own parser checks every option, at both scales.
        for scale in [Scale::Full, Scale::Smoke] {
            let args = spec.train_args(Path::new("out"), scale, false);
            if let Err(e) = Argv::<TrainCmd>::try_parse_from(&args) {
                let rendered = e.render().to_string();
                let first = rendered
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
                    .to_string();
                let field = f
                    .names()
                    .find(|k| {
                        // The option the trainer's error line names, whole.
                        let flag = format!("--{}", k.replace('_', "-"));
                        first.match_indices(&flag).any(|(i, _)| {
                            !first[i + flag.len()..]
                                .starts_with(|c: char| c.is_alphanumeric() || c == '-')
                        })
                    })
                    .cloned()
                    .unwrap_or_else(|| "max_steps".into());
                return Err(f.err(&field, format!("the trainer says: {first}")));
            }
        }
        Ok(spec)
    }

    /// `continues = "@stage"`: only the stop may change, the rest is the continued run's.
    fn read_continued(f: &Fields) -> Result<Train> {
        if let Some(key) = f
            .names()
            .find(|k| !matches!(k.as_str(), "continues" | "max_steps"))
        {
            return Err(f.err(
                key,
                "a continued run keeps the settings of the run it continues \
                 (`continues` and `max_steps` only)"
                    .into(),
            ));
        }
        let source = match f.single("continues")? {
            Input::Stage(r) if r.sub.is_none() => match f.reference_output("continues", &r)? {
                Output::Run(_) => f.target(&r),
                other => {
                    return Err(f.expected("continues", "a train stage", &other));
                }
            },
            _ => None,
        };
        let Some(source) = source else {
            return Err(f.err("continues", "expected `@stage`, a train stage".into()));
        };
        // A stage whose output is a run is a train stage: its settings, with a later stop.
        let mut run = Train::read(&f.of(source))?;
        let from = run.max_steps;
        run.max_steps = match f.get("max_steps") {
            Some(toml::Value::Integer(n)) if *n > 0 && *n as u64 > from => *n as u64,
            Some(v) => {
                return Err(f.err(
                    "max_steps",
                    format!("{v} does not pass the {from} steps of the run it continues"),
                ));
            }
            None => return Err(f.missing("max_steps")),
        };
        run.options.insert(
            "max_steps".into(),
            toml::Value::Integer(run.max_steps as i64),
        );
        run.continues = Some(f.plan.nodes[source].dir.clone());
        run.chain += 1;
        Ok(run)
    }

    /// `transduce train`'s arguments for this stage, at a scale.
    pub fn train_args(&self, out: &Path, scale: Scale, resume: bool) -> Vec<String> {
        let mut options = self.options.clone();
        if scale == Scale::Smoke {
            // Tiny steps: two of them (two more for each run continued), a checkpoint
            // each, small batches; the tiny preset for a model from scratch (one from
            // --init keeps its architecture).
            let steps = self.target_steps(scale);
            options.insert("max_steps".into(), toml::Value::Integer(steps as i64));
            options.insert("checkpoint_steps".into(), toml::Value::Integer(1));
            options.remove("max_minutes");
            options.remove("max_epochs");
            options.remove("config");
            options.remove("accum");
            let cap = |options: &mut BTreeMap<String, toml::Value>, key: &str, max: i64| {
                let v = match options.get(key) {
                    Some(toml::Value::Integer(n)) => (*n).min(max),
                    _ => max,
                };
                options.insert(key.into(), toml::Value::Integer(v));
            };
            cap(&mut options, "max_tokens", 600);
            cap(&mut options, "warmup", 10);
            if self.init.is_none() && self.row.is_none() {
                options.insert("preset".into(), toml::Value::String("tiny".into()));
            }
        } else {
            options.insert(
                "max_steps".into(),
                toml::Value::Integer(self.max_steps as i64),
            );
        }
        let mut args = vec!["--out".to_string(), out.display().to_string()];
        if resume {
            args.push("--resume".into());
            // Stop conditions may change on resume; the rest is the run's own.
            for key in ["max_steps", "max_minutes", "max_epochs"] {
                if let Some(v) = options.get(key) {
                    push_option(&mut args, key, v);
                }
            }
            return args;
        }
        args.extend(["--data".to_string(), self.data.display().to_string()]);
        if let Some(init) = &self.init {
            let weights = init.checkpoint.as_ref().unwrap_or(&init.path);
            args.extend(["--init".to_string(), weights.display().to_string()]);
        }
        if self.row.is_some() {
            let config = out.join(ROW_CONFIG_FILE);
            args.extend(["--config".to_string(), config.display().to_string()]);
        }
        for (key, value) in &options {
            push_option(&mut args, key, value);
        }
        args
    }

    /// The parameters of the model this stage's `init` names, before it is built: walked
    /// back through the stages that make it (an average or export of a run, a run
    /// continued from another) to the first that names its architecture (a preset, a
    /// Table 3 row) or whose model is already built.
    fn planned_params(at: &CostAt) -> Option<f64> {
        let (plan, node) = (at.plan, at.node);
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
            let train = (at.spec_of)(n).as_any().downcast_ref::<Train>();
            if n != node
                && let Some(t) = train
            {
                if let Some(row) = &t.row {
                    return Some(row.params());
                }
                if let Some(toml::Value::String(p)) = t.options.get("preset") {
                    return preset_params(p);
                }
            }
            next = match train {
                Some(Train {
                    continues: Some(_), ..
                }) => made_by(Some("continues")),
                Some(Train { init: Some(m), .. }) if n != node => {
                    if let Some(params) = model_params(m) {
                        return Some(params);
                    }
                    made_by(Some("init"))
                }
                Some(_) if n == node => made_by(Some("init")),
                // A stage of the default architecture (`base`).
                Some(_) => return preset_params("base"),
                // An average, export or selection: the model of its first input.
                None => made_by(None),
            };
        }
        None
    }
}

impl Spec for Train {
    fn run(&self, at: &At, resume: bool) -> Result<()> {
        let dir = &at.dir;
        // A continued run starts as the run it continues, stopped: its folder, resumed.
        let resume = match &self.continues {
            Some(source) if !resume => {
                copy_run(source, dir)?;
                true
            }
            _ => resume,
        };
        if let Some(row) = &self.row
            && !resume
        {
            let json = serde_json::to_string_pretty(&row.model).expect("a config serializes");
            fsutil::write_atomic(&dir.join(ROW_CONFIG_FILE), json.as_bytes())?;
        }
        let mut args = self.train_args(dir, at.scale, resume);
        if let Some(p) = &self.gpu_precision
            && at.options.backend != Backend::Cpu
            && !resume
        {
            args.extend(["--precision".into(), p.clone()]);
        }
        args.extend(["--backend".into(), at.options.backend_arg()]);
        if !at.options.devices.is_empty() {
            let devices: Vec<String> = at.options.devices.iter().map(usize::to_string).collect();
            args.extend(["--devices".into(), devices.join(",")]);
        }
        cmd::train::run(Argv::<TrainCmd>::read(&args)?)
    }

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        let (plan, node, smoke) = (at.plan, at.node, at.smoke());
        let scale = plan.context.scale;
        let target = self.target_steps(scale);
        let continued = || {
            let source = plan.nodes[node]
                .deps
                .iter()
                .find(|(_, f)| f == "continues")?;
            Some((at.spec_of)(source.0).target_steps(scale))
        };
        let from = match at.state {
            State::Resume(step) => *step,
            _ => continued().unwrap_or(0),
        };
        let dir = &plan.nodes[node].dir;
        // A continued run, not begun, steps as the run it continues did.
        if let Some(per_step) = measured_seconds_per_step(dir).or_else(|| {
            self.continues
                .as_deref()
                .and_then(measured_seconds_per_step)
        }) {
            return Some(((target - from.min(target)) as f64 * per_step, "measured"));
        }
        let params = if let Some(row) = &self.row {
            row.params()
        } else if smoke {
            self.init
                .as_ref()
                .and_then(model_params)
                .or_else(|| preset_params("tiny"))?
        } else {
            match (self.options.get("preset"), &self.init) {
                (Some(toml::Value::String(p)), _) => preset_params(p)?,
                // A start not built yet has the architecture of the stage that makes it.
                (None, Some(m)) => model_params(m).or_else(|| Train::planned_params(at))?,
                _ => preset_params("base")?,
            }
        };
        let max_tokens = match self.options.get("max_tokens") {
            Some(toml::Value::Integer(n)) if !smoke => *n as usize,
            _ if smoke => 600,
            _ => 25_000,
        };
        let accum = match self.options.get("accum") {
            Some(toml::Value::Integer(n)) if !smoke => *n as f64,
            _ => 1.0,
        };
        let tokens =
            batch_target_tokens(&self.data, max_tokens).unwrap_or(max_tokens as f64 * TARGET_FILL);
        let per_step = tokens * accum / tokens_per_second(params);
        Some((
            (target - from.min(target)) as f64 * per_step,
            "from the model's size",
        ))
    }

    fn target_steps(&self, scale: Scale) -> u64 {
        match scale {
            Scale::Smoke => 2 * (self.chain + 1),
            _ => self.max_steps,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn push_option(args: &mut Vec<String>, key: &str, value: &toml::Value) {
    let flag = format!("--{}", key.replace('_', "-"));
    match value {
        toml::Value::Boolean(true) => args.push(flag),
        toml::Value::Boolean(false) => {}
        toml::Value::String(s) => args.extend([flag, s.clone()]),
        toml::Value::Array(items) => {
            let joined: Vec<String> = items.iter().map(plain).collect();
            args.extend([flag, joined.join(",")]);
        }
        v => args.extend([flag, plain(v)]),
    }
}

/// A value as the command line writes it (strings without quotes).
fn plain(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
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
            if name == train::RUN_FILE || name == MARKER_FILE {
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
