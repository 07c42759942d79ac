//! A bundle's card (its `config.json`) as stages edit it: the provenance of a recipe's
//! export, a test stage's scores.

use std::path::Path;

use transduce::bundle::{BundleConfig, CONFIG_FILE, RecipeOrigin, RecipeStage};

use transduce_train::error::{Error, Result, io};
use transduce_train::fsutil;

use super::plan::Plan;

/// The provenance of a bundle from stage `node`: its lineage in the plan's order.
pub fn origin(plan: &Plan, node: usize) -> RecipeOrigin {
    let mut wanted = vec![false; plan.nodes.len()];
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if !wanted[n] {
            wanted[n] = true;
            stack.extend(plan.nodes[n].deps.iter().map(|(d, _)| *d));
        }
    }
    // The plan's order runs inputs first; a stage outside it (run alone) comes last.
    let mut lineage_nodes: Vec<usize> = plan.order.iter().copied().filter(|&n| wanted[n]).collect();
    for (n, &w) in wanted.iter().enumerate() {
        if w && !lineage_nodes.contains(&n) {
            lineage_nodes.push(n);
        }
    }
    let (recipe, stage) = plan.stage_of(node);
    RecipeOrigin {
        file: recipe.path.display().to_string(),
        stage: stage.name.clone(),
        scale: plan.context.scale.name().into(),
        lineage: lineage_nodes
            .into_iter()
            .map(|n| {
                let (r, s) = plan.stage_of(n);
                RecipeStage {
                    recipe: r.name.clone(),
                    stage: s.name.clone(),
                    kind: s.kind.name().into(),
                    settings: s.settings(),
                }
            })
            .collect(),
    }
}

/// Reads a bundle's config.json, changes it, writes it back (the other files' hashes in
/// it stay true: they are not touched).
pub fn edit_card(bundle: &Path, edit: impl FnOnce(&mut BundleConfig) -> Result<()>) -> Result<()> {
    let path = bundle.join(CONFIG_FILE);
    let bytes = std::fs::read(&path).map_err(io(&path))?;
    let mut config = BundleConfig::from_json(&bytes).map_err(|e| Error::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    edit(&mut config)?;
    fsutil::write_atomic(&path, config.to_json().as_bytes())
}
