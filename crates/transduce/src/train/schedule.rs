//! The learning-rate schedule of §5.3:
//! lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).

/// Noam schedule with an optional constant factor (1.0 is the paper's).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Noam {
    pub d_model: usize,
    pub warmup: u64,
    pub factor: f64,
}

impl Noam {
    /// Learning rate at `step` (1-based).
    pub fn lr(&self, step: u64) -> f64 {
        let s = step.max(1) as f64;
        self.factor
            * (self.d_model as f64).powf(-0.5)
            * s.powf(-0.5).min(s * (self.warmup as f64).powf(-1.5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_formula() {
        let noam = Noam {
            d_model: 512,
            warmup: 4000,
            factor: 1.0,
        };
        // step 1: 512^-0.5 · 1 · 4000^-1.5 = 0.0441942 · 3.95285e-6
        assert!((noam.lr(1) - 1.746928e-7).abs() < 1e-12);
        // step 4000 (the peak): 512^-0.5 · 4000^-0.5 = 6.987712e-4
        assert!((noam.lr(4000) - 6.987712e-4).abs() < 1e-9);
        // step 100,000: 512^-0.5 · 100000^-0.5 = 1.397542e-4
        assert!((noam.lr(100_000) - 1.397542e-4).abs() < 1e-9);
        // Increases linearly before the peak, then decays.
        assert!(noam.lr(2000) < noam.lr(4000) && noam.lr(8000) < noam.lr(4000));
    }
}
