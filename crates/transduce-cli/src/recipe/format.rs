//! The recipe file: TOML, one `[[stage]]` table per stage, read with the line of every
//! field kept, so that what is wrong is reported at its file and line.
//!
//! ```toml
//! [recipe]
//! description = "what the recipe makes"
//!
//! [[stage]]
//! name = "data"
//! kind = "prepare"
//! src = "{data}/tatoeba-en-de/train.en.gz"
//! ...
//! ```
//!
//! A string field that starts with `@` names another stage's output: `@NAME` a stage of this
//! recipe, `@RECIPE:NAME` a stage of `RECIPE.toml` beside it, either followed by `/PATH` for
//! a file inside that output. Other strings are paths: `{data}` stands for the data folder
//! (`--data`) and a relative path is relative to the recipe's folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use transduce_train::error::{Error, Result, io};

/// What a stage does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Tokenizer and prepared data (`transduce prepare`).
    Prepare,
    /// A training run (`transduce train`), from scratch or `--init`.
    Train,
    /// The mean of a run's last checkpoints, or of several weights (`transduce average`).
    Average,
    /// A bundle or ensemble (optionally reranked by a reverse model) translating a corpus
    /// for distillation.
    Teacher,
    /// The beam × α grid on the validation sets.
    Select,
    /// A bundle (int8 by default) and optionally its CTranslate2 model.
    Export,
    /// BLEU or F1 on named test sets, written into the bundle's card.
    Test,
    /// The paper's Table 3 beside ours: each row's run scored on dev (perplexity per
    /// wordpiece, BLEU with the paper's beam 4 and α 0.6), `table3.md` and its chart.
    Table3,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Prepare,
        Kind::Train,
        Kind::Average,
        Kind::Teacher,
        Kind::Select,
        Kind::Export,
        Kind::Test,
        Kind::Table3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Prepare => "prepare",
            Kind::Train => "train",
            Kind::Average => "average",
            Kind::Teacher => "teacher",
            Kind::Select => "select",
            Kind::Export => "export",
            Kind::Test => "test",
            Kind::Table3 => "table3",
        }
    }

    fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The fields a stage of this kind takes besides `name` and `kind`; `None` for `train`,
    /// whose other fields are the trainer's options, checked by the trainer's own parser.
    pub fn fields(self) -> Option<&'static [&'static str]> {
        Some(match self {
            Kind::Prepare => &[
                "task",
                "src",
                "tgt",
                "valid_src",
                "valid_tgt",
                "trees",
                "valid_trees",
                "tsv",
                "valid_tsv",
                "vocab_size",
                "tokenizer",
                "max_len",
            ],
            Kind::Train => return None,
            Kind::Average => &["run", "last", "inputs"],
            Kind::Teacher => &[
                "models",
                "channel",
                "channel_weight",
                "rescore",
                "rescore_weight",
                "back",
                "src",
                "tgt",
                "beam",
                "alpha",
            ],
            Kind::Select => &["model", "val", "beams", "alphas"],
            Kind::Export => &[
                "model", "select", "task", "source", "target", "dtype", "beam", "alpha", "ct2",
            ],
            Kind::Test => &["model", "sets"],
            Kind::Table3 => &["rows", "src", "ref", "beam", "alpha", "note"],
        })
    }
}

/// How big a run is. `full` is a recipe as written; `paper` and `reduced` are the scales a
/// recipe may declare (`scales` in `[recipe]`) and give values for (`field = { paper = …,
/// reduced = … }`), e.g. Table 3 at the paper's size for GPUs and at one this machine
/// finishes; `smoke` runs every stage with tiny steps on a few lines of each corpus (a test
/// of the recipe, not a model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    Full,
    Paper,
    Reduced,
    Smoke,
}

impl Scale {
    pub const ALL: [Scale; 4] = [Scale::Full, Scale::Paper, Scale::Reduced, Scale::Smoke];

    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Paper => "paper",
            Scale::Reduced => "reduced",
            Scale::Smoke => "smoke",
        }
    }

    fn from_name(name: &str) -> Option<Scale> {
        Scale::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The work folder's default: `work/recipes`, or `work/recipes-SCALE` for the others,
    /// so that runs at two scales never meet.
    pub fn default_work(self) -> PathBuf {
        match self {
            Scale::Full => PathBuf::from("work/recipes"),
            s => PathBuf::from(format!("work/recipes-{}", s.name())),
        }
    }
}

fn scale_names() -> String {
    Scale::ALL.map(Scale::name).join(", ")
}

/// One field of a stage, with the line it is on.
#[derive(Clone, Debug)]
pub struct Field {
    pub value: toml::Value,
    pub line: usize,
}

/// A stage as the file gives it.
#[derive(Clone, Debug)]
pub struct Stage {
    pub name: String,
    pub kind: Kind,
    /// The line of the stage's `name`.
    pub line: usize,
    /// Its fields, `name` and `kind` aside.
    pub fields: BTreeMap<String, Field>,
}

/// A recipe file, read and checked field by field (references are checked by the plan).
#[derive(Clone, Debug)]
pub struct Recipe {
    /// The file as named.
    pub path: PathBuf,
    /// The file name without `.toml`: what other recipes call it, and its work folder.
    pub name: String,
    pub description: String,
    /// The scales it may run at (`smoke` always): `scales` in `[recipe]`, else `full`.
    pub scales: Vec<Scale>,
    /// The scale a run without `--scale` takes: `default_scale`, else the first of `scales`.
    pub default_scale: Scale,
    /// The line of `scales` (1 when the file does not give it).
    pub scales_line: usize,
    pub stages: Vec<Stage>,
}

/// A reference to another stage's output (`@NAME`, `@RECIPE:NAME`, optionally `/PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub recipe: Option<String>,
    pub stage: String,
    pub sub: Option<String>,
}

/// A field's value where a path or a reference is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Path(PathBuf),
    Stage(Reference),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDe {
    #[serde(default)]
    recipe: Option<HeaderDe>,
    #[serde(default)]
    stage: Vec<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderDe {
    #[serde(default)]
    description: String,
    #[serde(default)]
    scales: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    default_scale: Option<Spanned<String>>,
}

impl Recipe {
    /// Reads and checks a recipe file.
    pub fn read(path: &Path) -> Result<Recipe> {
        let text = std::fs::read_to_string(path).map_err(io(path))?;
        Recipe::parse(path, &text)
    }

    /// Checks a recipe's text; `path` names it in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Recipe> {
        let source = Source { path, text };
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| valid_name(s))
            .ok_or_else(|| {
                Error::Usage(format!(
                    "{}: a recipe's file name is its name: letters, digits, `-` and `_`, \
                     ending in .toml",
                    path.display()
                ))
            })?
            .to_string();
        let file: FileDe = toml::from_str(text).map_err(|e| {
            source.err(
                e.span().map_or(0, |s| s.start),
                e.message().trim().to_string(),
            )
        })?;
        if file.stage.is_empty() {
            return Err(source.err(0, "no stages: add a [[stage]] table".into()));
        }
        let header = file.recipe.as_ref();
        let (scales, scales_line) = source.scales(header)?;
        let default_scale = source.default_scale(header, &scales)?;
        let mut stages: Vec<Stage> = Vec::new();
        for table in &file.stage {
            let stage = source.stage(table, &scales, &stages)?;
            stages.push(stage);
        }
        Ok(Recipe {
            path: path.to_path_buf(),
            name,
            description: file.recipe.map(|h| h.description).unwrap_or_default(),
            scales,
            default_scale,
            scales_line,
            stages,
        })
    }

    /// The recipe at a scale: each per-scale field (`{ paper = …, reduced = … }`) becomes
    /// its value at `scale`; at `smoke` a field without a smoke value takes the default
    /// scale's (smoke's own cuts apply on top). A scale the recipe does not declare is an
    /// error at its `scales`.
    pub fn at_scale(mut self, scale: Scale) -> Result<Recipe> {
        if scale != Scale::Smoke && !self.scales.contains(&scale) {
            let names: Vec<&str> = self.scales.iter().map(|s| s.name()).collect();
            return Err(Error::Recipe {
                path: self.path.clone(),
                line: self.scales_line,
                message: format!(
                    "[recipe], field `scales`: this recipe has no scale `{}` (its scales: {}, \
                     and smoke)",
                    scale.name(),
                    names.join(", ")
                ),
            });
        }
        let fallback = self.default_scale;
        for stage in &mut self.stages {
            let mut unset = Vec::new();
            for (key, field) in stage.fields.iter_mut() {
                let toml::Value::Table(values) = &field.value else {
                    continue;
                };
                let value = values
                    .get(scale.name())
                    .or_else(|| (scale == Scale::Smoke).then(|| values.get(fallback.name()))?);
                match value {
                    Some(v) => field.value = v.clone(),
                    None => unset.push((key.clone(), field.line)),
                }
            }
            if let Some((key, line)) = unset.first() {
                return Err(Error::Recipe {
                    path: self.path.clone(),
                    line: *line,
                    message: format!(
                        "stage `{}`, field `{key}`: no value for scale `{}`",
                        stage.name,
                        scale.name()
                    ),
                });
            }
        }
        Ok(self)
    }

    /// The folder relative paths in the recipe start from.
    pub fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// An error at a stage's field.
    pub fn error(&self, stage: &Stage, field: &str, message: impl std::fmt::Display) -> Error {
        let line = stage.fields.get(field).map_or(stage.line, |f| f.line);
        Error::Recipe {
            path: self.path.clone(),
            line,
            message: format!("stage `{}`, field `{field}`: {message}", stage.name),
        }
    }
}

impl Stage {
    /// The stage's fields as JSON, for markers and provenance.
    pub fn settings(&self) -> serde_json::Value {
        let mut map = serde_json::Map::new();
        map.insert("kind".into(), self.kind.name().into());
        for (k, f) in &self.fields {
            map.insert(
                k.clone(),
                serde_json::to_value(&f.value).unwrap_or(serde_json::Value::Null),
            );
        }
        serde_json::Value::Object(map)
    }
}

/// Reads a string as a path or a reference (`@…`); `data` replaces `{data}`, `dir` anchors
/// relative paths. `Err` holds what is wrong with it.
pub fn input(value: &toml::Value, data: &Path, dir: &Path) -> std::result::Result<Input, String> {
    let toml::Value::String(s) = value else {
        return Err(format!("{value} is not a string (a path, or `@stage`)"));
    };
    if let Some(r) = s.strip_prefix('@') {
        let (head, sub) = match r.split_once('/') {
            Some((h, rest)) if !rest.is_empty() => (h, Some(rest.to_string())),
            Some(_) => return Err(format!("`{s}`: nothing after `/`")),
            None => (r, None),
        };
        let (recipe, stage) = match head.split_once(':') {
            Some((r, st)) => (Some(r.to_string()), st.to_string()),
            None => (None, head.to_string()),
        };
        if !valid_name(&stage) || recipe.as_deref().is_some_and(|r| !valid_name(r)) {
            return Err(format!(
                "`{s}` is not a reference; expected `@stage`, `@recipe:stage`, each \
                 optionally followed by `/file`"
            ));
        }
        return Ok(Input::Stage(Reference { recipe, stage, sub }));
    }
    if s.is_empty() {
        return Err("an empty path".into());
    }
    // `{data}` is a folder of its own (relative to where the command runs).
    if s.contains("{data}") {
        return Ok(Input::Path(PathBuf::from(
            s.replace("{data}", &data.to_string_lossy()),
        )));
    }
    let p = PathBuf::from(s);
    Ok(Input::Path(if p.is_absolute() { p } else { dir.join(p) }))
}

/// A field that is one input or a list of them.
pub fn inputs(
    value: &toml::Value,
    data: &Path,
    dir: &Path,
) -> std::result::Result<Vec<Input>, String> {
    match value {
        toml::Value::Array(items) if !items.is_empty() => {
            items.iter().map(|v| input(v, data, dir)).collect()
        }
        toml::Value::Array(_) => Err("an empty list".into()),
        v => Ok(vec![input(v, data, dir)?]),
    }
}

/// The references in a field's value (strings starting with `@`, in lists and tables too).
pub fn references(value: &toml::Value) -> Vec<std::result::Result<Reference, String>> {
    let mut out = Vec::new();
    collect_references(value, &mut out);
    out
}

fn collect_references(value: &toml::Value, out: &mut Vec<std::result::Result<Reference, String>>) {
    match value {
        toml::Value::String(s) if s.starts_with('@') => {
            match input(value, Path::new(""), Path::new("")) {
                Ok(Input::Stage(r)) => out.push(Ok(r)),
                Ok(Input::Path(_)) => {}
                Err(e) => out.push(Err(e)),
            }
        }
        toml::Value::Array(items) => items.iter().for_each(|v| collect_references(v, out)),
        toml::Value::Table(t) => t.values().for_each(|v| collect_references(v, out)),
        _ => {}
    }
}

/// A recipe's text and file, for errors that name the line.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn err(&self, offset: usize, message: String) -> Error {
        Error::Recipe {
            path: self.path.to_path_buf(),
            line: line_of(self.text, offset),
            message,
        }
    }

    fn header_err(&self, field: &str, offset: usize, message: String) -> Error {
        self.err(offset, format!("[recipe], field `{field}`: {message}"))
    }

    /// An error in stage `stage`'s field `field`, on `line`.
    fn field_err(&self, stage: &str, field: &str, line: usize, message: String) -> Error {
        Error::Recipe {
            path: self.path.to_path_buf(),
            line,
            message: format!("stage `{stage}`, field `{field}`: {message}"),
        }
    }

    /// `[recipe]`'s `scales` (default: full alone), each once, and the line they are on.
    fn scales(&self, header: Option<&HeaderDe>) -> Result<(Vec<Scale>, usize)> {
        let Some(list) = header.and_then(|h| h.scales.as_ref()) else {
            return Ok((vec![Scale::Full], 1));
        };
        let mut scales = Vec::new();
        for name in list.get_ref() {
            let scale = Scale::from_name(name.get_ref())
                .filter(|s| *s != Scale::Smoke)
                .ok_or_else(|| {
                    self.header_err(
                        "scales",
                        name.span().start,
                        format!(
                            "`{}` is not a scale to declare; expected full, paper or \
                             reduced (smoke is every recipe's)",
                            name.get_ref()
                        ),
                    )
                })?;
            if !scales.contains(&scale) {
                scales.push(scale);
            }
        }
        if scales.is_empty() {
            return Err(self.header_err("scales", list.span().start, "an empty list".into()));
        }
        Ok((scales, line_of(self.text, list.span().start)))
    }

    /// `[recipe]`'s `default_scale`, one of `scales` (default: the first).
    fn default_scale(&self, header: Option<&HeaderDe>, scales: &[Scale]) -> Result<Scale> {
        let Some(name) = header.and_then(|h| h.default_scale.as_ref()) else {
            return Ok(scales[0]);
        };
        Scale::from_name(name.get_ref())
            .filter(|s| scales.contains(s))
            .ok_or_else(|| {
                self.header_err(
                    "default_scale",
                    name.span().start,
                    format!(
                        "`{}` is not one of the recipe's scales ({})",
                        name.get_ref(),
                        scales
                            .iter()
                            .map(|s| s.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
    }

    /// One `[[stage]]` table: its name (not one of `before`'s) and kind, and its other
    /// fields, each with its line, checked against the kind's fields and the recipe's scales.
    fn stage(
        &self,
        table: &Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
        scales: &[Scale],
        before: &[Stage],
    ) -> Result<Stage> {
        let mut fields = BTreeMap::new();
        for (key, value) in table.get_ref() {
            fields.insert(
                key.get_ref().clone(),
                Field {
                    value: value.get_ref().clone(),
                    line: line_of(self.text, key.span().start),
                },
            );
        }
        let name_field = fields
            .remove("name")
            .ok_or_else(|| self.err(table.span().start, "a stage without a `name`".into()))?;
        let name = match &name_field.value {
            toml::Value::String(s) if valid_name(s) => s.clone(),
            v => {
                return Err(Error::Recipe {
                    path: self.path.to_path_buf(),
                    line: name_field.line,
                    message: format!(
                        "field `name`: {v} is not a stage name (letters, digits, `-`, `_`)"
                    ),
                });
            }
        };
        if let Some(first) = before.iter().find(|s| s.name == name) {
            return Err(self.field_err(
                &name,
                "name",
                name_field.line,
                format!(
                    "a second stage of this name (the first is on line {})",
                    first.line
                ),
            ));
        }
        let kind_field = fields.remove("kind").ok_or_else(|| {
            self.field_err(
                &name,
                "kind",
                name_field.line,
                format!("missing; expected one of {}", kind_names()),
            )
        })?;
        let kind = match &kind_field.value {
            toml::Value::String(s) => Kind::from_name(s),
            _ => None,
        }
        .ok_or_else(|| {
            self.field_err(
                &name,
                "kind",
                kind_field.line,
                format!(
                    "unknown stage kind {}; expected one of {}",
                    kind_field.value,
                    kind_names()
                ),
            )
        })?;
        for (key, field) in &fields {
            per_scale(&field.value, scales)
                .map_err(|message| self.field_err(&name, key, field.line, message))?;
        }
        let unknown = kind.fields().and_then(|allowed| {
            fields
                .iter()
                .find(|(k, _)| !allowed.contains(&k.as_str()))
                .map(|f| (allowed, f))
        });
        if let Some((allowed, (key, field))) = unknown {
            return Err(self.field_err(
                &name,
                key,
                field.line,
                format!(
                    "a {} stage has no such field; its fields are {}",
                    kind.name(),
                    allowed.join(", ")
                ),
            ));
        }
        Ok(Stage {
            name,
            kind,
            line: name_field.line,
            fields,
        })
    }
}

/// Checks a per-scale value (`{ paper = …, reduced = … }`): its keys are scales the recipe
/// declares (or smoke), its values plain. Other values pass.
fn per_scale(value: &toml::Value, declared: &[Scale]) -> std::result::Result<(), String> {
    let toml::Value::Table(values) = value else {
        return Ok(());
    };
    if values.is_empty() {
        return Err("an empty table; per-scale values read { reduced = …, paper = … }".into());
    }
    for (key, v) in values {
        match Scale::from_name(key) {
            None => {
                return Err(format!(
                    "`{key}` is not a scale ({}); a table here gives a value per scale",
                    scale_names()
                ));
            }
            Some(s) if s != Scale::Smoke && !declared.contains(&s) => {
                let names: Vec<&str> = declared.iter().map(|s| s.name()).collect();
                return Err(format!(
                    "scale `{key}` is not one of the recipe's ({}, and smoke); declare it in \
                     [recipe] scales",
                    names.join(", ")
                ));
            }
            Some(_) => {}
        }
        if let toml::Value::Table(_) = v {
            return Err(format!("the value for scale `{key}` is a table"));
        }
    }
    Ok(())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !s.starts_with('.')
}

fn kind_names() -> String {
    Kind::ALL.map(Kind::name).join(", ")
}

/// The 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Recipe> {
        Recipe::parse(Path::new("recipes/t.toml"), text)
    }

    fn message(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_stages_with_their_lines() {
        let r = parse(
            "[recipe]\ndescription = \"d\"\n\n[[stage]]\nname = \"data\"\nkind = \"prepare\"\n\
             src = \"a\"\n\n[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\n\
             max_steps = 3\n",
        )
        .unwrap();
        assert_eq!(r.name, "t");
        assert_eq!(r.description, "d");
        assert_eq!(r.stages.len(), 2);
        assert_eq!(r.stages[0].line, 5);
        assert_eq!(r.stages[1].kind, Kind::Train);
        assert_eq!(r.stages[1].fields["max_steps"].line, 13);
    }

    #[test]
    fn bad_recipes_name_file_line_and_field() {
        let m = message("[[stage]]\nname = \"a\"\nkind = \"bake\"\n");
        assert!(
            m.starts_with("recipes/t.toml:3: stage `a`, field `kind`"),
            "{m}"
        );
        assert!(m.contains("unknown stage kind \"bake\""), "{m}");
        let m = message("[[stage]]\nname = \"a\"\nkind = \"average\"\nrun = \"@x\"\nlats = 3\n");
        assert!(
            m.starts_with("recipes/t.toml:5: stage `a`, field `lats`"),
            "{m}"
        );
        let m = message("[[stage]]\nname = \"a\"\n");
        assert!(
            m.starts_with("recipes/t.toml:2: stage `a`, field `kind`: missing"),
            "{m}"
        );
        let m = message("[[stage]]\nkind = \"train\"\n");
        assert!(
            m.starts_with("recipes/t.toml:1: a stage without a `name`"),
            "{m}"
        );
        let m = message(
            "[[stage]]\nname = \"a\"\nkind = \"train\"\n[[stage]]\nname = \"a\"\nkind = \"train\"\n",
        );
        assert!(
            m.starts_with("recipes/t.toml:5: stage `a`, field `name`"),
            "{m}"
        );
        // TOML's own errors keep their line.
        let m = message("[[stage]]\nname = \"a\"\nkind = \n");
        assert!(m.starts_with("recipes/t.toml:3: "), "{m}");
        let m =
            message("[recipe]\ndescripton = \"x\"\n[[stage]]\nname = \"a\"\nkind = \"train\"\n");
        assert!(m.starts_with("recipes/t.toml:2: "), "{m}");
        assert!(m.contains("descripton"), "{m}");
        let m = message("[recipe]\n");
        assert!(m.contains("no stages"), "{m}");
    }

    #[test]
    fn references_and_paths() {
        let data = Path::new("/d");
        let dir = Path::new("recipes");
        let v = |s: &str| toml::Value::String(s.into());
        assert_eq!(
            input(&v("@teacher/src.txt"), data, dir),
            Ok(Input::Stage(Reference {
                recipe: None,
                stage: "teacher".into(),
                sub: Some("src.txt".into())
            }))
        );
        assert_eq!(
            input(&v("@en-de:bundle"), data, dir),
            Ok(Input::Stage(Reference {
                recipe: Some("en-de".into()),
                stage: "bundle".into(),
                sub: None
            }))
        );
        assert_eq!(
            input(&v("{data}/x.gz"), data, dir),
            Ok(Input::Path(PathBuf::from("/d/x.gz")))
        );
        assert_eq!(
            input(&v("../web/models/en-de"), data, dir),
            Ok(Input::Path(PathBuf::from("recipes/../web/models/en-de")))
        );
        assert!(input(&v("@a b"), data, dir).is_err());
        assert!(input(&v("@a/"), data, dir).is_err());
        assert!(input(&toml::Value::Integer(3), data, dir).is_err());
        let list = toml::Value::Array(vec![v("@a"), v("x")]);
        assert_eq!(inputs(&list, data, dir).unwrap().len(), 2);
        let nested: toml::Value =
            toml::from_str::<toml::Table>("v = [{ src = \"@a/x\" }, \"@b\"]").unwrap()["v"].clone();
        let refs: Vec<_> = references(&nested)
            .into_iter()
            .map(|r| r.unwrap().stage)
            .collect();
        assert_eq!(refs, ["a", "b"]);
    }
}
