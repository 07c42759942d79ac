//! A stage's fields as its kind reads them: every reading error names the recipe's file,
//! the field's line, the stage and the field (`FILE:LINE: stage `x`, field `y`: …`).

use std::path::PathBuf;

use transduce_train::error::{Error, Result};

use super::super::format::{Input, Recipe, Reference, Stage};
use super::super::plan::{Model, Output, Plan};

/// A stage's fields as its kind reads them; each error names the recipe's file, the
/// field's line, the stage and the field.
pub struct Fields<'a> {
    pub plan: &'a Plan,
    pub node: usize,
    recipe: &'a Recipe,
    pub(super) stage: &'a Stage,
}

impl<'a> Fields<'a> {
    pub(super) fn new(plan: &'a Plan, node: usize) -> Fields<'a> {
        let (recipe, stage) = plan.stage_of(node);
        Fields {
            plan,
            node,
            recipe,
            stage,
        }
    }

    /// The stage's fields of another node of the plan (a continued run's, a row's).
    pub fn of(&self, node: usize) -> Fields<'a> {
        Fields::new(self.plan, node)
    }

    pub fn get(&self, field: &str) -> Option<&'a toml::Value> {
        self.stage.fields.get(field).map(|f| &f.value)
    }

    pub fn has(&self, field: &str) -> bool {
        self.stage.fields.contains_key(field)
    }

    /// The fields' names, in order.
    pub fn names(&self) -> impl Iterator<Item = &'a String> {
        self.stage.fields.keys()
    }

    /// The fields' names and values, in order.
    pub fn values(&self) -> impl Iterator<Item = (&'a String, &'a toml::Value)> {
        self.stage.fields.iter().map(|(k, f)| (k, &f.value))
    }

    pub fn err(&self, field: &str, message: String) -> Error {
        self.recipe.error(self.stage, field, message)
    }

    pub fn missing(&self, field: &str) -> Error {
        self.plan.missing(self.node, field)
    }

    pub fn expected(&self, field: &str, what: &str, got: &Output) -> Error {
        self.plan.expected(self.node, field, what, got)
    }

    pub fn count(&self, field: &str) -> Result<Option<usize>> {
        match self.get(field) {
            None => Ok(None),
            Some(toml::Value::Integer(n)) if *n >= 1 => Ok(Some(*n as usize)),
            Some(v) => Err(self.err(field, format!("{v} is not a whole number ≥ 1"))),
        }
    }

    pub fn number(&self, field: &str) -> Result<Option<f64>> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => number_of(v)
                .filter(|x| *x >= 0.0)
                .map(Some)
                .ok_or_else(|| self.err(field, format!("{v} is not a number ≥ 0"))),
        }
    }

    pub fn text(&self, field: &str, default: &str) -> Result<String> {
        match self.get(field) {
            None => Ok(default.to_string()),
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(self.err(field, format!("{v} is not a string"))),
        }
    }

    pub fn flag(&self, field: &str) -> Result<bool> {
        match self.get(field) {
            None => Ok(false),
            Some(toml::Value::Boolean(b)) => Ok(*b),
            Some(v) => Err(self.err(field, format!("{v} is not true or false"))),
        }
    }

    /// `task = "translate"` (the default) or `"parse"`: whether the stage parses.
    pub fn task_parse(&self, field: &str) -> Result<bool> {
        match self.text(field, "translate")?.as_str() {
            "translate" => Ok(false),
            "parse" => Ok(true),
            other => Err(self.err(
                field,
                format!("`{other}` is not a task; expected translate or parse"),
            )),
        }
    }

    /// A list of files (a field given as one or several); an error when absent.
    pub fn files(&self, field: &str) -> Result<Vec<PathBuf>> {
        self.plan.files(self.node, field)
    }

    /// A list of files, empty when the field is absent.
    pub fn optional_files(&self, field: &str) -> Result<Vec<PathBuf>> {
        if self.has(field) {
            self.files(field)
        } else {
            Ok(Vec::new())
        }
    }

    /// The one input of a field that takes one.
    pub fn single(&self, field: &str) -> Result<Input> {
        self.plan.single(self.node, field)
    }

    pub fn inputs(&self, field: &str) -> Result<Vec<Input>> {
        self.plan.inputs(self.node, field)
    }

    /// A file: a path, or `@stage/FILE`.
    pub fn file(&self, field: &str, input: &Input) -> Result<PathBuf> {
        self.plan.file(self.node, field, input)
    }

    /// The one file a field names.
    pub fn single_file(&self, field: &str) -> Result<PathBuf> {
        self.file(field, &self.single(field)?)
    }

    /// A model (a bundle or run folder, or a train, average or export stage) the field
    /// names once.
    pub fn model(&self, field: &str) -> Result<Model> {
        self.input_model(field, &self.single(field)?)
    }

    pub fn input_model(&self, field: &str, input: &Input) -> Result<Model> {
        self.plan.model(self.node, field, input)
    }

    pub fn reference_output(&self, field: &str, r: &Reference) -> Result<Output> {
        self.plan.reference_output(self.node, field, r)
    }

    /// The node a reference names (checked when the plan was made).
    pub fn target(&self, r: &Reference) -> Option<usize> {
        self.plan.target(self.node, r)
    }

    /// The stage's folder.
    pub fn dir(&self) -> PathBuf {
        self.plan.nodes[self.node].dir.clone()
    }
}

/// A number, integer or finite float.
pub fn number_of(v: &toml::Value) -> Option<f64> {
    match v {
        toml::Value::Integer(n) => Some(*n as f64),
        toml::Value::Float(x) if x.is_finite() => Some(*x),
        _ => None,
    }
}

/// A non-empty list whose every item `item` reads.
pub fn list<T>(v: &toml::Value, item: impl Fn(&toml::Value) -> Option<T>) -> Option<Vec<T>> {
    match v {
        toml::Value::Array(items) if !items.is_empty() => items.iter().map(item).collect(),
        _ => None,
    }
}
