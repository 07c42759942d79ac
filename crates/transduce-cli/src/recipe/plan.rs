//! The plan: a recipe's stages and the stages of other recipes they take inputs from, in
//! an order where every stage comes after its inputs, each with its output folder.
//!
//! References are checked here, before anything runs: a missing stage or recipe and a
//! cycle are errors at the line of the field that names them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use transduce_train::error::{Error, Result};

use super::format::{Input, Recipe, Reference, Scale, Stage, references};

/// Where a run reads its data and writes its work.
#[derive(Clone, Debug)]
pub struct Context {
    /// What `{data}` stands for in paths.
    pub data: PathBuf,
    /// Each recipe's stages write to `WORK/RECIPE/STAGE`.
    pub work: PathBuf,
    pub scale: Scale,
}

/// One stage of one recipe in the plan.
#[derive(Clone, Debug)]
pub struct Node {
    pub recipe: usize,
    pub stage: usize,
    /// The stage's folder: its output and its marker.
    pub dir: PathBuf,
    /// The stages it takes inputs from, with the field naming each.
    pub deps: Vec<(usize, String)>,
}

/// What a stage leaves for the stages after it.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// A prepared data folder.
    Prepared(PathBuf),
    /// A training run folder (its newest checkpoint is the model).
    Run(PathBuf),
    /// Averaged weights of a run's architecture.
    Weights { run: PathBuf, file: PathBuf },
    /// A folder of sentence pairs (`src.txt`, `tgt.txt`).
    Corpus(PathBuf),
    /// The chosen beam and α (`select.json`).
    Selection(PathBuf),
    /// A bundle folder.
    Bundle(PathBuf),
    /// Test scores (`scores.json`); the bundle's card holds them too.
    Scores(PathBuf),
    /// A Table 3 report folder (`table3.md`, `table3-ppl.svg`, `results.json`).
    Report(PathBuf),
}

impl Output {
    /// The folder a `@stage/FILE` reference looks in.
    pub fn folder(&self) -> PathBuf {
        match self {
            Output::Prepared(d)
            | Output::Run(d)
            | Output::Corpus(d)
            | Output::Bundle(d)
            | Output::Report(d) => d.clone(),
            Output::Weights { file: f, .. } | Output::Selection(f) | Output::Scores(f) => f
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        }
    }
}

/// A model to decode with or start from: a bundle or run folder, and a checkpoint of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub path: PathBuf,
    pub checkpoint: Option<PathBuf>,
}

/// The stages to run, in order, and the recipes they come from.
pub struct Plan {
    pub context: Context,
    pub recipes: Vec<Recipe>,
    pub nodes: Vec<Node>,
    /// Node ids, inputs first: the root recipe's stages and what they need.
    pub order: Vec<usize>,
    /// What a stage leaves for others, by its kind (the kinds know; the plan does not).
    output_of: fn(&Plan, usize) -> Result<Output>,
}

impl Plan {
    /// Reads the recipe at `path` and every recipe its stages take inputs from;
    /// `output_of` says what each stage leaves for others.
    pub fn load(
        path: &Path,
        context: Context,
        output_of: fn(&Plan, usize) -> Result<Output>,
    ) -> Result<Plan> {
        let root = Recipe::read(path)?.at_scale(context.scale)?;
        let mut plan = Plan {
            context,
            recipes: Vec::new(),
            nodes: Vec::new(),
            order: Vec::new(),
            output_of,
        };
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut index: HashMap<(usize, String), usize> = HashMap::new();
        plan.add_recipe(root, &mut by_name, &mut index);
        // Nodes are added as recipes load; their references are resolved in turn.
        let mut next = 0;
        while next < plan.nodes.len() {
            let (r, s) = (plan.nodes[next].recipe, plan.nodes[next].stage);
            let stage = plan.recipes[r].stages[s].clone();
            for (field, value) in &stage.fields {
                for reference in references(&value.value) {
                    let reference =
                        reference.map_err(|e| plan.recipes[r].error(&stage, field, e))?;
                    let target_recipe = match &reference.recipe {
                        None => r,
                        Some(name) => match by_name.get(name) {
                            Some(&i) => i,
                            None => {
                                let file = plan.recipes[r].dir().join(format!("{name}.toml"));
                                if !file.exists() {
                                    return Err(plan.recipes[r].error(
                                        &stage,
                                        field,
                                        format!(
                                            "`@{name}:{}` names a recipe that does not exist \
                                             (no {})",
                                            reference.stage,
                                            file.display()
                                        ),
                                    ));
                                }
                                let other = Recipe::read(&file)?.at_scale(plan.context.scale)?;
                                plan.add_recipe(other, &mut by_name, &mut index)
                            }
                        },
                    };
                    let Some(&dep) = index.get(&(target_recipe, reference.stage.clone())) else {
                        let other = &plan.recipes[target_recipe];
                        let names: Vec<&str> =
                            other.stages.iter().map(|s| s.name.as_str()).collect();
                        return Err(plan.recipes[r].error(
                            &stage,
                            field,
                            format!(
                                "no stage `{}` in {} (its stages: {})",
                                reference.stage,
                                other.path.display(),
                                names.join(", ")
                            ),
                        ));
                    };
                    if !plan.nodes[next].deps.iter().any(|(d, _)| *d == dep) {
                        plan.nodes[next].deps.push((dep, field.clone()));
                    }
                }
            }
            next += 1;
        }
        plan.order = plan.ordered()?;
        Ok(plan)
    }

    fn add_recipe(
        &mut self,
        recipe: Recipe,
        by_name: &mut HashMap<String, usize>,
        index: &mut HashMap<(usize, String), usize>,
    ) -> usize {
        let r = self.recipes.len();
        let folder = self.context.work.join(&recipe.name);
        for (s, stage) in recipe.stages.iter().enumerate() {
            index.insert((r, stage.name.clone()), self.nodes.len());
            self.nodes.push(Node {
                recipe: r,
                stage: s,
                dir: folder.join(&stage.name),
                deps: Vec::new(),
            });
        }
        by_name.insert(recipe.name.clone(), r);
        self.recipes.push(recipe);
        r
    }

    /// The root recipe's stages (file order) and their inputs, inputs first; a cycle is an
    /// error at the field that closes it.
    fn ordered(&self) -> Result<Vec<usize>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Closed,
        }
        let mut marks = vec![Mark::New; self.nodes.len()];
        let mut order = Vec::new();
        let roots: Vec<usize> = (0..self.nodes.len())
            .filter(|&n| self.nodes[n].recipe == 0)
            .collect();
        for root in roots {
            if marks[root] != Mark::New {
                continue;
            }
            // Depth first without recursion: (node, next dependency to visit), and the path.
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            marks[root] = Mark::Open;
            while let Some(&mut (n, ref mut i)) = stack.last_mut() {
                if let Some((dep, field)) = self.nodes[n].deps.get(*i) {
                    *i += 1;
                    match marks[*dep] {
                        Mark::New => {
                            marks[*dep] = Mark::Open;
                            stack.push((*dep, 0));
                        }
                        Mark::Open => {
                            let from = stack.iter().position(|&(m, _)| m == *dep).unwrap_or(0);
                            let mut names: Vec<String> =
                                stack[from..].iter().map(|&(m, _)| self.label(m)).collect();
                            names.push(self.label(*dep));
                            let (recipe, stage) = self.stage_of(n);
                            return Err(recipe.error(
                                stage,
                                field,
                                format!("a cycle: {}", names.join(" → ")),
                            ));
                        }
                        Mark::Closed => {}
                    }
                } else {
                    marks[n] = Mark::Closed;
                    order.push(n);
                    stack.pop();
                }
            }
        }
        Ok(order)
    }

    pub fn stage_of(&self, node: usize) -> (&Recipe, &Stage) {
        let n = &self.nodes[node];
        let recipe = &self.recipes[n.recipe];
        (recipe, &recipe.stages[n.stage])
    }

    /// `stage`, or `recipe:stage` for another recipe's.
    pub fn label(&self, node: usize) -> String {
        let (recipe, stage) = self.stage_of(node);
        if self.nodes[node].recipe == 0 {
            stage.name.clone()
        } else {
            format!("{}:{}", recipe.name, stage.name)
        }
    }

    /// The node a reference from `from` names (checked when the plan was made).
    pub fn target(&self, from: usize, reference: &Reference) -> Option<usize> {
        let recipe = match &reference.recipe {
            None => self.nodes[from].recipe,
            Some(name) => self.recipes.iter().position(|r| &r.name == name)?,
        };
        self.nodes.iter().position(|n| {
            n.recipe == recipe && self.recipes[recipe].stages[n.stage].name == reference.stage
        })
    }

    /// What a stage leaves for others.
    pub fn output(&self, node: usize) -> Result<Output> {
        (self.output_of)(self, node)
    }

    /// A field's value as inputs (one, or a list); an error when absent.
    pub fn inputs(&self, node: usize, field: &str) -> Result<Vec<Input>> {
        let (recipe, stage) = self.stage_of(node);
        let value = stage
            .fields
            .get(field)
            .ok_or_else(|| self.missing(node, field))?;
        super::format::inputs(&value.value, &self.context.data, &recipe.dir())
            .map_err(|e| recipe.error(stage, field, e))
    }

    /// The output a reference names; with `/FILE`, that file's path as a plain path.
    pub fn reference_output(&self, node: usize, field: &str, r: &Reference) -> Result<Output> {
        let (recipe, stage) = self.stage_of(node);
        let target = self
            .target(node, r)
            .ok_or_else(|| recipe.error(stage, field, format!("no stage `{}`", r.stage)))?;
        self.output(target)
    }

    /// A file: a path, or `@stage/FILE`.
    pub fn file(&self, node: usize, field: &str, input: &Input) -> Result<PathBuf> {
        match input {
            Input::Path(p) => Ok(p.clone()),
            Input::Stage(r) => {
                let out = self.reference_output(node, field, r)?;
                match &r.sub {
                    Some(sub) => Ok(out.folder().join(sub)),
                    None => {
                        let (recipe, stage) = self.stage_of(node);
                        Err(recipe.error(
                            stage,
                            field,
                            format!(
                                "`@{}` is a stage's whole output; name a file in it \
                                 (`@{}/FILE`)",
                                r.stage, r.stage
                            ),
                        ))
                    }
                }
            }
        }
    }

    /// A list of files (a field given as one or several).
    pub fn files(&self, node: usize, field: &str) -> Result<Vec<PathBuf>> {
        self.inputs(node, field)?
            .iter()
            .map(|i| self.file(node, field, i))
            .collect()
    }

    /// A model: a bundle or run folder, or a train, average or export stage.
    pub fn model(&self, node: usize, field: &str, input: &Input) -> Result<Model> {
        match input {
            Input::Path(p) => Ok(Model {
                path: p.clone(),
                checkpoint: None,
            }),
            Input::Stage(r) if r.sub.is_some() => Ok(Model {
                path: self.file(node, field, input)?,
                checkpoint: None,
            }),
            Input::Stage(r) => match self.reference_output(node, field, r)? {
                Output::Run(d) | Output::Bundle(d) => Ok(Model {
                    path: d,
                    checkpoint: None,
                }),
                Output::Weights { run, file } => Ok(Model {
                    path: run,
                    checkpoint: Some(file),
                }),
                other => {
                    Err(self.expected(node, field, "a model (train, average or export)", &other))
                }
            },
        }
    }

    /// The one input of a field that takes one.
    pub fn single(&self, node: usize, field: &str) -> Result<Input> {
        let mut inputs = self.inputs(node, field)?;
        if inputs.len() != 1 {
            let (recipe, stage) = self.stage_of(node);
            return Err(recipe.error(stage, field, "expected one value, not a list"));
        }
        Ok(inputs.remove(0))
    }

    pub fn missing(&self, node: usize, field: &str) -> Error {
        let (recipe, stage) = self.stage_of(node);
        Error::Recipe {
            path: recipe.path.clone(),
            line: stage.line,
            message: format!(
                "stage `{}`: a {} stage needs the field `{field}`",
                stage.name,
                stage.kind.name()
            ),
        }
    }

    pub fn expected(&self, node: usize, field: &str, what: &str, got: &Output) -> Error {
        let (recipe, stage) = self.stage_of(node);
        let got = match got {
            Output::Prepared(_) => "prepared data",
            Output::Run(_) => "a training run",
            Output::Weights { .. } => "averaged weights",
            Output::Corpus(_) => "a teacher's corpus",
            Output::Selection(_) => "a selection of beam and α",
            Output::Bundle(_) => "a bundle",
            Output::Scores(_) => "test scores",
            Output::Report(_) => "a Table 3 report",
        };
        recipe.error(stage, field, format!("expected {what}, but it names {got}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(dir: &Path) -> Context {
        Context {
            data: dir.join("data"),
            work: dir.join("work"),
            scale: Scale::Full,
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn orders_inputs_first_across_recipes() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        write(
            d,
            "base.toml",
            "[[stage]]\nname = \"data\"\nkind = \"prepare\"\nsrc = \"a\"\ntgt = \"b\"\n",
        );
        let root = write(
            d,
            "top.toml",
            "[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@base:data\"\n\
             init = \"@warm\"\nmax_steps = 1\n\
             [[stage]]\nname = \"warm\"\nkind = \"train\"\ndata = \"@base:data\"\nmax_steps = 1\n",
        );
        let plan = Plan::load(&root, context(d), super::super::kind::output).unwrap();
        let labels: Vec<String> = plan.order.iter().map(|&n| plan.label(n)).collect();
        assert_eq!(labels, ["base:data", "warm", "run"]);
        assert_eq!(plan.nodes[plan.order[0]].dir, d.join("work/base/data"));
    }

    #[test]
    fn missing_inputs_and_cycles_are_errors_at_their_field() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let root = write(
            d,
            "r.toml",
            "[[stage]]\nname = \"a\"\nkind = \"train\"\ndata = \"@nope\"\nmax_steps = 1\n",
        );
        let m = Plan::load(&root, context(d), super::super::kind::output)
            .err()
            .unwrap()
            .to_string();
        assert!(
            m.ends_with(&format!(
                "r.toml:4: stage `a`, field `data`: no stage `nope` in {} (its stages: a)",
                root.display()
            )),
            "{m}"
        );
        let root = write(
            d,
            "r.toml",
            "[[stage]]\nname = \"a\"\nkind = \"train\"\ndata = \"@other:x\"\nmax_steps = 1\n",
        );
        let m = Plan::load(&root, context(d), super::super::kind::output)
            .err()
            .unwrap()
            .to_string();
        assert!(
            m.contains("r.toml:4: stage `a`, field `data`: `@other:x` names a recipe"),
            "{m}"
        );
        let root = write(
            d,
            "r.toml",
            "[[stage]]\nname = \"a\"\nkind = \"average\"\nrun = \"@b\"\n\
             [[stage]]\nname = \"b\"\nkind = \"train\"\ndata = \"x\"\ninit = \"@a\"\nmax_steps = 1\n",
        );
        let m = Plan::load(&root, context(d), super::super::kind::output)
            .err()
            .unwrap()
            .to_string();
        assert!(
            m.contains("r.toml:9: stage `b`, field `init`: a cycle: a → b → a"),
            "{m}"
        );
    }
}
