// Log-softmax and top-k (§6.1), first of two passes: the vocabulary in parts of CHUNK words,
// one workgroup per (part, row), so a large vocabulary runs over many workgroups. Each
// writes its part's maximum logit and sum of exp(logit − maximum), and the part's KSEL best
// allowed tokens by raw logit (best first, ties to the smaller id; id 0xffffffff when none
// is left). select_merge.wgsl combines the parts. PAD and BOS are never chosen but count in
// the normalisation; masked tokens (the constraint of §6.3, or EOS alone at the length
// limit) are skipped. Global memory is read once (CHUNK / 256 logits a thread, held in
// registers), the maximum and the sum found together in that pass (one reduction of
// (maximum, sum) pairs, as select_merge.wgsl combines the parts); the KSEL rounds of
// selection, each a workgroup argmax over the threads' next best, read the registers.
const V: u32 = {V}u;
const KSEL: u32 = {KSEL}u;
const WORDS: u32 = {WORDS}u;
const PAD: u32 = {PAD}u;
const BOS: u32 = {BOS}u;
const EOS: u32 = {EOS}u;
const CHUNK: u32 = {CHUNK}u;
const PARTS: u32 = {PARTS}u;
const WG: u32 = 256u;
// Words of the part per thread.
const PER: u32 = (CHUNK + WG - 1u) / WG;
const NONE: u32 = 0xffffffffu;

struct Candidate {
    log_prob: f32,
    id: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> masks: array<u32>;
@group(0) @binding(3) var<storage, read> rows: array<Row>;
@group(0) @binding(4) var<storage, read_write> part_stats: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> part_best: array<Candidate>;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;
var<workgroup> sums: array<f32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let part = wg.x;
    let r = wg.y;
    if (r >= p.rows) {
        return;
    }
    let base = r * V;
    let begin = part * CHUNK;
    let end = min(begin + CHUNK, V);
    let masked = (p.flags & 1u) != 0u;
    let at_limit = p.t + 1u >= rows[r].limit;
    // One pass over global memory: the thread's PER logits, and whether each may be chosen,
    // into registers; every later pass reads those.
    var vals: array<f32, PER>;
    var allowed: array<bool, PER>;
    // The thread's maximum and its sum of exp(logit − maximum) as it goes (the sum
    // rescaled when the maximum grows), then one reduction of the pairs.
    var m = -3.0e38;
    var sum = 0.0;
    for (var u = 0u; u < PER; u++) {
        let i = begin + lid.x + u * WG;
        vals[u] = -3.0e38;
        allowed[u] = false;
        if (i < end) {
            let v = logits[base + i];
            vals[u] = v;
            if (v > m) {
                sum = sum * exp(m - v) + 1.0;
                m = v;
            } else {
                sum += exp(v - m);
            }
            allowed[u] = i != PAD && i != BOS
                && !(masked && ((masks[r * WORDS + i / 32u] >> (i % 32u)) & 1u) == 0u)
                && !(at_limit && i != EOS);
        }
    }
    best_v[lid.x] = m;
    sums[lid.x] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            let m1 = best_v[lid.x];
            let m2 = best_v[lid.x + s];
            let top = max(m1, m2);
            sums[lid.x] = sums[lid.x] * exp(m1 - top) + sums[lid.x + s] * exp(m2 - top);
            best_v[lid.x] = top;
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        part_stats[r * PARTS + part] = vec2<f32>(best_v[0], sums[0]);
    }
    workgroupBarrier();

    // The last candidate taken: the next must come strictly after it in the ranking.
    var prev_v = 3.0e38;
    var prev_i = NONE;
    for (var c = 0u; c < KSEL; c++) {
        var bv = -3.0e38;
        var bi = NONE;
        for (var u = 0u; u < PER; u++) {
            let i = begin + lid.x + u * WG;
            let v = vals[u];
            let after = v < prev_v || (v == prev_v && (prev_i == NONE || i > prev_i));
            if (allowed[u] && after && (bi == NONE || v > bv)) {
                bv = v;
                bi = i;
            }
        }
        best_v[lid.x] = bv;
        best_i[lid.x] = bi;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid.x < s) {
                let ov = best_v[lid.x + s];
                let oi = best_i[lid.x + s];
                let mine = best_i[lid.x];
                if (oi != NONE && (mine == NONE || ov > best_v[lid.x] || (ov == best_v[lid.x] && oi < mine))) {
                    best_v[lid.x] = ov;
                    best_i[lid.x] = oi;
                }
            }
            workgroupBarrier();
        }
        prev_v = best_v[0];
        prev_i = best_i[0];
        workgroupBarrier();
        if (lid.x == 0u) {
            part_best[(r * PARTS + part) * KSEL + c] = Candidate(prev_v, prev_i);
        }
    }
}
