//! Recipes (`transduce recipe run FILE`): a declarative TOML file whose stages (prepare,
//! train, average, teacher, select, export, test) name their inputs, run in order by the
//! subcommands that do each by hand. A stage is done when its output exists and checks
//! out, so a rerun continues where the last one stopped.

mod argv;
mod card;
pub mod command;
mod cost;
mod format;
mod kind;
mod outputs;
mod plan;
mod rescore;
mod row;
mod scoring;
mod sets;
mod state;

use std::path::{Path, PathBuf};

pub use format::Scale;

use transduce_train::backend::Backend;
use transduce_train::error::{Error, Result};

use kind::{At, CostAt, RunOptions, Spec};
use plan::{Context, Plan};
use state::{Marker, State};

/// What `recipe run` was asked.
pub struct RunRequest {
    pub file: PathBuf,
    pub data: PathBuf,
    /// Where stages write (default: the scale's, [`Scale::default_work`]).
    pub work: Option<PathBuf>,
    /// The scale (default: the recipe's `default_scale`).
    pub scale: Option<Scale>,
    pub dry_run: bool,
    pub stage: Option<String>,
    pub backend: Backend,
    pub devices: Vec<usize>,
    /// The command line, for the bundles' provenance.
    pub command: String,
}

/// Runs a recipe, or with `dry_run` prints its plan.
pub fn run(request: RunRequest) -> Result<()> {
    let scale = match request.scale {
        Some(s) => s,
        None => format::Recipe::read(&request.file)?.default_scale,
    };
    let work = request.work.clone().unwrap_or_else(|| scale.default_work());
    let plan = Plan::load(
        &request.file,
        Context {
            data: request.data.clone(),
            work: work.clone(),
            scale,
        },
        kind::output,
    )?;
    let stages = Stages::read(plan, scale)?;
    let order = stages.order(request.stage.as_deref(), &request.file)?;
    let recipe = &stages.plan.recipes[0];
    eprintln!(
        "recipe {} ({} stages at scale {}; work in {}; data {})",
        request.file.display(),
        order.len(),
        scale.name(),
        work.display(),
        request.data.display()
    );
    if !recipe.description.is_empty() {
        eprintln!("  {}", recipe.description.trim());
    }
    let (states, pending) = stages.states(&order)?;
    if request.dry_run {
        stages.print(&order, &states);
        return Ok(());
    }
    if let Some((&n, s)) = order
        .iter()
        .zip(&states)
        .find(|(_, s)| matches!(s, State::Refused(_)))
    {
        return Err(Error::Usage(format!("stage {}: {s}", stages.plan.label(n))));
    }
    if request.stage.is_some() {
        stages.inputs_done(order[0], &pending)?;
    }
    let options = RunOptions {
        backend: request.backend,
        devices: request.devices.clone(),
        command: request.command.clone(),
    };
    let mut ran = vec![false; stages.plan.nodes.len()];
    let started = std::time::Instant::now();
    for (i, (&n, state)) in order.iter().zip(&states).enumerate() {
        let head = format!(
            "[{}/{}] {} ({})",
            i + 1,
            order.len(),
            stages.plan.label(n),
            stages.plan.stage_of(n).1.kind.name()
        );
        stages.run_stage(n, state, &head, &mut ran, &options)?;
    }
    eprintln!(
        "recipe {}: every stage done ({} in this call)",
        request.file.display(),
        cost::format_seconds(started.elapsed().as_secs_f64())
    );
    Ok(())
}

/// A recipe's plan with each planned stage read ([`Spec`]), at one scale.
struct Stages {
    plan: Plan,
    /// The planned nodes' specs (`None` for a node not in the plan's order).
    specs: Vec<Option<Box<dyn Spec>>>,
    scale: Scale,
}

impl Stages {
    /// Reads every stage before any runs: a wrong field stops here.
    fn read(plan: Plan, scale: Scale) -> Result<Self> {
        let specs = (0..plan.nodes.len())
            .map(|n| {
                plan.order
                    .contains(&n)
                    .then(|| kind::read(&plan, n))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        Ok(Stages { plan, specs, scale })
    }

    /// A planned stage's spec (every one was read).
    fn spec(&self, n: usize) -> &dyn Spec {
        self.specs[n]
            .as_deref()
            .expect("every planned stage is read")
    }

    /// Where node `n` stands, the nodes marked in `pending` counted as not yet done.
    fn state(&self, n: usize, spec: &dyn Spec, pending: &[bool]) -> Result<State> {
        state::state(
            &self.plan,
            n,
            spec.target_steps(self.scale),
            || spec.output_check(&self.plan, n),
            pending,
        )
    }

    /// The nodes to run: the whole plan, or the one `--stage` names.
    fn order(&self, stage: Option<&str>, file: &Path) -> Result<Vec<usize>> {
        let plan = &self.plan;
        let Some(name) = stage else {
            return Ok(plan.order.clone());
        };
        let node = plan
            .order
            .iter()
            .copied()
            .find(|&n| plan.label(n) == name)
            .ok_or_else(|| {
                let names: Vec<String> = plan.order.iter().map(|&n| plan.label(n)).collect();
                Error::Usage(format!(
                    "--stage {name}: no such stage in {} (its plan: {})",
                    file.display(),
                    names.join(", ")
                ))
            })?;
        Ok(vec![node])
    }

    /// The states as they will be when each stage's turn comes, and which nodes will have
    /// run by then (those not done).
    fn states(&self, order: &[usize]) -> Result<(Vec<State>, Vec<bool>)> {
        let mut pending = vec![false; self.plan.nodes.len()];
        let mut states = Vec::new();
        for &n in order {
            let s = self.state(n, self.spec(n), &pending)?;
            pending[n] = s != State::Done;
            states.push(s);
        }
        Ok((states, pending))
    }

    /// `--dry-run`: each stage, its state, its folder, its data and its estimated cost.
    fn print(&self, order: &[usize], states: &[State]) {
        let plan = &self.plan;
        let spec_of = |n: usize| self.spec(n);
        let mut total = 0.0;
        println!(
            "{:<4} {:<22} {:<8} {:<44} {:>10}",
            "", "stage", "kind", "state", "cost"
        );
        for (i, (&n, s)) in order.iter().zip(states).enumerate() {
            let (_, stage) = plan.stage_of(n);
            let at = CostAt {
                plan,
                node: n,
                state: s,
                spec_of: &spec_of,
            };
            let cost = kind::cost(self.spec(n), &at);
            total += cost.map_or(0.0, |c| c.0);
            let cost = match cost {
                Some((_, "done")) => "-".to_string(),
                Some((secs, _)) => format!("≈ {}", cost::format_seconds(secs)),
                None => "?".into(),
            };
            println!(
                "{:<4} {:<22} {:<8} {:<44} {:>10}",
                format!("{}.", i + 1),
                plan.label(n),
                stage.kind.name(),
                s.to_string(),
                cost
            );
            println!("     → {}", plan.nodes[n].dir.display());
            for file in self.spec(n).data_files() {
                let missing = if file.exists() { "" } else { " (missing)" };
                println!("     ← {}{missing}", file.display());
            }
        }
        println!(
            "estimated: ≈ {} on this machine's CPU (training from its own metrics where a run \
             has begun, else from the model's size)",
            cost::format_seconds(total)
        );
    }

    /// `--stage`: node `n`'s inputs must be done already.
    fn inputs_done(&self, n: usize, pending: &[bool]) -> Result<()> {
        for (dep, _) in &self.plan.nodes[n].deps {
            let read;
            let dep_spec = match &self.specs[*dep] {
                Some(s) => s.as_ref(),
                None => {
                    read = kind::read(&self.plan, *dep)?;
                    read.as_ref()
                }
            };
            let s = self.state(*dep, dep_spec, pending)?;
            if s != State::Done {
                return Err(Error::Usage(format!(
                    "--stage {}: its input {} is not done ({s}); run it first, or the \
                     recipe without --stage",
                    self.plan.label(n),
                    self.plan.label(*dep)
                )));
            }
        }
        Ok(())
    }

    /// Runs node `n` unless it is done: its folder marked as begun (a resumed one keeps
    /// its marker), the stage's work, then the marker done with a fresh id. `planned` is
    /// its state from before the run; an input that ran in this call (`ran`) changed its id,
    /// so the state is looked at again.
    fn run_stage(
        &self,
        n: usize,
        planned: &State,
        head: &str,
        ran: &mut [bool],
        options: &RunOptions,
    ) -> Result<()> {
        let plan = &self.plan;
        let none_pending = vec![false; plan.nodes.len()];
        let s = if plan.nodes[n].deps.iter().any(|(d, _)| ran[*d]) {
            self.state(n, self.spec(n), &none_pending)?
        } else {
            planned.clone()
        };
        match &s {
            State::Done => {
                eprintln!("==> {head}: done, {}", plan.nodes[n].dir.display());
                return Ok(());
            }
            State::Refused(_) => {
                return Err(Error::Usage(format!("stage {}: {s}", plan.label(n))));
            }
            _ => eprintln!("==> {head}: {s}"),
        }
        let dir = &plan.nodes[n].dir;
        let resume = matches!(s, State::Resume(_));
        if matches!(s, State::Redo(_)) && dir.exists() {
            std::fs::remove_dir_all(dir).map_err(transduce_train::error::io(dir))?;
        }
        let mut marker = Marker {
            recipe: plan.recipes[plan.nodes[n].recipe].name.clone(),
            stage: plan.stage_of(n).1.name.clone(),
            scale: self.scale.name().into(),
            settings: state::settings(plan, n),
            inputs: state::input_ids(plan, n, &none_pending).unwrap_or_default(),
            id: String::new(),
            done: false,
        };
        if !resume {
            marker.write(dir)?;
        }
        let t = std::time::Instant::now();
        std::fs::create_dir_all(dir).map_err(transduce_train::error::io(dir))?;
        let at = At {
            plan,
            node: n,
            dir: dir.clone(),
            scale: self.scale,
            options,
        };
        self.spec(n).run(&at, resume)?;
        marker.id = state::fresh_id();
        marker.done = true;
        marker.write(dir)?;
        ran[n] = true;
        eprintln!(
            "==> {head}: done in {}",
            cost::format_seconds(t.elapsed().as_secs_f64())
        );
        Ok(())
    }
}

/// The data folder when `--data` is not given: `TRANSDUCE_DATA`, else `shared/data` beside
/// the checkout the recipe is in (`recipes/../../shared/data`), as the scripts' `../shared/data`.
pub fn default_data(recipe: &Path) -> PathBuf {
    if let Some(d) = std::env::var_os("TRANSDUCE_DATA") {
        return PathBuf::from(d);
    }
    let dir = recipe
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    dir.join("../../shared/data")
}
