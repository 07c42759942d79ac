//! Mixed-precision training (`--precision f16|bf16`): half-precision activations over f32
//! master weights (the model side is [`transduce::precision`]), plus the dynamic loss
//! scaling f16 needs.
//!
//! f16's smallest normal number is 6·10⁻⁵: gradients of a per-token mean loss fall below
//! it and flush to zero. The loss is multiplied by a scale before the backward pass and the
//! f32 gradients divided by it after; when a step's gradients overflow (inf or NaN) the
//! step is skipped and the scale halved, and after [`GROWTH_INTERVAL`] clean steps it
//! doubles. bf16 has f32's exponent range and trains unscaled; its steps are still checked.

use serde::{Deserialize, Serialize};
use transduce::Precision;
use transduce::Transformer;
use transduce::burn::module::{Module, ModuleVisitor, Param};
use transduce::burn::optim::GradientsParams;
use transduce::burn::prelude::*;
use transduce::burn::tensor::FloatDType;

use crate::error::{Error, Result};

/// The f16 loss scale at the first step: 2¹⁶, as mixed-precision trainers commonly start.
pub const INITIAL_SCALE: f64 = 65_536.0;
/// Clean steps after which the scale doubles.
pub const GROWTH_INTERVAL: u64 = 2_000;

/// The dynamic loss scale, saved in every checkpoint so a resumed run scales as the
/// uninterrupted one would.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LossScale {
    /// What the loss is multiplied by before the backward pass.
    pub scale: f64,
    /// Clean steps since the scale last changed.
    pub clean_steps: u64,
    /// Steps skipped because their gradients overflowed.
    pub skipped: u64,
}

impl LossScale {
    /// The starting scale for `precision`: scaled for f16, 1 for bf16, none for f32.
    pub fn initial(precision: Precision) -> Option<LossScale> {
        let scale = match precision {
            Precision::F32 => return None,
            Precision::F16 => INITIAL_SCALE,
            Precision::Bf16 => 1.0,
        };
        Some(LossScale {
            scale,
            clean_steps: 0,
            skipped: 0,
        })
    }

    /// Records a step: a step whose gradients were not finite halves an f16 scale (it is
    /// skipped by the caller), a run of clean ones doubles it.
    pub fn update(&mut self, precision: Precision, finite: bool) {
        self.update_growing(precision, finite, GROWTH_INTERVAL);
    }

    /// [`Self::update`] with the scale doubling after `growth` clean steps.
    pub fn update_growing(&mut self, precision: Precision, finite: bool, growth: u64) {
        let dynamic = precision == Precision::F16;
        if !finite {
            self.skipped += 1;
            self.clean_steps = 0;
            if dynamic {
                self.scale = (self.scale / 2.0).max(1.0);
            }
            return;
        }
        self.clean_steps += 1;
        if dynamic && self.clean_steps >= growth {
            self.scale = (self.scale * 2.0).min(INITIAL_SCALE * 256.0);
            self.clean_steps = 0;
        }
    }
}

/// Refuses a precision the devices cannot train in, with the reason.
pub fn check(precision: Precision, devices: &[Device]) -> Result<()> {
    if precision == Precision::F32 {
        return Ok(());
    }
    for device in devices {
        if transduce::ops::is_cpu(device) {
            return Err(Error::Usage(format!(
                "--precision {}: the CPU backend trains in f32 only (half precision is for \
                 the GPU backends, --backend wgpu or cuda)",
                precision.name()
            )));
        }
        if !device.supports_dtype(precision.dtype()) {
            return Err(Error::Usage(format!(
                "--precision {}: device {device:?} has no {} arithmetic; use --precision f32{}",
                precision.name(),
                precision.name(),
                if precision == Precision::Bf16 {
                    " or f16"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}

/// Multiplies every gradient by `factor` (1/scale) and tells whether all of them are
/// finite. One read from the device for the whole model.
pub fn unscale(
    grads: GradientsParams,
    model: &Transformer,
    factor: f64,
) -> Result<(GradientsParams, bool)> {
    struct Unscale {
        grads: GradientsParams,
        factor: f64,
        sums: Vec<Tensor<1>>,
    }
    impl ModuleVisitor for Unscale {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = self.grads.remove::<D>(param.id) {
                let grad = if self.factor == 1.0 {
                    grad
                } else {
                    grad.mul_scalar(self.factor)
                };
                // Inf and NaN survive a sum (inf − inf is NaN): one value per parameter
                // says whether any element overflowed.
                self.sums.push(grad.clone().sum().cast(FloatDType::F32));
                self.grads.register(param.id, grad);
            }
        }
    }
    let mut visitor = Unscale {
        grads,
        factor,
        sums: Vec::new(),
    };
    model.visit(&mut visitor);
    let finite = match visitor.sums.is_empty() {
        true => true,
        false => {
            let total = Tensor::cat(visitor.sums, 0).sum();
            crate::train::read::read_scalars(vec![total])?[0].is_finite()
        }
    };
    Ok((visitor.grads, finite))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_halves_on_overflow_and_doubles_after_a_clean_run() {
        let mut s = LossScale::initial(Precision::F16).unwrap();
        assert_eq!(s.scale, INITIAL_SCALE);
        s.update(Precision::F16, false);
        assert_eq!((s.scale, s.skipped), (INITIAL_SCALE / 2.0, 1));
        for _ in 0..GROWTH_INTERVAL - 1 {
            s.update(Precision::F16, true);
        }
        assert_eq!(s.scale, INITIAL_SCALE / 2.0);
        s.update(Precision::F16, true);
        assert_eq!((s.scale, s.clean_steps), (INITIAL_SCALE, 0));
        // bf16 counts skips but never scales.
        let mut b = LossScale::initial(Precision::Bf16).unwrap();
        b.update(Precision::Bf16, false);
        assert_eq!((b.scale, b.skipped), (1.0, 1));
        assert!(LossScale::initial(Precision::F32).is_none());
    }

    #[test]
    fn the_cpu_backend_refuses_half_precision() {
        let e = check(Precision::F16, &[Device::flex()]).unwrap_err();
        assert!(
            e.to_string().contains("CPU backend trains in f32 only"),
            "{e}"
        );
        check(Precision::F32, &[Device::flex()]).unwrap();
    }
}
