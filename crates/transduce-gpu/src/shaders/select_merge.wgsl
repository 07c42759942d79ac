// Log-softmax and top-k (§6.1), second pass: one workgroup per row combines the PARTS parts
// of select_part.wgsl. The normaliser is M + log Σ s·exp(m − M) over the parts' maxima m and
// sums s (M the largest m); the KSEL best of the parts' candidates by raw logit, best first,
// ties to the smaller id, become log-probabilities. Greedy (KSEL = 1) also writes the row's
// next input: its choice (EOS when none) at the next position, continuing itself, so the
// next step can run before the host reads this one.
const KSEL: u32 = {KSEL}u;
const PARTS: u32 = {PARTS}u;
const EOS: u32 = {EOS}u;
const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;

struct Candidate {
    log_prob: f32,
    id: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part_stats: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> part_best: array<Candidate>;
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
    var m = -3.0e38;
    for (var q = lid.x; q < PARTS; q += WG) {
        m = max(m, part_stats[r * PARTS + q].x);
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
    for (var q = lid.x; q < PARTS; q += WG) {
        let stats = part_stats[r * PARTS + q];
        sum += stats.y * exp(stats.x - m);
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

    let n = PARTS * KSEL;
    var prev_v = 3.0e38;
    var prev_i = NONE;
    for (var c = 0u; c < KSEL; c++) {
        var bv = -3.0e38;
        var bi = NONE;
        for (var q = lid.x; q < n; q += WG) {
            let cand = part_best[r * n + q];
            let v = cand.log_prob;
            let i = cand.id;
            if (i == NONE) {
                continue;
            }
            let after = v < prev_v || (v == prev_v && (prev_i == NONE || i > prev_i));
            if (after && (bi == NONE || v > bv || (v == bv && i < bi))) {
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
