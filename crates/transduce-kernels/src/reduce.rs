//! The row reductions the kernels share: a sum or maximum over the threads that hold one
//! row's partial values, read by every lane ([`across_lanes`]: attention, layer norm) or
//! folded in two levels ([`across_groups`]: the loss's 256-thread rows).

use burn_cubecl::cubecl;
use burn_cubecl::cubecl::prelude::*;

/// The sum (`max` false) or maximum of `value` over the `lanes` threads whose slots in
/// `shared` are `base..base + lanes` (this thread's is `base + lane`), the same in each of
/// them. Each thread reads the row's values in the same order, so every lane holds the same
/// result after one barrier, with no tree. Every thread of the workgroup must call it (it
/// synchronizes the workgroup); the slots are rewritten by the next call.
#[cube]
pub fn across_lanes(
    shared: &mut Shared<[f32]>,
    value: f32,
    base: usize,
    lane: usize,
    #[comptime] lanes: usize,
    #[comptime] max: bool,
) -> f32 {
    shared[base + lane] = value;
    sync_cube();
    let mut total = shared[base];
    for i in 1..lanes {
        let x = shared[base + i];
        if max {
            if x > total {
                total = x;
            }
        } else {
            total += x;
        }
    }
    sync_cube();
    total
}

/// The sum (`max` false) or maximum of `value` over the `threads` threads of the workgroup,
/// the same in every thread, in two levels of `group` (workgroup memory is written outside
/// loops only): for workgroups too wide for every thread to read every slot. Every thread
/// must call it.
#[cube]
pub fn across_groups(
    shared: &mut Shared<[f32]>,
    value: f32,
    #[comptime] threads: usize,
    #[comptime] group: usize,
    #[comptime] max: bool,
) -> f32 {
    let t = UNIT_POS as usize;
    shared[t] = value;
    sync_cube();
    let mut part = shared[t * group % threads];
    if t < group {
        for i in 1..group {
            let other = shared[t * group + i];
            if max {
                part = f32::max(part, other);
            } else {
                part += other;
            }
        }
    }
    sync_cube();
    if t < group {
        shared[t] = part;
    }
    sync_cube();
    let mut total = shared[0];
    for i in 1..group {
        let other = shared[i];
        if max {
            total = f32::max(total, other);
        } else {
            total += other;
        }
    }
    sync_cube();
    total
}
