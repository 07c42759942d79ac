//! A row of the paper's Table 3 as a train stage's model (`row = "A1"`), at a size: the
//! row's own config (`transduce::config::table3`) with d_model, d_ff, d_k and d_v divided
//! by `width_divisor`, N by `depth_divisor`, and h, dropout, label smoothing and positions
//! kept. Every row is divided alike, so each keeps its variation relative to base: A1 is
//! still one head of d_k = d_model, C4 half of base's width, big twice base's with 16
//! heads, C1 a third of base's depth.

use std::path::PathBuf;

use transduce::config::{ModelConfig, table3};

/// A Table 3 row's model, as a train stage trains it (`run`: its folder).
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub model: ModelConfig,
    pub run: PathBuf,
}

impl Row {
    /// The row model's parameters at an 8,000-piece vocabulary (what a cost estimate
    /// scales by before the data is prepared).
    pub fn params(&self) -> f64 {
        self.model.clone().with_vocab(8000).num_params() as f64
    }
}

/// The model of Table 3's row `name` with its widths divided by `divisor` and its depth by
/// `depth`; `Err` says what is wrong (an unknown row, a width or depth the divisor does not
/// divide).
pub fn model(name: &str, divisor: usize, depth: usize) -> Result<ModelConfig, String> {
    let rows = table3();
    let row = rows.iter().find(|r| r.name == name).ok_or_else(|| {
        let names: Vec<&str> = rows.iter().map(|r| r.name).collect();
        format!("`{name}` is not a row of Table 3 ({})", names.join(", "))
    })?;
    if divisor == 0 || depth == 0 {
        return Err("a divisor of 0".into());
    }
    let mut config = row.config.clone();
    for (field, width) in [
        ("d_model", &mut config.d_model),
        ("d_ff", &mut config.d_ff),
        ("d_k", &mut config.d_k),
        ("d_v", &mut config.d_v),
    ] {
        if !width.is_multiple_of(divisor) {
            return Err(format!(
                "row {name}'s {field} {} is not a multiple of width_divisor {divisor}",
                *width
            ));
        }
        *width /= divisor;
    }
    if !config.n_layers.is_multiple_of(depth) {
        return Err(format!(
            "row {name}'s N {} is not a multiple of depth_divisor {depth}",
            config.n_layers
        ));
    }
    config.n_layers /= depth;
    config
        .validate()
        .map_err(|e| format!("row {name} divided by {divisor} (depth {depth}): {e}"))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_variation() {
        let base = model("base", 4, 1).unwrap();
        assert_eq!(
            (
                base.n_layers,
                base.d_model,
                base.d_ff,
                base.n_heads,
                base.d_k
            ),
            (6, 128, 512, 8, 16)
        );
        let a1 = model("A1", 4, 1).unwrap();
        assert_eq!((a1.n_heads, a1.d_k, a1.d_v, a1.d_model), (1, 128, 128, 128));
        let b1 = model("B1", 4, 1).unwrap();
        assert_eq!((b1.d_k, b1.d_v), (4, 16));
        let c4 = model("C4", 4, 1).unwrap();
        assert_eq!((c4.d_model, c4.d_k, c4.d_ff), (64, 8, 512));
        let big = model("big", 4, 1).unwrap();
        assert_eq!(
            (big.d_model, big.d_ff, big.n_heads, big.d_k, big.dropout),
            (256, 1024, 16, 16, 0.3)
        );
        assert_eq!(model("D3", 16, 1).unwrap().label_smoothing, 0.0);
        assert_eq!(model("base", 1, 1).unwrap(), ModelConfig::base());
    }

    #[test]
    fn depth_divides_every_row_alike() {
        let n = |row: &str| model(row, 4, 2).unwrap().n_layers;
        // The paper's N: base 6, C1 2, C2 4, C3 8, big 6.
        assert_eq!(
            (n("base"), n("C1"), n("C2"), n("C3"), n("big")),
            (3, 1, 2, 4, 3)
        );
        let c5 = model("C5", 4, 2).unwrap();
        assert_eq!((c5.n_layers, c5.d_model, c5.d_k), (3, 256, 32));
    }

    #[test]
    fn refusals_say_why() {
        assert!(
            model("F1", 4, 1)
                .unwrap_err()
                .contains("not a row of Table 3")
        );
        let m = model("B1", 32, 1).unwrap_err();
        assert!(
            m.contains("B1's d_k 16 is not a multiple of width_divisor 32"),
            "{m}"
        );
        assert!(model("base", 0, 1).is_err());
    }
}
