// Scaled dot-product attention (§3.2.1) of one row's query over its keys, for one head
// (§3.2.2): a workgroup per (head, row). Keys and values come from {KEYS}.
const H: u32 = {H}u;
const DK: u32 = {DK}u;
const DV: u32 = {DV}u;
// Queries: row r's heads start at q[r * QS + QO].
const QS: u32 = {QS}u;
const QO: u32 = {QO}u;
// Keys and values: entry j's key of head h at kv[j' * KVS + KO + h * DK], its value at
// kv[j' * KVS + VO + h * DV], j' the entry's row in kv.
const KVS: u32 = {KVS}u;
const KO: u32 = {KO}u;
const VO: u32 = {VO}u;
const CAP: u32 = {CAP}u;
const MAXN: u32 = {MAXN}u;
const SCALE: f32 = {SCALE};
// Queries, keys and values are read four dimensions to a load (qload, kvload).
const DK4: u32 = (DK + 3u) / 4u;
const DV4: u32 = (DV + 3u) / 4u;
// 256 threads: in the scores, SPARTS threads share a key (each a slice of its DK4 words);
// in the weighted values, VPARTS threads share four output dimensions (each a slice of the
// keys). Partial sums meet in workgroup memory and are added in slice order.
const T: u32 = 256u;
const SPARTS: u32 = 16u;
const SLANES: u32 = T / SPARTS;
const DKP: u32 = (DK4 + SPARTS - 1u) / SPARTS;
const VPARTS: u32 = 16u;
const VLANES: u32 = T / VPARTS;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> sources: array<Source>;
@group(0) @binding(3) var<storage, read> history: array<u32>;
{LOADS}
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> scores: array<f32, MAXN>;
var<workgroup> partial: array<f32, T>;
var<workgroup> vpartial: array<vec4<f32>, T>;
// The key count, loaded through workgroup memory so that loops with barriers may depend on it.
var<workgroup> count: u32;

{ENTRY}

// The SPARTS partial sums of the scores' key `lane`, in part order.
fn score_parts_sum(lane: u32) -> f32 {
    var v = partial[lane];
    for (var o = 1u; o < SPARTS; o++) {
        v += partial[o * SLANES + lane];
    }
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let r = wg.y + wg.z * 65535u;
    if (r >= p.rows) {
        return;
    }
    if (lid.x == 0u) {
        count = key_count(r);
    }
    let n = workgroupUniformLoad(&count);
    let qb = r * QS + QO + h * DK;
    // Scores: thread (key lane, part) sums its slice of the words; part 0 adds the slices
    // in order.
    let slane = lid.x % SLANES;
    let spart = lid.x / SLANES;
    let ib = min(spart * DKP, DK4);
    let ie = min(ib + DKP, DK4);
    var m = -3.0e38;
    for (var base = 0u; base < n; base += SLANES) {
        let j = base + slane;
        var s = 0.0;
        if (j < n) {
            let kb = key_row(r, j) * KVS + KO + h * DK;
            for (var i = ib; i < ie; i++) {
                s += dot(qload(qb, i), kvload(kb, i, DK));
            }
        }
        partial[spart * SLANES + slane] = s;
        workgroupBarrier();
        if (spart == 0u && j < n) {
            let scaled = score_parts_sum(slane) / SCALE;
            scores[j] = scaled;
            m = max(m, scaled);
        }
        workgroupBarrier();
    }
    partial[lid.x] = m;
    workgroupBarrier();
    for (var s = T / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            partial[lid.x] = max(partial[lid.x], partial[lid.x + s]);
        }
        workgroupBarrier();
    }
    m = partial[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var j = lid.x; j < n; j += T) {
        let e = exp(scores[j] - m);
        scores[j] = e;
        sum += e;
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var s = T / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            partial[lid.x] += partial[lid.x + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    // Weighted values: thread (word lane, part) sums four dimensions over its slice of the
    // keys; part 0 adds the slices in order.
    let lane = lid.x % VLANES;
    let part = lid.x / VLANES;
    let np = (n + VPARTS - 1u) / VPARTS;
    let jb = min(part * np, n);
    let je = min(jb + np, n);
    for (var base = 0u; base < DV4; base += VLANES) {
        let i = base + lane;
        var acc = vec4<f32>(0.0);
        if (i < DV4) {
            for (var j = jb; j < je; j++) {
                let v = kvload(key_row(r, j) * KVS + VO + h * DV, i, DV);
                acc = fma(vec4<f32>(scores[j] / total), v, acc);
            }
        }
        vpartial[part * VLANES + lane] = acc;
        workgroupBarrier();
        if (part == 0u && i < DV4) {
            var v = vpartial[lane];
            for (var o = 1u; o < VPARTS; o++) {
                v += vpartial[o * VLANES + lane];
            }
            for (var c = 0u; c < 4u; c++) {
                if (4u * i + c < DV) {
                    out[r * H * DV + h * DV + 4u * i + c] = v[c];
                }
            }
        }
        workgroupBarrier();
    }
}
