// out = x·W + b for x [rows, K], W [K, N] row-major: a workgroup computes RB rows × WG·CPT
// columns, each thread CPT columns of RB rows, so every weight read serves RB rows.
// Written by store() (the epilogue: plain, ReLU, or split into queries and the cache).
const K: u32 = {K}u;
const N: u32 = {N}u;
const RB: u32 = {RB}u;
const CPT: u32 = {CPT}u;
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<{WTYPE}>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

{WEIGHTS}
{BINDINGS}

{STORE}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let col0 = wg.x * WG * CPT + lid.x;
    let row0 = wg.y * RB;
    if (row0 >= p.rows) {
        return;
    }
    var acc: array<array<f32, CPT>, RB>;
    var xrow: array<u32, RB>;
    for (var r = 0u; r < RB; r++) {
        xrow[r] = min(row0 + r, p.rows - 1u) * K;
    }
    {ACCUMULATE}
    for (var r = 0u; r < RB; r++) {
        let row = row0 + r;
        for (var c = 0u; c < CPT; c++) {
            let j = col0 + c * WG;
            if (row < p.rows && j < N) {
                store(row, j, acc[r][c] * column_scale(j) + b[j]);
            }
        }
    }
}
