//! The mask kernel in f32, f16 and bf16 against what can be its oracle: a mask is random,
//! so the unfused path (burn's Bernoulli draw, whose seed comes from the host) gives other
//! elements; what must agree is the distribution (the share kept, the two values) and the
//! mask being one function of (seed, step, site, element).

use burn::tensor::{Distribution, FloatDType, Tensor};

use super::step_masks;
use crate::testing::{gpu_lock, wgpu_device};

/// Elements per mask: the share kept is then within 5σ = 5·√(keep(1 − keep)/n) ≈ 0.006 of
/// keep, by chance, with probability 1 − 6·10⁻⁷.
const N: usize = 1 << 16;

fn floats(t: Tensor<1>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_to_vec::<f32>().unwrap()
}

/// The share of nonzero elements.
fn kept(mask: &[f32]) -> f64 {
    mask.iter().filter(|&&x| x != 0.0).count() as f64 / mask.len() as f64
}

/// In each type the device has: every element 0 or 1/keep as the type rounds it, the share
/// kept that of burn's own dropout mask (both within 5σ of keep), the same elements kept in
/// every type (the hash does not depend on it), the same mask for the same (step, site) and
/// another for another site; and under autodiff the gradient of x·mask is the mask the
/// forward multiplied by.
#[test]
fn masks_have_the_oracles_distribution_in_every_type() {
    let _serial = gpu_lock();
    let Some(device) = wgpu_device("masks_have_the_oracles_distribution_in_every_type") else {
        return;
    };
    let keep = 0.9;
    let sigma5 = 5.0 * (keep * (1.0 - keep) / N as f64).sqrt();
    let step = Tensor::<1>::from_floats([7.0], &device);
    let masks = step_masks(step, 42);
    let mut f32_pattern: Option<Vec<bool>> = None;
    for (name, dtype) in [
        ("f32", FloatDType::F32),
        ("f16", FloatDType::F16),
        ("bf16", FloatDType::BF16),
    ] {
        if !device.supports_dtype(dtype) {
            transduce_testing::skip_part(format_args!(
                "dropout masks in {name}: the adapter has no {name}"
            ));
            continue;
        }
        let like = Tensor::<1>::zeros([N], &device).cast(dtype);
        let mask = masks(like.clone(), 3, keep);
        assert_eq!(
            mask.dtype(),
            like.dtype(),
            "{name}: the mask has the input's type"
        );
        let values = floats(mask.clone());
        let scale = floats(Tensor::<1>::from_floats([(1.0 / keep) as f32], &device).cast(dtype))[0];
        assert!(
            values.iter().all(|&x| x == 0.0 || x == scale),
            "{name}: values 0 or {scale}"
        );
        let share = kept(&values);
        assert!(
            (share - keep).abs() < sigma5,
            "{name}: kept {share}, keep {keep}"
        );
        // burn's mask (the unfused path's draw) keeps the same share.
        let bernoulli = floats(like.clone().random_like(Distribution::Bernoulli(keep)));
        let theirs = kept(&bernoulli);
        assert!(
            (theirs - keep).abs() < sigma5,
            "{name}: burn's kept {theirs}"
        );
        // One function of (seed, step, site, element): the same elements in every type,
        // the same mask drawn again, another site another mask.
        let pattern: Vec<bool> = values.iter().map(|&x| x != 0.0).collect();
        match &f32_pattern {
            Some(first) => assert!(first == &pattern, "{name}: other elements than f32's"),
            None => f32_pattern = Some(pattern),
        }
        assert_eq!(
            floats(masks(like.clone(), 3, keep)),
            values,
            "{name}: drawn again"
        );
        assert_ne!(floats(masks(like, 4, keep)), values, "{name}: another site");
    }
    // The backward multiplies by the forward's mask: d(Σ x·mask)/dx is the mask.
    let ad = device.autodiff();
    let masks = step_masks(Tensor::<1>::from_floats([7.0], &ad.clone().inner()), 42);
    let x = Tensor::<1>::ones([N], &ad).require_grad();
    let mask = Tensor::<1>::from_inner(masks(x.clone().inner(), 3, keep));
    let y = x.clone() * mask.clone();
    let dx = x.grad(&y.clone().sum().backward()).unwrap();
    assert_eq!(
        floats(dx),
        floats(y.inner()),
        "the gradient's mask is the forward's"
    );
}
