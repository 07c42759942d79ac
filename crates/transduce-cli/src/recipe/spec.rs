//! Each stage's fields read into what its kind needs: paths resolved, references turned
//! into the outputs they name, numbers checked. Every stage of a plan is read before any
//! runs, so a wrong field stops the recipe at its line, not hours in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Args, Parser};

use transduce::config::ModelConfig;

use crate::cmd::train::TrainCmd;
use transduce_train::error::Result;

use super::format::{Input, Kind, Scale};
use super::plan::{Model, Output, Plan};

/// A named set of sentence pairs (`src`, `ref`, or one `tsv`) or of treebank trees
/// (`trees`).
#[derive(Clone, Debug)]
pub struct TestSet {
    pub name: String,
    pub data: SetData,
}

#[derive(Clone, Debug)]
pub enum SetData {
    Pairs {
        src: PathBuf,
        reference: PathBuf,
    },
    /// `source<TAB>reference` lines, split into `Pairs` when the stage runs.
    Tsv(PathBuf),
    Trees(PathBuf),
}

impl SetData {
    /// The file with one line per sentence (or tree) of the set.
    pub fn lines_file(&self) -> &Path {
        match self {
            SetData::Pairs { src, .. } => src,
            SetData::Tsv(f) | SetData::Trees(f) => f,
        }
    }
}

/// A prepare stage's corpora and vocabulary, resolved.
#[derive(Clone, Debug)]
pub struct Prepare {
    pub parse: bool,
    /// Sources (or trees, for parsing) and targets, each a list of files joined in order.
    pub src: Vec<PathBuf>,
    pub tgt: Vec<PathBuf>,
    pub valid_src: Vec<PathBuf>,
    pub valid_tgt: Vec<PathBuf>,
    /// `source<TAB>target` files, split into the two sides before `transduce prepare`
    /// reads them (joined after `src`/`tgt`, so a recipe may give both).
    pub tsv: Vec<PathBuf>,
    pub valid_tsv: Vec<PathBuf>,
    pub vocab_size: Option<usize>,
    pub tokenizer: Option<PathBuf>,
    pub max_len: Option<usize>,
}

/// A second model that rescores a teacher's candidates (scripts' `DISTILL_RESCORE`): both
/// translate, every candidate is scored under both, the weighted best is kept.
#[derive(Clone, Debug)]
pub struct Rescore {
    pub model: Model,
    /// The weight of the teacher's own score; the rescoring model's is 1 − weight.
    pub weight: f64,
}

/// A stage's settings, resolved.
#[derive(Clone, Debug)]
pub enum Spec {
    Prepare(Prepare),
    Train {
        data: PathBuf,
        init: Option<Model>,
        /// The trainer's options as the recipe gives them (`max_steps = 4000`, …).
        options: BTreeMap<String, toml::Value>,
        max_steps: u64,
        /// A row of Table 3 (`row`, at `width_divisor` and `depth_divisor`): the runner writes its model
        /// config into the stage's folder and trains it with `--config`.
        row: Option<Row>,
        /// `--precision` when `recipe run --backend` is a GPU (the CPU trains in f32 only):
        /// a stage that ran in bf16 on a GPU keeps its setting and still runs on a CPU.
        gpu_precision: Option<String>,
        /// The run this one continues (`continues = "@stage"`): the runner copies its
        /// folder into this stage's and resumes it to `max_steps`, with the run's own
        /// settings (the other fields above are that run's), as a stopped run resumes.
        continues: Option<PathBuf>,
        /// How many runs this one continues through `continues` (0: a run of its own). At
        /// scale `smoke` each run of such a chain trains 2 steps past the one before.
        chain: u64,
    },
    Average {
        /// A run's newest `last` checkpoints, or else these weights (a soup).
        run: Option<PathBuf>,
        last: usize,
        inputs: Vec<PathBuf>,
    },
    Teacher {
        models: Vec<Model>,
        channel: Option<(Model, Option<f64>)>,
        rescore: Option<Rescore>,
        /// Back-translation (Sennrich et al. 2016): `src` is the target language's
        /// monolingual text and the model translates it back; the pairs are (its
        /// translation, the original).
        back: bool,
        src: Vec<PathBuf>,
        tgt: Vec<PathBuf>,
        beam: Option<usize>,
        alpha: Option<f64>,
    },
    Select {
        model: Model,
        val: Vec<TestSet>,
        beams: Vec<usize>,
        alphas: Vec<f64>,
    },
    Export {
        model: Model,
        select: Option<PathBuf>,
        parse: bool,
        source: String,
        target: String,
        dtype: String,
        beam: Option<usize>,
        alpha: Option<f64>,
        ct2: bool,
    },
    Test {
        bundle: PathBuf,
        sets: Vec<TestSet>,
    },
    Table3 {
        /// Each row and its training run.
        rows: Vec<Row>,
        src: PathBuf,
        reference: PathBuf,
        beam: usize,
        alpha: f64,
        /// What was scaled and how, printed above the table.
        note: String,
    },
}

/// A Table 3 row's model, as a train stage trains it (`run`: its folder).
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub model: ModelConfig,
    pub run: PathBuf,
}

/// The file a row's model config is written to, in the stage's folder.
pub const ROW_CONFIG_FILE: &str = "row-model.json";

/// Parses a subcommand's arguments with its own clap definition.
#[derive(Parser)]
#[command(no_binary_name = true)]
pub struct Argv<T: Args> {
    #[command(flatten)]
    pub cmd: T,
}

impl<T: Args> Argv<T> {
    /// The subcommand's options from its arguments, as its own parser reads them.
    pub fn read(args: &[String]) -> transduce_train::error::Result<T> {
        Ok(Argv::<T>::try_parse_from(args)?.cmd)
    }
}

/// Trainer options a recipe may not set: the runner sets them.
const RUNNER_OPTIONS: [&str; 7] = [
    "out", "resume", "quiet", "backend", "devices", "data", "init",
];

impl Spec {
    /// Reads stage `node` of the plan.
    pub fn read(plan: &Plan, node: usize) -> Result<Spec> {
        let (recipe, stage) = plan.stage_of(node);
        let get = |field: &str| stage.fields.get(field).map(|f| &f.value);
        let err = |field: &str, message: String| recipe.error(stage, field, message);
        let count = |field: &str| -> Result<Option<usize>> {
            match get(field) {
                None => Ok(None),
                Some(toml::Value::Integer(n)) if *n >= 1 => Ok(Some(*n as usize)),
                Some(v) => Err(err(field, format!("{v} is not a whole number ≥ 1"))),
            }
        };
        let number = |field: &str| -> Result<Option<f64>> {
            match get(field) {
                None => Ok(None),
                Some(v) => number_of(v)
                    .filter(|x| *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| err(field, format!("{v} is not a number ≥ 0"))),
            }
        };
        let text = |field: &str, default: &str| -> Result<String> {
            match get(field) {
                None => Ok(default.to_string()),
                Some(toml::Value::String(s)) => Ok(s.clone()),
                Some(v) => Err(err(field, format!("{v} is not a string"))),
            }
        };
        let flag = |field: &str| -> Result<bool> {
            match get(field) {
                None => Ok(false),
                Some(toml::Value::Boolean(b)) => Ok(*b),
                Some(v) => Err(err(field, format!("{v} is not true or false"))),
            }
        };
        let optional_files = |field: &str| -> Result<Vec<PathBuf>> {
            if stage.fields.contains_key(field) {
                plan.files(node, field)
            } else {
                Ok(Vec::new())
            }
        };
        let task_parse = |field: &str| -> Result<bool> {
            match text(field, "translate")?.as_str() {
                "translate" => Ok(false),
                "parse" => Ok(true),
                other => Err(err(
                    field,
                    format!("`{other}` is not a task; expected translate or parse"),
                )),
            }
        };
        Ok(match stage.kind {
            Kind::Prepare => {
                let parse = task_parse("task")?;
                let (src, tgt, valid_src, valid_tgt) = if parse {
                    for f in ["src", "tgt", "valid_src", "valid_tgt", "tsv", "valid_tsv"] {
                        if stage.fields.contains_key(f) {
                            return Err(err(f, "a parsing task reads `trees`".into()));
                        }
                    }
                    (
                        plan.files(node, "trees")?,
                        Vec::new(),
                        optional_files("valid_trees")?,
                        Vec::new(),
                    )
                } else {
                    for f in ["trees", "valid_trees"] {
                        if stage.fields.contains_key(f) {
                            return Err(err(f, "`trees` are for task = \"parse\"".into()));
                        }
                    }
                    let valid_src = optional_files("valid_src")?;
                    let valid_tgt = optional_files("valid_tgt")?;
                    if valid_src.is_empty() != valid_tgt.is_empty() {
                        let f = if valid_src.is_empty() {
                            "valid_tgt"
                        } else {
                            "valid_src"
                        };
                        return Err(err(f, "give valid_src and valid_tgt together".into()));
                    }
                    // A TSV stands in for src and tgt: either is then optional.
                    let has_tsv = stage.fields.contains_key("tsv");
                    let side = |field: &str| -> Result<Vec<PathBuf>> {
                        if has_tsv {
                            optional_files(field)
                        } else {
                            plan.files(node, field)
                        }
                    };
                    let (src, tgt) = (side("src")?, side("tgt")?);
                    if src.len() != tgt.len() && (src.is_empty() || tgt.is_empty()) {
                        let f = if src.is_empty() { "tgt" } else { "src" };
                        return Err(err(f, "give src and tgt together".into()));
                    }
                    (src, tgt, valid_src, valid_tgt)
                };
                let tokenizer = match stage.fields.get("tokenizer") {
                    None => None,
                    Some(_) => Some(match plan.single(node, "tokenizer")? {
                        Input::Path(p) => p,
                        Input::Stage(r) if r.sub.is_some() => {
                            plan.file(node, "tokenizer", &Input::Stage(r))?
                        }
                        Input::Stage(r) => match plan.reference_output(node, "tokenizer", &r)? {
                            Output::Prepared(d) | Output::Run(d) | Output::Bundle(d) => d,
                            Output::Weights { run, .. } => run,
                            other => {
                                return Err(plan.expected(
                                    node,
                                    "tokenizer",
                                    "a tokenizer (prepare, train or export)",
                                    &other,
                                ));
                            }
                        },
                    }),
                };
                let vocab_size = count("vocab_size")?;
                if tokenizer.is_some() && vocab_size.is_some() {
                    return Err(err(
                        "vocab_size",
                        "a reused tokenizer has its own vocabulary".into(),
                    ));
                }
                Spec::Prepare(Prepare {
                    parse,
                    src,
                    tgt,
                    valid_src,
                    valid_tgt,
                    tsv: optional_files("tsv")?,
                    valid_tsv: optional_files("valid_tsv")?,
                    vocab_size,
                    tokenizer,
                    max_len: count("max_len")?,
                })
            }
            Kind::Train if stage.fields.contains_key("continues") => {
                // Only the stop may change: the rest is the continued run's own.
                if let Some(key) = stage
                    .fields
                    .keys()
                    .find(|k| !matches!(k.as_str(), "continues" | "max_steps"))
                {
                    return Err(err(
                        key,
                        "a continued run keeps the settings of the run it continues \
                         (`continues` and `max_steps` only)"
                            .into(),
                    ));
                }
                let source = match plan.single(node, "continues")? {
                    Input::Stage(r) if r.sub.is_none() => {
                        match plan.reference_output(node, "continues", &r)? {
                            Output::Run(_) => plan.target(node, &r),
                            other => {
                                return Err(plan.expected(
                                    node,
                                    "continues",
                                    "a train stage",
                                    &other,
                                ));
                            }
                        }
                    }
                    _ => None,
                };
                let Some(source) = source else {
                    return Err(err("continues", "expected `@stage`, a train stage".into()));
                };
                let Spec::Train {
                    data,
                    init,
                    mut options,
                    max_steps: from,
                    row,
                    gpu_precision,
                    chain,
                    ..
                } = Spec::read(plan, source)?
                else {
                    unreachable!("a stage whose output is a run is a train stage")
                };
                let max_steps = match get("max_steps") {
                    Some(toml::Value::Integer(n)) if *n > 0 && *n as u64 > from => *n as u64,
                    Some(v) => {
                        return Err(err(
                            "max_steps",
                            format!("{v} does not pass the {from} steps of the run it continues"),
                        ));
                    }
                    None => return Err(plan.missing(node, "max_steps")),
                };
                options.insert("max_steps".into(), toml::Value::Integer(max_steps as i64));
                Spec::Train {
                    data,
                    init,
                    options,
                    max_steps,
                    row,
                    gpu_precision,
                    continues: Some(plan.nodes[source].dir.clone()),
                    chain: chain + 1,
                }
            }
            Kind::Train => {
                let data = match plan.single(node, "data")? {
                    Input::Path(p) => p,
                    Input::Stage(r) => match plan.reference_output(node, "data", &r)? {
                        Output::Prepared(d) if r.sub.is_none() => d,
                        other => {
                            return Err(plan.expected(
                                node,
                                "data",
                                "prepared data (a prepare stage)",
                                &other,
                            ));
                        }
                    },
                };
                let init = match stage.fields.get("init") {
                    None => None,
                    Some(_) => Some(plan.model(node, "init", &plan.single(node, "init")?)?),
                };
                let row = match get("row") {
                    None => {
                        for f in ["width_divisor", "depth_divisor"] {
                            if stage.fields.contains_key(f) {
                                return Err(err(f, "it divides a `row`'s model".into()));
                            }
                        }
                        None
                    }
                    Some(toml::Value::String(name)) => {
                        for f in ["preset", "config", "init"] {
                            if stage.fields.contains_key(f) {
                                return Err(err(f, "a `row` is the stage's model".into()));
                            }
                        }
                        let divisor = count("width_divisor")?.unwrap_or(1);
                        let depth = count("depth_divisor")?.unwrap_or(1);
                        let model = super::row::model(name, divisor, depth).map_err(|m| {
                            let field = if m.contains("not a row") {
                                "row"
                            } else if m.contains("depth_divisor") {
                                "depth_divisor"
                            } else {
                                "width_divisor"
                            };
                            err(field, m)
                        })?;
                        Some(Row {
                            name: name.clone(),
                            model,
                            run: plan.nodes[node].dir.clone(),
                        })
                    }
                    Some(v) => {
                        return Err(err(
                            "row",
                            format!("{v} is not a row name of Table 3 (\"base\", \"A1\", …)"),
                        ));
                    }
                };
                let options: BTreeMap<String, toml::Value> = stage
                    .fields
                    .iter()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "data"
                                | "init"
                                | "row"
                                | "width_divisor"
                                | "depth_divisor"
                                | "gpu_precision"
                        )
                    })
                    .map(|(k, f)| (k.clone(), f.value.clone()))
                    .collect();
                for key in options.keys() {
                    if RUNNER_OPTIONS.contains(&key.as_str()) {
                        return Err(err(
                            key,
                            "the recipe runner sets this one (--backend and --devices are \
                             `recipe run`'s options)"
                                .into(),
                        ));
                    }
                }
                let max_steps = match options.get("max_steps") {
                    Some(toml::Value::Integer(n)) if *n >= 1 => *n as u64,
                    Some(v) => return Err(err("max_steps", format!("{v} is not a step count"))),
                    None => return Err(plan.missing(node, "max_steps")),
                };
                let gpu_precision = match get("gpu_precision") {
                    None => None,
                    Some(toml::Value::String(p)) => {
                        crate::options::precision(p).map_err(|e| err("gpu_precision", e))?;
                        Some(p.clone())
                    }
                    Some(v) => return Err(err("gpu_precision", format!("{v} is not a string"))),
                };
                let spec = Spec::Train {
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
                        let field = stage
                            .fields
                            .keys()
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
                        return Err(err(&field, format!("the trainer says: {first}")));
                    }
                }
                spec
            }
            Kind::Average => {
                let (run, inputs) = if stage.fields.contains_key("run") {
                    if stage.fields.contains_key("inputs") {
                        return Err(err("inputs", "give `run` or `inputs`, not both".into()));
                    }
                    let run = match plan.single(node, "run")? {
                        Input::Path(p) => p,
                        Input::Stage(r) => match plan.reference_output(node, "run", &r)? {
                            Output::Run(d) if r.sub.is_none() => d,
                            other => {
                                return Err(plan.expected(node, "run", "a train stage", &other));
                            }
                        },
                    };
                    (Some(run), Vec::new())
                } else {
                    let mut files = Vec::new();
                    for input in plan.inputs(node, "inputs")? {
                        files.push(match &input {
                            Input::Stage(r) if r.sub.is_none() => {
                                match plan.reference_output(node, "inputs", r)? {
                                    Output::Weights { file, .. } => file,
                                    other => {
                                        return Err(plan.expected(
                                            node,
                                            "inputs",
                                            "weights (an average stage, or a file)",
                                            &other,
                                        ));
                                    }
                                }
                            }
                            _ => plan.file(node, "inputs", &input)?,
                        });
                    }
                    if files.len() < 2 {
                        return Err(err("inputs", "a soup needs two weights or more".into()));
                    }
                    (None, files)
                };
                Spec::Average {
                    run,
                    last: count("last")?.unwrap_or(5),
                    inputs,
                }
            }
            Kind::Teacher => {
                let models = plan
                    .inputs(node, "models")?
                    .iter()
                    .map(|i| plan.model(node, "models", i))
                    .collect::<Result<Vec<_>>>()?;
                let channel = match stage.fields.get("channel") {
                    None => None,
                    Some(_) => {
                        if models.len() != 1 {
                            return Err(err("channel", "a channel reranks one model".into()));
                        }
                        Some((
                            plan.model(node, "channel", &plan.single(node, "channel")?)?,
                            number("channel_weight")?,
                        ))
                    }
                };
                if channel.is_none() && stage.fields.contains_key("channel_weight") {
                    return Err(err("channel_weight", "there is no `channel`".into()));
                }
                let rescore = match stage.fields.get("rescore") {
                    None => None,
                    Some(_) => {
                        if models.len() != 1 {
                            return Err(err(
                                "rescore",
                                "a rescoring model checks one model".into(),
                            ));
                        }
                        if channel.is_some() {
                            return Err(err(
                                "rescore",
                                "give `channel` or `rescore`, not both".into(),
                            ));
                        }
                        let weight = number("rescore_weight")?.unwrap_or(0.6);
                        if weight > 1.0 {
                            return Err(err(
                                "rescore_weight",
                                format!("{weight} is the teacher's share: at most 1"),
                            ));
                        }
                        Some(Rescore {
                            model: plan.model(node, "rescore", &plan.single(node, "rescore")?)?,
                            weight,
                        })
                    }
                };
                if rescore.is_none() && stage.fields.contains_key("rescore_weight") {
                    return Err(err("rescore_weight", "there is no `rescore`".into()));
                }
                let back = flag("back")?;
                if back && stage.fields.contains_key("tgt") {
                    return Err(err(
                        "tgt",
                        "a back-translation's targets are its `src` (the monolingual text)".into(),
                    ));
                }
                Spec::Teacher {
                    models,
                    channel,
                    rescore,
                    back,
                    src: plan.files(node, "src")?,
                    tgt: optional_files("tgt")?,
                    beam: count("beam")?,
                    alpha: number("alpha")?,
                }
            }
            Kind::Select => {
                let beams = match get("beams") {
                    None => vec![4],
                    Some(v) => list(v, |x| match x {
                        toml::Value::Integer(n) if *n >= 1 => Some(*n as usize),
                        _ => None,
                    })
                    .ok_or_else(|| err("beams", format!("{v} is not a list of beam sizes")))?,
                };
                let alphas = match get("alphas") {
                    None => vec![0.6],
                    Some(v) => {
                        list(v, |x| number_of(x).filter(|a| *a >= 0.0)).ok_or_else(|| {
                            err("alphas", format!("{v} is not a list of numbers ≥ 0"))
                        })?
                    }
                };
                Spec::Select {
                    model: plan.model(node, "model", &plan.single(node, "model")?)?,
                    val: sets(plan, node, "val")?,
                    beams,
                    alphas,
                }
            }
            Kind::Export => {
                let select = match stage.fields.get("select") {
                    None => None,
                    Some(_) => match plan.single(node, "select")? {
                        Input::Stage(r) if r.sub.is_none() => {
                            match plan.reference_output(node, "select", &r)? {
                                Output::Selection(f) => Some(f),
                                other => {
                                    return Err(plan.expected(
                                        node,
                                        "select",
                                        "a select stage",
                                        &other,
                                    ));
                                }
                            }
                        }
                        input => Some(plan.file(node, "select", &input)?),
                    },
                };
                let dtype = text("dtype", "int8")?;
                if !matches!(dtype.as_str(), "int8" | "f16" | "f32") {
                    return Err(err(
                        "dtype",
                        format!("`{dtype}`: expected int8, f16 or f32"),
                    ));
                }
                let beam = count("beam")?;
                if select.is_some() && (beam.is_some() || get("alpha").is_some()) {
                    let f = if beam.is_some() { "beam" } else { "alpha" };
                    return Err(err(f, "the `select` stage chooses beam and α".into()));
                }
                Spec::Export {
                    model: plan.model(node, "model", &plan.single(node, "model")?)?,
                    select,
                    parse: task_parse("task")?,
                    source: text("source", "en")?,
                    target: text("target", "de")?,
                    dtype,
                    beam,
                    alpha: number("alpha")?,
                    ct2: flag("ct2")?,
                }
            }
            Kind::Test => {
                let bundle = match plan.single(node, "model")? {
                    Input::Stage(r) if r.sub.is_none() => {
                        match plan.reference_output(node, "model", &r)? {
                            Output::Bundle(d) => d,
                            other => {
                                return Err(plan.expected(
                                    node,
                                    "model",
                                    "an export stage (its card gets the scores)",
                                    &other,
                                ));
                            }
                        }
                    }
                    _ => {
                        return Err(err(
                            "model",
                            "expected `@stage` of an export stage (its card gets the scores)"
                                .into(),
                        ));
                    }
                };
                Spec::Test {
                    bundle,
                    sets: sets(plan, node, "sets")?,
                }
            }
            Kind::Table3 => {
                let mut rows: Vec<Row> = Vec::new();
                for input in plan.inputs(node, "rows")? {
                    let Input::Stage(r) = &input else {
                        return Err(err("rows", "expected `@stage`s of train stages".into()));
                    };
                    let target = match plan.reference_output(node, "rows", r)? {
                        Output::Run(_) if r.sub.is_none() => plan.target(node, r),
                        other => {
                            return Err(plan.expected(node, "rows", "a train stage", &other));
                        }
                    };
                    // The train stage's own reading of its row (its errors are its own).
                    let row = match target.map(|t| Spec::read(plan, t)).transpose()? {
                        Some(Spec::Train { row: Some(row), .. }) => row,
                        _ => {
                            return Err(err(
                                "rows",
                                format!("`@{}` trains no Table 3 `row`", r.stage),
                            ));
                        }
                    };
                    if rows.iter().any(|other| other.name == row.name) {
                        return Err(err("rows", format!("row {} twice", row.name)));
                    }
                    rows.push(row);
                }
                Spec::Table3 {
                    rows,
                    src: plan.file(node, "src", &plan.single(node, "src")?)?,
                    reference: plan.file(node, "ref", &plan.single(node, "ref")?)?,
                    beam: count("beam")?.unwrap_or(4),
                    alpha: number("alpha")?.unwrap_or(0.6),
                    note: text("note", "")?,
                }
            }
        })
    }

    /// The corpus files a stage reads from outside the plan (what `--dry-run` lists, so a
    /// missing download shows before a run).
    pub fn data_files(&self) -> Vec<PathBuf> {
        match self {
            Spec::Prepare(p) => [
                &p.src,
                &p.tgt,
                &p.valid_src,
                &p.valid_tgt,
                &p.tsv,
                &p.valid_tsv,
            ]
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
            Spec::Teacher { src, tgt, .. } => src.iter().chain(tgt).cloned().collect(),
            Spec::Table3 { src, reference, .. } => vec![src.clone(), reference.clone()],
            _ => Vec::new(),
        }
    }

    /// The step a train stage stops at, at a scale (0 for the other kinds).
    pub fn target_steps(&self, scale: Scale) -> u64 {
        match (self, scale) {
            (Spec::Train { chain, .. }, Scale::Smoke) => 2 * (chain + 1),
            (_, Scale::Smoke) => 2,
            (Spec::Train { max_steps, .. }, _) => *max_steps,
            _ => 0,
        }
    }

    /// `transduce train`'s arguments for this stage (a train stage), at a scale.
    pub fn train_args(&self, out: &Path, scale: Scale, resume: bool) -> Vec<String> {
        let Spec::Train {
            data,
            init,
            options,
            max_steps,
            row,
            ..
        } = self
        else {
            return Vec::new();
        };
        let mut options = options.clone();
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
            if init.is_none() && row.is_none() {
                options.insert("preset".into(), toml::Value::String("tiny".into()));
            }
        } else {
            options.insert("max_steps".into(), toml::Value::Integer(*max_steps as i64));
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
        args.extend(["--data".to_string(), data.display().to_string()]);
        if let Some(init) = init {
            let weights = init.checkpoint.as_ref().unwrap_or(&init.path);
            args.extend(["--init".to_string(), weights.display().to_string()]);
        }
        if row.is_some() {
            let config = out.join(ROW_CONFIG_FILE);
            args.extend(["--config".to_string(), config.display().to_string()]);
        }
        for (key, value) in &options {
            push_option(&mut args, key, value);
        }
        args
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

fn number_of(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(n) => Some(*n as f64),
        toml::Value::Float(x) if x.is_finite() => Some(*x),
        _ => None,
    }
}

fn list<T>(v: &toml::Value, item: impl Fn(&toml::Value) -> Option<T>) -> Option<Vec<T>> {
    match v {
        toml::Value::Array(items) if !items.is_empty() => items.iter().map(item).collect(),
        _ => None,
    }
}

/// `[{ name = "…", src = "…", ref = "…" }, …]` or `[{ name = "…", trees = "…" }, …]`.
fn sets(plan: &Plan, node: usize, field: &str) -> Result<Vec<TestSet>> {
    let (recipe, stage) = plan.stage_of(node);
    let err = |message: String| recipe.error(stage, field, message);
    let value = &stage
        .fields
        .get(field)
        .ok_or_else(|| plan.missing(node, field))?
        .value;
    let toml::Value::Array(items) = value else {
        return Err(err(
            "expected a list of sets, e.g. [{ name = \"val\", src = \"…\", ref = \"…\" }]".into(),
        ));
    };
    if items.is_empty() {
        return Err(err("an empty list".into()));
    }
    let mut out: Vec<TestSet> = Vec::new();
    for item in items {
        let toml::Value::Table(t) = item else {
            return Err(err(format!("{item} is not a table {{ name, src, ref }}")));
        };
        let path = |key: &str| -> Result<Option<PathBuf>> {
            match t.get(key) {
                None => Ok(None),
                Some(v) => {
                    let input = super::format::input(v, &plan.context.data, &recipe.dir())
                        .map_err(|e| err(format!("`{key}`: {e}")))?;
                    plan.file(node, field, &input).map(Some)
                }
            }
        };
        let name = match t.get("name") {
            Some(toml::Value::String(s))
                if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                s.clone()
            }
            _ => {
                return Err(err(
                    "each set needs a `name` of letters, digits and `_` (it names the metric)"
                        .into(),
                ));
            }
        };
        if let Some(k) = t
            .keys()
            .find(|k| !matches!(k.as_str(), "name" | "src" | "ref" | "tsv" | "trees"))
        {
            return Err(err(format!(
                "set `{name}`: no field `{k}`; a set has name and src + ref, tsv, or trees"
            )));
        }
        if out.iter().any(|s| s.name == name) {
            return Err(err(format!("two sets named `{name}`")));
        }
        let data = match (path("src")?, path("ref")?, path("tsv")?, path("trees")?) {
            (Some(src), Some(reference), None, None) => SetData::Pairs { src, reference },
            (None, None, Some(tsv), None) => SetData::Tsv(tsv),
            (None, None, None, Some(trees)) => SetData::Trees(trees),
            _ => {
                return Err(err(format!(
                    "set `{name}`: give src and ref or tsv (translation), or trees (parsing)"
                )));
            }
        };
        out.push(TestSet { name, data });
    }
    Ok(out)
}
