//! Dropout (§5.4): during training each element is zeroed with probability P_drop and the
//! survivors are scaled by 1/(1 − P_drop), so that inference needs no rescaling.
//!
//! The mask is one tensor of 0 and 1/(1 − P_drop) multiplied in once. On the CPU backend
//! it is drawn in bulk with SplitMix64 ([`crate::rng`]) from a seed taken from the backend's own generator,
//! so a run seeded per step (as the trainer does) reproduces its masks exactly; burn's
//! generic path builds a sampler per element over ChaCha, which cost 5–6% of a CPU
//! training step. Other backends (wgpu, CUDA) draw the mask on the device.

use std::cell::RefCell;
use std::rc::Rc;

use burn::module::Module;
use burn::tensor::{Device, Distribution, Tensor, TensorData};

use crate::rng::Rng;

/// Draws a mask on the device for a step captured as a graph, where the host may draw
/// nothing (a seed passed to a kernel would be replayed unchanged): given the input
/// flattened to `[n]` (its shape and device), the dropout site's number within the step
/// and the keep probability, it returns the `[n]` mask of 0 and 1/keep. The generator
/// reads its step from device memory, so each replay draws new masks.
pub type DeviceMasks = Rc<dyn Fn(Tensor<1>, u64, f64) -> Tensor<1>>;

thread_local! {
    /// The mask generator of the step being traced, and the next site's number.
    static DEVICE_MASKS: RefCell<Option<(DeviceMasks, u64)>> = const { RefCell::new(None) };
}

/// Runs `step` with every dropout drawing its mask from `masks`, sites numbered from 0 in
/// the order they run.
pub fn with_device_masks<R>(masks: DeviceMasks, step: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DEVICE_MASKS.with(|m| m.borrow_mut().take());
        }
    }
    DEVICE_MASKS.with(|m| *m.borrow_mut() = Some((masks, 0)));
    let _reset = Reset;
    step()
}

/// The device mask generator, if a step set one, and this site's number.
fn device_masks() -> Option<(DeviceMasks, u64)> {
    DEVICE_MASKS.with(|m| {
        let mut m = m.borrow_mut();
        let (masks, site) = m.as_mut()?;
        let this = *site;
        *site += 1;
        Some((masks.clone(), this))
    })
}

/// Zeroes each element with probability `prob` while the input is on an autodiff device
/// (training); the identity otherwise (inference).
#[derive(Module, Debug)]
pub struct Dropout {
    prob: f64,
}

impl Dropout {
    /// `prob` in `[0, 1)`; the model config validates it before any layer is built.
    pub fn new(prob: f64) -> Self {
        Dropout { prob }
    }

    /// P_drop.
    pub fn prob(&self) -> f64 {
        self.prob
    }

    pub fn forward<const D: usize>(&self, input: Tensor<D>) -> Tensor<D> {
        let device = input.device();
        if self.prob == 0.0 || !device.is_autodiff() {
            return input;
        }
        let keep = 1.0 - self.prob;
        if let Some((masks, site)) = device_masks() {
            let dims = input.dims();
            let n = input.shape().num_elements();
            let mask = masks(input.clone().inner().reshape([n]), site, keep);
            return input * mask.reshape(dims);
        }
        if crate::ops::is_flex(&device) {
            let seed = backend_seed(&device);
            let mask = bulk_mask(input.shape().num_elements(), keep, seed);
            let mask = Tensor::<D>::from_data(TensorData::new(mask, input.shape()), &device);
            input * mask
        } else {
            let mask = input.random_like(Distribution::Bernoulli(keep));
            input * mask.mul_scalar(1.0 / keep)
        }
    }
}

/// 64 bits from the backend's generator: four uniform floats, their bits mixed.
fn backend_seed(device: &Device) -> u64 {
    let draws = Tensor::<1>::random([4], Distribution::Default, device).into_data();
    draws.iter::<f32>().fold(0, |seed, value| {
        Rng::new(seed ^ u64::from(value.to_bits())).next_u64()
    })
}

/// `n` mask values, each 1/keep with probability `keep` and 0 otherwise.
fn bulk_mask(n: usize, keep: f64, seed: u64) -> Vec<f32> {
    // An element survives when a uniform 32-bit draw falls below keep · 2³².
    let threshold = (keep * 4_294_967_296.0) as u64;
    let scale = (1.0 / keep) as f32;
    let pick = |bits: u64| if bits < threshold { scale } else { 0.0 };
    let mut rng = Rng::new(seed);
    let mut mask = Vec::with_capacity(n);
    for _ in 0..n / 2 {
        let r = rng.next_u64();
        mask.push(pick(r & 0xFFFF_FFFF));
        mask.push(pick(r >> 32));
    }
    if n % 2 == 1 {
        mask.push(pick(rng.next_u64() & 0xFFFF_FFFF));
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ones(n: usize, device: &Device) -> Tensor<1> {
        Tensor::<1>::ones([n], device)
    }

    fn values(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    /// Kept fraction, and every survivor scaled by 1/keep so the expectation is unchanged.
    fn check_statistics(device: &Device, prob: f64) {
        let n = 200_000;
        let out = values(Dropout::new(prob).forward(ones(n, device)));
        let keep = 1.0 - prob;
        let scale = (1.0 / keep) as f32;
        assert!(
            out.iter().all(|&v| v == 0.0 || v == scale),
            "values other than 0 and 1/keep"
        );
        let kept = out.iter().filter(|&&v| v != 0.0).count() as f64 / n as f64;
        // Binomial standard deviation √(keep·prob/n) ≈ 0.001 here; 5σ.
        let sigma = (keep * prob / n as f64).sqrt();
        assert!(
            (kept - keep).abs() < 5.0 * sigma,
            "kept {kept}, expected {keep}"
        );
        // Survivors are independent of position: both halves keep about the same share.
        let half = out[..n / 2].iter().filter(|&&v| v != 0.0).count() as f64 / (n / 2) as f64;
        assert!(
            (half - keep).abs() < 5.0 * sigma * 2f64.sqrt(),
            "first half kept {half}"
        );
    }

    #[test]
    fn keeps_the_expected_share_scaled_on_the_cpu_path() {
        let device = Device::flex().autodiff();
        check_statistics(&device, 0.1);
        check_statistics(&device, 0.3);
    }

    #[test]
    fn keeps_the_expected_share_scaled_on_the_generic_path() {
        // Any backend other than flex takes the generic path: wgpu, where there is an
        // adapter (lavapipe on a machine without a GPU).
        let Some(gpu) = transduce_kernels::testing::wgpu_device("dropout's generic path") else {
            return;
        };
        check_statistics(&gpu.autodiff(), 0.1);
    }

    #[test]
    fn identity_outside_training_and_at_zero() {
        let x = Tensor::<1>::from_floats([1.0, -2.0, 3.0], &Device::flex());
        assert_eq!(
            values(Dropout::new(0.5).forward(x.clone())),
            vec![1.0, -2.0, 3.0]
        );
        let device = Device::flex().autodiff();
        let x = Tensor::<1>::from_floats([1.0, -2.0, 3.0], &device);
        assert_eq!(values(Dropout::new(0.0).forward(x)), vec![1.0, -2.0, 3.0]);
    }

    #[test]
    fn masks_follow_the_backend_seed() {
        let device = Device::flex().autodiff();
        let draw = |seed| {
            device.seed(seed);
            values(Dropout::new(0.5).forward(ones(1000, &device)))
        };
        let (a, b, c) = (draw(7), draw(7), draw(8));
        assert_eq!(a, b, "same seed, same mask");
        assert_ne!(a, c, "another seed, another mask");
        // Two calls in one step draw different masks.
        device.seed(7);
        let first = values(Dropout::new(0.5).forward(ones(1000, &device)));
        let second = values(Dropout::new(0.5).forward(ones(1000, &device)));
        assert_ne!(first, second);
    }

    #[test]
    fn gradient_is_the_mask() {
        let device = Device::flex().autodiff();
        let x = ones(1000, &device).require_grad();
        let y = Dropout::new(0.25).forward(x.clone());
        let grads = y.clone().sum().backward();
        let gx = values(x.grad(&grads).unwrap());
        assert_eq!(gx, values(y), "d(x·m)/dx = m, and y = m for x = 1");
    }
}
