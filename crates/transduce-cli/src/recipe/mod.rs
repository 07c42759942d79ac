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
    // Every stage is read before any runs: a wrong field stops here.
    let specs: Vec<Option<Box<dyn Spec>>> = (0..plan.nodes.len())
        .map(|n| {
            plan.order
                .contains(&n)
                .then(|| kind::read(&plan, n))
                .transpose()
        })
        .collect::<Result<_>>()?;
    let order: Vec<usize> = match &request.stage {
        None => plan.order.clone(),
        Some(name) => {
            let node = plan
                .order
                .iter()
                .copied()
                .find(|&n| plan.label(n) == *name)
                .ok_or_else(|| {
                    let names: Vec<String> = plan.order.iter().map(|&n| plan.label(n)).collect();
                    Error::Usage(format!(
                        "--stage {name}: no such stage in {} (its plan: {})",
                        request.file.display(),
                        names.join(", ")
                    ))
                })?;
            vec![node]
        }
    };
    // Every planned stage was read above.
    let spec =
        |n: usize| -> &dyn Spec { specs[n].as_deref().expect("every planned stage is read") };
    let state_of = |n: usize, spec: &dyn Spec, pending: &[bool]| {
        state::state(
            &plan,
            n,
            spec.target_steps(scale),
            || spec.output_check(&plan, n),
            pending,
        )
    };
    let recipe = &plan.recipes[0];
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
    // The states as they will be when each stage's turn comes.
    let mut pending = vec![false; plan.nodes.len()];
    let mut states = Vec::new();
    for &n in &order {
        let s = state_of(n, spec(n), &pending)?;
        pending[n] = s != State::Done;
        states.push(s);
    }
    if request.dry_run {
        let mut total = 0.0;
        println!(
            "{:<4} {:<22} {:<8} {:<44} {:>10}",
            "", "stage", "kind", "state", "cost"
        );
        for (i, (&n, s)) in order.iter().zip(&states).enumerate() {
            let (_, stage) = plan.stage_of(n);
            let at = CostAt {
                plan: &plan,
                node: n,
                state: s,
                spec_of: &spec,
            };
            let cost = kind::cost(spec(n), &at);
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
            for file in spec(n).data_files() {
                let missing = if file.exists() { "" } else { " (missing)" };
                println!("     ← {}{missing}", file.display());
            }
        }
        println!(
            "estimated: ≈ {} on this machine's CPU (training from its own metrics where a run \
             has begun, else from the model's size)",
            cost::format_seconds(total)
        );
        return Ok(());
    }
    if let Some((&n, s)) = order
        .iter()
        .zip(&states)
        .find(|(_, s)| matches!(s, State::Refused(_)))
    {
        return Err(Error::Usage(format!("stage {}: {s}", plan.label(n))));
    }
    if request.stage.is_some() {
        let n = order[0];
        for (dep, _) in &plan.nodes[n].deps {
            let read;
            let dep_spec = match &specs[*dep] {
                Some(s) => s.as_ref(),
                None => {
                    read = kind::read(&plan, *dep)?;
                    read.as_ref()
                }
            };
            let s = state_of(*dep, dep_spec, &pending)?;
            if s != State::Done {
                return Err(Error::Usage(format!(
                    "--stage {}: its input {} is not done ({s}); run it first, or the \
                     recipe without --stage",
                    plan.label(n),
                    plan.label(*dep)
                )));
            }
        }
    }
    let options = RunOptions {
        backend: request.backend,
        devices: request.devices.clone(),
        command: request.command.clone(),
    };
    let mut ran = vec![false; plan.nodes.len()];
    let started = std::time::Instant::now();
    for (i, &n) in order.iter().enumerate() {
        let (_, st) = plan.stage_of(n);
        // An input that ran in this call changed its id: look again.
        let s = if plan.nodes[n].deps.iter().any(|(d, _)| ran[*d]) {
            state_of(n, spec(n), &vec![false; plan.nodes.len()])?
        } else {
            states[i].clone()
        };
        let head = format!(
            "[{}/{}] {} ({})",
            i + 1,
            order.len(),
            plan.label(n),
            st.kind.name()
        );
        match &s {
            State::Done => {
                eprintln!("==> {head}: done, {}", plan.nodes[n].dir.display());
                continue;
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
        let inputs = state::input_ids(&plan, n, &vec![false; plan.nodes.len()]).unwrap_or_default();
        let mut marker = Marker {
            recipe: plan.recipes[plan.nodes[n].recipe].name.clone(),
            stage: st.name.clone(),
            scale: scale.name().into(),
            settings: state::settings(&plan, n),
            inputs,
            id: String::new(),
            done: false,
        };
        if !resume {
            marker.write(dir)?;
        }
        let t = std::time::Instant::now();
        std::fs::create_dir_all(dir).map_err(transduce_train::error::io(dir))?;
        let at = At {
            plan: &plan,
            node: n,
            dir: dir.clone(),
            scale,
            options: &options,
        };
        spec(n).run(&at, resume)?;
        marker.id = state::fresh_id();
        marker.done = true;
        marker.write(dir)?;
        ran[n] = true;
        eprintln!(
            "==> {head}: done in {}",
            cost::format_seconds(t.elapsed().as_secs_f64())
        );
    }
    eprintln!(
        "recipe {}: every stage done ({} in this call)",
        request.file.display(),
        cost::format_seconds(started.elapsed().as_secs_f64())
    );
    Ok(())
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
