// The sub-layer's output projection with the residual connection and LayerNorm (§3.1,
// post-norm): res = LayerNorm(res + x·W + b). A workgroup holds RB whole rows (all N = d_model
// columns, CPT per thread), so the row statistics never leave it.
const K: u32 = {K}u;
const N: u32 = {N}u;
const RB: u32 = {RB}u;
const CPT: u32 = {CPT}u;
const WG: u32 = 64u;
const EPSILON: f32 = 1e-5;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<{WTYPE}>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

{WEIGHTS}
@group(0) @binding(4) var<storage, read> gamma: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read_write> res: array<f32>;

var<workgroup> partial: array<f32, WG>;

// Sum of every thread's `v` (all threads must call it).
fn total(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            partial[lid] += partial[lid + s];
        }
        workgroupBarrier();
    }
    let t = partial[0];
    workgroupBarrier();
    return t;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.y * RB;
    if (row0 >= p.rows) {
        return;
    }
    var acc: array<array<f32, CPT>, RB>;
    let col0 = lid.x;
    var xrow: array<u32, RB>;
    for (var r = 0u; r < RB; r++) {
        xrow[r] = min(row0 + r, p.rows - 1u) * K;
    }
    {ACCUMULATE}
    for (var r = 0u; r < RB; r++) {
        let row = min(row0 + r, p.rows - 1u);
        var v: array<f32, CPT>;
        var s = 0.0;
        for (var c = 0u; c < CPT; c++) {
            let j = lid.x + c * WG;
            if (j < N) {
                v[c] = res[row * N + j] + (acc[r][c] * column_scale(j) + b[j]);
                s += v[c];
            }
        }
        let mean = total(s, lid.x) / f32(N);
        var q = 0.0;
        for (var c = 0u; c < CPT; c++) {
            if (lid.x + c * WG < N) {
                let d = v[c] - mean;
                q += d * d;
            }
        }
        let scale = 1.0 / sqrt(total(q, lid.x) / f32(N) + EPSILON);
        if (row0 + r < p.rows) {
            for (var c = 0u; c < CPT; c++) {
                let j = lid.x + c * WG;
                if (j < N) {
                    res[row * N + j] = (v[c] - mean) * scale * gamma[j] + beta[j];
                }
            }
        }
    }
}
