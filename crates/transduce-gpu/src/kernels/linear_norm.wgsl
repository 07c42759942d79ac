// The sub-layer's output projection with the residual connection and LayerNorm (§3.1,
// post-norm): res = LayerNorm(res + x·W + b). A workgroup of 256 threads holds RB whole
// rows (all N = d_model columns): LANES column lanes (CPT columns each) × SLICES slices of
// the inner dimension, so a thread walks K / SLICES. Row by row, the slices' partial sums
// meet in workgroup memory, the first slice adds them in slice order, and then all 256
// threads add the residual and normalize the row, N / 256 columns each (the row statistics
// never leave the workgroup).
const K: u32 = {K}u;
const N: u32 = {N}u;
const RB: u32 = {RB}u;
const CPT: u32 = {CPT}u;
const LANES: u32 = {LANES}u;
const SLICES: u32 = {SLICES}u;
const KW: u32 = {KW}u;
const KS: u32 = (KW + SLICES - 1u) / SLICES;
const THREADS: u32 = 256u;
const EPSILON: f32 = 1e-5;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<{WTYPE}>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

{WEIGHTS}
@group(0) @binding(4) var<storage, read> gamma: array<f32>;
@group(0) @binding(5) var<storage, read> beta: array<f32>;
@group(0) @binding(6) var<storage, read_write> res: array<f32>;

// One row's partial sums from slices 1.. ([slice - 1][column][lane]). Its first N entries
// then hold the row's sums by column (entry c·LANES + lane is column lane + c·LANES: each
// first-slice thread overwrites only what it alone reads).
var<workgroup> others: array<f32, (SLICES - 1u) * CPT * LANES>;
var<workgroup> partial: array<f32, THREADS>;

// Sum of every thread's `v` (all threads must call it).
fn total(v: f32, tid: u32) -> f32 {
    partial[tid] = v;
    workgroupBarrier();
    for (var s = THREADS / 2u; s > 0u; s >>= 1u) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        workgroupBarrier();
    }
    let t = partial[0];
    workgroupBarrier();
    return t;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wg.y * RB;
    if (row0 >= p.rows) {
        return;
    }
    let lane = lid.x % LANES;
    let slice = lid.x / LANES;
    var acc: array<array<f32, CPT>, RB>;
    let col0 = lane;
    var xrow: array<u32, RB>;
    for (var r = 0u; r < RB; r++) {
        xrow[r] = min(row0 + r, p.rows - 1u) * K;
    }
    let kb = min(slice * KS, KW);
    let ke = min(kb + KS, KW);
    {ACCUMULATE}
    for (var r = 0u; r < RB; r++) {
        let row = min(row0 + r, p.rows - 1u);
        if (slice > 0u) {
            for (var c = 0u; c < CPT; c++) {
                others[((slice - 1u) * CPT + c) * LANES + lane] = acc[r][c];
            }
        }
        workgroupBarrier();
        if (slice == 0u) {
            for (var c = 0u; c < CPT; c++) {
                var sum = acc[r][c];
                for (var o = 0u; o + 1u < SLICES; o++) {
                    sum += others[(o * CPT + c) * LANES + lane];
                }
                others[c * LANES + lane] = sum;
            }
        }
        workgroupBarrier();
        // Every thread: the residual and the statistics over its columns.
        var v: array<f32, (N + THREADS - 1u) / THREADS>;
        var s = 0.0;
        for (var m = 0u; m * THREADS < N; m++) {
            let j = lid.x + m * THREADS;
            if (j < N) {
                v[m] = res[row * N + j] + (others[j] * column_scale(j) + b[j]);
                s += v[m];
            }
        }
        let mean = total(s, lid.x) / f32(N);
        var q = 0.0;
        for (var m = 0u; m * THREADS < N; m++) {
            if (lid.x + m * THREADS < N) {
                let d = v[m] - mean;
                q += d * d;
            }
        }
        let scale = 1.0 / sqrt(total(q, lid.x) / f32(N) + EPSILON);
        if (row0 + r < p.rows) {
            for (var m = 0u; m * THREADS < N; m++) {
                let j = lid.x + m * THREADS;
                if (j < N) {
                    res[row * N + j] = (v[m] - mean) * scale * gamma[j] + beta[j];
                }
            }
        }
    }
}
