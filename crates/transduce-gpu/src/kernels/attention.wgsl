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
const WG: u32 = 64u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> sources: array<Source>;
@group(0) @binding(3) var<storage, read> history: array<u32>;
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, read> kv: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

var<workgroup> scores: array<f32, MAXN>;
var<workgroup> partial: array<f32, WG>;

{ENTRY}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let h = wg.x;
    let r = wg.y + wg.z * 65535u;
    if (r >= p.rows) {
        return;
    }
    let n = key_count(r);
    let qb = r * QS + QO + h * DK;
    var m = -3.0e38;
    for (var j = lid.x; j < n; j += WG) {
        let kb = key_row(r, j) * KVS + KO + h * DK;
        var s = 0.0;
        for (var i = 0u; i < DK; i++) {
            s = fma(q[qb + i], kv[kb + i], s);
        }
        s = s / SCALE;
        scores[j] = s;
        m = max(m, s);
    }
    partial[lid.x] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            partial[lid.x] = max(partial[lid.x], partial[lid.x + s]);
        }
        workgroupBarrier();
    }
    m = partial[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var j = lid.x; j < n; j += WG) {
        let e = exp(scores[j] - m);
        scores[j] = e;
        sum += e;
    }
    partial[lid.x] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            partial[lid.x] += partial[lid.x + s];
        }
        workgroupBarrier();
    }
    let total = partial[0];
    for (var i = lid.x; i < DV; i += WG) {
        var acc = 0.0;
        for (var j = 0u; j < n; j++) {
            acc = fma(scores[j] / total, kv[key_row(r, j) * KVS + VO + h * DV + i], acc);
        }
        out[r * H * DV + h * DV + i] = acc;
    }
}
