//! Device copies of the forward pass's constants (the sinusoids of §3.5 and the causal mask
//! of §3.2.3), made once per device and shape and then reused.
//!
//! Uploading them on every forward pass is a host write per pass; a training step replayed
//! as a captured graph may contain none (the recorded launches read the buffers of the
//! capture, and a GPU capture fails on a host write). Reusing them also saves the upload
//! on every eager step. At most [`CAPACITY`] are kept per thread, the least recently used
//! dropped first, so decoding many sentence lengths does not grow memory without bound.

use std::cell::RefCell;

use burn::prelude::*;
use burn::tensor::TensorData;

/// Constants kept per thread.
const CAPACITY: usize = 48;

#[derive(Clone, PartialEq)]
enum Key {
    /// Sinusoids for positions `0..len` of width `d_model`.
    Sinusoid { len: usize, d_model: usize },
    /// The causal mask of `t` positions.
    Causal { t: usize },
}

#[derive(Clone)]
enum Value {
    Float(Tensor<3>),
    Bool(Tensor<4, Bool>),
}

thread_local! {
    /// Most recently used last.
    static KEPT: RefCell<Vec<(Device, Key, Value)>> = const { RefCell::new(Vec::new()) };
}

fn kept(device: &Device, key: Key, make: impl FnOnce() -> Value) -> Value {
    KEPT.with(|kept| {
        let mut kept = kept.borrow_mut();
        if let Some(i) = kept.iter().position(|(d, k, _)| d == device && *k == key) {
            let entry = kept.remove(i);
            let value = entry.2.clone();
            kept.push(entry);
            return value;
        }
        let value = make();
        if kept.len() == CAPACITY {
            kept.remove(0);
        }
        kept.push((device.clone(), key, value.clone()));
        value
    })
}

/// [`crate::embedding::sinusoid`] for positions `0..len`, `[1, len, d_model]`, on
/// `device`'s inner (non-autodiff) device: a constant.
pub fn sinusoid(len: usize, d_model: usize, device: &Device) -> Tensor<3> {
    let device = device.clone().inner();
    let key = Key::Sinusoid { len, d_model };
    match kept(&device, key, || {
        Value::Float(crate::embedding::sinusoid(0, len, d_model, &device))
    }) {
        Value::Float(table) => table,
        Value::Bool(_) => unreachable!("a sinusoid key holds a float tensor"),
    }
}

/// The causal mask of `t` positions (§3.2.3), `[1, 1, t, t]`, on `device`'s inner
/// (non-autodiff) device: true above the diagonal, where position i may not attend to
/// j > i.
pub fn causal_mask(t: usize, device: &Device) -> Tensor<4, Bool> {
    let device = device.clone().inner();
    match kept(&device, Key::Causal { t }, || {
        let data: Vec<bool> = (0..t * t).map(|ij| ij % t > ij / t).collect();
        let mask = Tensor::<2, Bool>::from_data(TensorData::new(data, [t, t]), &device);
        Value::Bool(mask.reshape([1, 1, t, t]))
    }) {
        Value::Bool(mask) => mask,
        Value::Float(_) => unreachable!("a causal key holds a bool tensor"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_constants_equal_fresh_ones_and_stay_bounded() {
        let device = Device::flex();
        for len in 1..=CAPACITY + 5 {
            let kept = sinusoid(len, 8, &device).into_data();
            let fresh = crate::embedding::sinusoid(0, len, 8, &device).into_data();
            assert_eq!(kept, fresh);
        }
        for _ in 0..2 {
            let mask = causal_mask(5, &device);
            assert_eq!(mask.dims(), [1, 1, 5, 5]);
            let above_diagonal: Vec<bool> =
                (0..5).flat_map(|i| (0..5).map(move |j| j > i)).collect();
            let values: Vec<bool> = mask.into_data().iter::<bool>().collect();
            assert_eq!(values, above_diagonal);
        }
        assert!(KEPT.with(|k| k.borrow().len()) <= CAPACITY);
    }
}
