// Log-softmax of a row of logits and its KSEL best allowed tokens (§6.1): one workgroup per
// row. PAD and BOS are never chosen but count in the normalisation; masked tokens (the
// constraint of §6.3, or EOS alone at the length limit) are skipped. Candidates come best
// first, ties to the smaller id: (log-probability, id), id 0xffffffff when none is left.
// Greedy (KSEL = 1) also writes the row's next input: its choice (EOS when none) at the next
// position, continuing itself, so the next step can run before the host reads this one.
const V: u32 = {V}u;
const KSEL: u32 = {KSEL}u;
const WORDS: u32 = {WORDS}u;
const PAD: u32 = {PAD}u;
const BOS: u32 = {BOS}u;
const EOS: u32 = {EOS}u;
const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;

struct Candidate {
    log_prob: f32,
    id: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> masks: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<Candidate>;
@group(0) @binding(4) var<storage, read> rows: array<Row>;
@group(0) @binding(5) var<storage, read_write> next_rows: array<Row>;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wg.x + wg.y * 65535u;
    if (r >= p.rows) {
        return;
    }
    let base = r * V;
    var m = -3.0e38;
    for (var i = lid.x; i < V; i += WG) {
        m = max(m, logits[base + i]);
    }
    best_v[lid.x] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            best_v[lid.x] = max(best_v[lid.x], best_v[lid.x + s]);
        }
        workgroupBarrier();
    }
    m = best_v[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var i = lid.x; i < V; i += WG) {
        sum += exp(logits[base + i] - m);
    }
    best_v[lid.x] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            best_v[lid.x] += best_v[lid.x + s];
        }
        workgroupBarrier();
    }
    let shift = m + log(best_v[0]);
    workgroupBarrier();

    let masked = (p.flags & 1u) != 0u;
    let at_limit = p.t + 1u >= rows[r].limit;
    // The last candidate taken: the next must come strictly after it in the ranking.
    var prev_v = 3.0e38;
    var prev_i = NONE;
    for (var c = 0u; c < KSEL; c++) {
        var bv = -3.0e38;
        var bi = NONE;
        for (var i = lid.x; i < V; i += WG) {
            if (i == PAD || i == BOS) {
                continue;
            }
            if (masked && ((masks[r * WORDS + i / 32u] >> (i % 32u)) & 1u) == 0u) {
                continue;
            }
            if (at_limit && i != EOS) {
                continue;
            }
            let v = logits[base + i];
            let after = v < prev_v || (v == prev_v && (prev_i == NONE || i > prev_i));
            if (after && (bi == NONE || v > bv)) {
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
            if (prev_i == NONE) {
                out[r * KSEL + c] = Candidate(-3.0e38, NONE);
            } else {
                out[r * KSEL + c] = Candidate(prev_v - shift, prev_i);
            }
        }
    }
    if (KSEL == 1u && lid.x == 0u) {
        var next = rows[r];
        next.token = select(prev_i, EOS, prev_i == NONE);
        next.pos += 1u;
        next.parent = r;
        next_rows[r] = next;
    }
}
