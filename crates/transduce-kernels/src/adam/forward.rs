//! Adam's group kernels as a backend extension: the trait, and its cubecl implementation.

use burn::backend::{Backend, backend_extension, tensor::FloatTensor};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl::calculate_cube_count_elemwise;
use burn_cubecl::cubecl::prelude::*;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;

use super::GROUP;
use super::kernel::{accumulate_group_kernel, adam_group_kernel, finite_group_kernel};

/// A buffer this kernel may write: the tensor's own when nothing else holds it, a copy
/// otherwise (never another tensor's values changed under it).
fn writable(tensor: CubeTensor) -> CubeTensor {
    let tensor = into_contiguous(tensor);
    if tensor.can_mut() {
        tensor
    } else {
        tensor.copy()
    }
}

#[backend_extension(Cube: cfg(all()), Fusion: cfg(all()))]
pub trait AdamKernel: Backend {
    /// Adds the first `count` (≤ [`GROUP`]) gradients `g` into their accumulators `a`, in
    /// place, or on a step's first batch (`flags`: `[tokens, first, batch]`, `first` 1)
    /// sets them to the gradients; the slots past `count` any tensors, returned untouched.
    #[allow(clippy::too_many_arguments)]
    #[fusion(meta = |a0, _g0, a1, _g1, a2, _g2, a3, _g3, _flags, _count| (a0.clone(), a1.clone(), a2.clone(), a3.clone()))]
    fn accumulate_group(
        a0: FloatTensor<Self>,
        g0: FloatTensor<Self>,
        a1: FloatTensor<Self>,
        g1: FloatTensor<Self>,
        a2: FloatTensor<Self>,
        g2: FloatTensor<Self>,
        a3: FloatTensor<Self>,
        g3: FloatTensor<Self>,
        flags: FloatTensor<Self>,
        count: usize,
    ) -> (
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
        FloatTensor<Self>,
    );

    /// Sets `ok` (`[1]`, 1 on entry) to 0 if any of the first `count` (≤ [`GROUP`]) of four
    /// gradients has an element that is not finite; the slots past `count` any tensors.
    #[fusion(meta = |_g0, _g1, _g2, _g3, ok, _count| ok.clone())]
    fn finite_group(
        g0: FloatTensor<Self>,
        g1: FloatTensor<Self>,
        g2: FloatTensor<Self>,
        g3: FloatTensor<Self>,
        ok: FloatTensor<Self>,
        count: usize,
    ) -> FloatTensor<Self>;

    /// Adam (§5.3, burn's arithmetic per element, in place) for the first `count`
    /// (≤ [`GROUP`]) of four parameters in one kernel: `(param, grad, first, second)` per
    /// slot, the slots past `count` any tensors (returned as they are, untouched).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    #[fusion(meta = |p0, _g0, m0, v0, p1, _g1, m1, v1, p2, _g2, m2, v2, p3, _g3, m3, v3, _scalars, _count| (
        (p0.clone(), m0.clone(), v0.clone()),
        (p1.clone(), m1.clone(), v1.clone()),
        (p2.clone(), m2.clone(), v2.clone()),
        (p3.clone(), m3.clone(), v3.clone()),
    ))]
    fn adam_group_in_place(
        p0: FloatTensor<Self>,
        g0: FloatTensor<Self>,
        m0: FloatTensor<Self>,
        v0: FloatTensor<Self>,
        p1: FloatTensor<Self>,
        g1: FloatTensor<Self>,
        m1: FloatTensor<Self>,
        v1: FloatTensor<Self>,
        p2: FloatTensor<Self>,
        g2: FloatTensor<Self>,
        m2: FloatTensor<Self>,
        v2: FloatTensor<Self>,
        p3: FloatTensor<Self>,
        g3: FloatTensor<Self>,
        m3: FloatTensor<Self>,
        v3: FloatTensor<Self>,
        scalars: FloatTensor<Self>,
        count: usize,
    ) -> (
        (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>),
        (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>),
        (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>),
        (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>),
    );
}

impl AdamKernel for CubeBackend {
    fn accumulate_group(
        a0: CubeTensor,
        g0: CubeTensor,
        a1: CubeTensor,
        g1: CubeTensor,
        a2: CubeTensor,
        g2: CubeTensor,
        a3: CubeTensor,
        g3: CubeTensor,
        flags: CubeTensor,
        count: usize,
    ) -> (CubeTensor, CubeTensor, CubeTensor, CubeTensor) {
        let count = count.min(GROUP);
        let pairs = [(a0, g0), (a1, g1), (a2, g2), (a3, g3)];
        let mut out = Vec::with_capacity(GROUP);
        let mut used = Vec::with_capacity(count);
        for (k, (a, g)) in pairs.into_iter().enumerate() {
            if k < count {
                used.push((writable(a), into_contiguous(g)));
            } else {
                out.push(a);
            }
        }
        let n = used
            .iter()
            .map(|(a, _)| a.meta.num_elements())
            .max()
            .unwrap_or(0);
        if n > 0 {
            let client = flags.client.clone();
            let cube_dim = CubeDim::new(&client, n);
            let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
            let sums: SequenceArg<OwnedTensor<f32>> = used
                .iter()
                .map(|(a, _)| a.clone().into_tensor_arg())
                .collect();
            let grads: SequenceArg<OwnedTensor<f32>> = used
                .iter()
                .map(|(_, g)| g.clone().into_tensor_arg())
                .collect();
            // SAFETY: each accumulator and its gradient are contiguous and share a length,
            // which bounds the reads and writes; the flags hold three values.
            unsafe {
                accumulate_group_kernel::launch_unchecked(
                    &client,
                    cube_count,
                    cube_dim,
                    sums,
                    grads,
                    into_contiguous(flags).into_tensor_arg(),
                );
            }
        }
        let mut all = used.into_iter().map(|(a, _)| a).chain(out);
        let mut next = || all.next().expect("four slots");
        (next(), next(), next(), next())
    }

    fn finite_group(
        g0: CubeTensor,
        g1: CubeTensor,
        g2: CubeTensor,
        g3: CubeTensor,
        ok: CubeTensor,
        count: usize,
    ) -> CubeTensor {
        let ok = writable(ok);
        let grads: Vec<CubeTensor> = [g0, g1, g2, g3]
            .into_iter()
            .take(count.min(GROUP))
            .map(into_contiguous)
            .collect();
        let n = grads
            .iter()
            .map(|g| g.meta.num_elements())
            .max()
            .unwrap_or(0);
        if n > 0 {
            let client = ok.client.clone();
            let cube_dim = CubeDim::new(&client, n);
            let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
            let args: SequenceArg<OwnedTensor<f32>> =
                grads.iter().map(|g| g.clone().into_tensor_arg()).collect();
            // SAFETY: each gradient's reads are bounded by its own length; `ok` holds one
            // value.
            unsafe {
                finite_group_kernel::launch_unchecked(
                    &client,
                    cube_count,
                    cube_dim,
                    args,
                    ok.clone().into_tensor_arg(),
                );
            }
        }
        ok
    }

    fn adam_group_in_place(
        p0: CubeTensor,
        g0: CubeTensor,
        m0: CubeTensor,
        v0: CubeTensor,
        p1: CubeTensor,
        g1: CubeTensor,
        m1: CubeTensor,
        v1: CubeTensor,
        p2: CubeTensor,
        g2: CubeTensor,
        m2: CubeTensor,
        v2: CubeTensor,
        p3: CubeTensor,
        g3: CubeTensor,
        m3: CubeTensor,
        v3: CubeTensor,
        scalars: CubeTensor,
        count: usize,
    ) -> (Slot, Slot, Slot, Slot) {
        let slots = [
            [p0, g0, m0, v0],
            [p1, g1, m1, v1],
            [p2, g2, m2, v2],
            [p3, g3, m3, v3],
        ];
        let count = count.min(GROUP);
        let mut slots = slots.into_iter();
        let used: Vec<[CubeTensor; 4]> = slots.by_ref().take(count).collect();
        let mut updated = adam_group(used, scalars).into_iter();
        let mut next = || match updated.next() {
            Some(slot) => slot,
            None => {
                let [p, _, m, v] = slots.next().expect("four slots");
                (p, m, v)
            }
        };
        (next(), next(), next(), next())
    }
}

type Slot = (CubeTensor, CubeTensor, CubeTensor);

/// The group update's kernel over `slots` (parameter, gradient, first, second moment),
/// each flattened; returns each slot's three written buffers.
fn adam_group(slots: Vec<[CubeTensor; 4]>, scalars: CubeTensor) -> Vec<Slot> {
    let scalars = into_contiguous(scalars);
    let scaled = scalars.meta.num_elements() == 5;
    let client = scalars.client.clone();
    let slots: Vec<[CubeTensor; 4]> = slots
        .into_iter()
        .map(|[p, g, m, v]| [writable(p), into_contiguous(g), writable(m), writable(v)])
        .collect();
    let n = slots
        .iter()
        .map(|[p, ..]| p.meta.num_elements())
        .max()
        .unwrap_or(0);
    if n > 0 {
        let cube_dim = CubeDim::new(&client, n);
        let cube_count = calculate_cube_count_elemwise(&client, n, cube_dim);
        let args = |i: usize| -> SequenceArg<OwnedTensor<f32>> {
            slots
                .iter()
                .map(|slot| slot[i].clone().into_tensor_arg())
                .collect()
        };
        // SAFETY: each slot's four tensors are contiguous and share its length, which
        // bounds its reads and writes; the scalars hold three values (five scaled).
        unsafe {
            adam_group_kernel::launch_unchecked(
                &client,
                cube_count,
                cube_dim,
                args(0),
                args(1),
                args(2),
                args(3),
                scalars.into_tensor_arg(),
                scaled,
            );
        }
    }
    slots.into_iter().map(|[p, _, m, v]| (p, m, v)).collect()
}
