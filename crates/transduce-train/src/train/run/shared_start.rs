//! Rank 0's start, broadcast: its weights (new, `--init`'s or a checkpoint's), Adam's state
//! and the trainer's position, so every rank begins from the same bits whatever it could
//! read itself. When rank 0 cannot start, the others stop with its reason.

use transduce::bundle::{WeightDtype, load_weights, save_weights};
use transduce::burn::optim::ModuleOptimizer;
use transduce::burn::prelude::*;
use transduce::burn::tensor::Bytes;
use transduce::{ModelConfig, Transformer};

use super::checkpoint::TrainState;
use crate::distributed::Collective;
use crate::error::{Error, Result};

/// What a run starts from.
pub type Start = (Transformer, ModuleOptimizer, TrainState);

/// Rank 0's `start` on every rank: rank 0 passes its own (or its error), the others
/// anything (it is not read) and get rank 0's, rebuilt on `device` from `config`.
pub fn broadcast(
    collective: &dyn Collective,
    start: Result<Start>,
    fresh: ModuleOptimizer,
    config: &ModelConfig,
    device: &Device,
) -> Result<Start> {
    let lead = collective.leads();
    // First whether rank 0 started, and if not why.
    let mut status = match (&start, lead) {
        (Err(e), true) => e.to_string().into_bytes(),
        _ => Vec::new(),
    };
    collective.broadcast(&mut status)?;
    if !status.is_empty() {
        return match (start, lead) {
            (Err(e), true) => Err(e),
            _ => Err(Error::Usage(format!(
                "rank 0 could not start: {}",
                String::from_utf8_lossy(&status)
            ))),
        };
    }
    let mut parts = match (&start, lead) {
        (Ok((model, optimizer, state)), true) => {
            let weights = save_weights(model, WeightDtype::F32)?;
            let adam = optimizer
                .into_bytes()
                .map_err(|e| Error::Usage(format!("cannot serialize Adam's state: {e:?}")))?
                .to_vec();
            let state = serde_json::to_vec(state).expect("state serializes");
            [weights, adam, state]
        }
        _ => Default::default(),
    };
    for part in &mut parts {
        collective.broadcast(part)?;
    }
    if lead {
        return start;
    }
    let [weights, adam, state] = parts;
    let model = load_weights(config, &weights, device)?;
    let optimizer = fresh
        .from_bytes(Bytes::from_bytes_vec(adam))
        .map_err(|e| Error::Usage(format!("cannot restore rank 0's Adam state: {e:?}")))?;
    let state = serde_json::from_slice(&state)
        .map_err(|e| Error::Usage(format!("rank 0's training state: {e}")))?;
    Ok((model, optimizer, state))
}
