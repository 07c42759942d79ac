// out = x·W + b for x [rows, K] and W [K, N], W held as [KW, N] words of four consecutive
// inputs of a column (KW = ⌈K/4⌉; vec4 of f32 or f16, or four int8 in a u32: weights.rs),
// so every load brings four inputs. A workgroup of 256 threads computes RB rows ×
// LANES·CPT columns: LANES column lanes × SLICES slices of the inner dimension, so at
// batch 1 a thread walks KW / SLICES words, not K values (split-K). Each thread holds CPT
// columns of RB rows (every weight read serves RB rows); the slices' partial sums meet in
// workgroup memory and are added in slice order, each thread then finishing one (row,
// column) pair of them. Written by store() (the epilogue: plain, ReLU, or split into
// queries and the cache).
const K: u32 = {K}u;
const N: u32 = {N}u;
const RB: u32 = {RB}u;
const CPT: u32 = {CPT}u;
const LANES: u32 = {LANES}u;
const SLICES: u32 = {SLICES}u;
// Words of the inner dimension, and one slice's share of them.
const KW: u32 = {KW}u;
const KS: u32 = (KW + SLICES - 1u) / SLICES;

@group(0) @binding(0) var<uniform> p: Params;
{XLOAD}
@group(0) @binding(2) var<storage, read> w: array<{WTYPE}>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

{WEIGHTS}
{BINDINGS}

{STORE}

// Every slice's partial sums: [slice][row][column][lane].
var<workgroup> partial: array<f32, SLICES * RB * CPT * LANES>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let lane = lid.x % LANES;
    let slice = lid.x / LANES;
    let col0 = wg.x * LANES * CPT + lane;
    let row0 = wg.y * RB;
    if (row0 >= p.rows) {
        return;
    }
    // Plain variables after unrolling (constant bounds): the compiler keeps them in registers.
    var acc: array<array<f32, CPT>, RB>;
    var xrow: array<u32, RB>;
    var cols: array<u32, CPT>;
    for (var r = 0u; r < RB; r++) {
        xrow[r] = min(row0 + r, p.rows - 1u);
    }
    for (var c = 0u; c < CPT; c++) {
        cols[c] = min(col0 + c * LANES, N - 1u);
    }
    let kb = min(slice * KS, KW);
    let ke = min(kb + KS, KW);
    for (var k4 = kb; k4 < ke; k4++) {
        var wv: array<vec4<f32>, CPT>;
        for (var c = 0u; c < CPT; c++) {
            wv[c] = weight(k4 * N + cols[c]);
        }
        for (var r = 0u; r < RB; r++) {
            let xv = xload(xrow[r], k4);
            for (var c = 0u; c < CPT; c++) {
                acc[r][c] += dot(xv, wv[c]);
            }
        }
    }
    for (var r = 0u; r < RB; r++) {
        for (var c = 0u; c < CPT; c++) {
            partial[((slice * RB + r) * CPT + c) * LANES + lane] = acc[r][c];
        }
    }
    workgroupBarrier();
    // RB·CPT pairs, SLICES threads per lane: each finishes every SLICES-th pair.
    for (var pair = slice; pair < RB * CPT; pair += SLICES) {
        let r = pair / CPT;
        let c = pair % CPT;
        var sum = 0.0;
        for (var s = 0u; s < SLICES; s++) {
            sum += partial[((s * RB + r) * CPT + c) * LANES + lane];
        }
        let row = row0 + r;
        let j = col0 + c * LANES;
        if (row < p.rows && j < N) {
            store(row, j, sum * column_scale(j) + b[j]);
        }
    }
}
