// Beam reordering as an index (§6.1): row r continues row rows[r].parent, so its cache
// slots for positions < t are the parent's; position t goes to slot r of that position.
// history[r * CAP + j] is the cache row that holds row r's position j.
const CAP: u32 = {CAP}u;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
@group(0) @binding(2) var<storage, read> history: array<u32>;
@group(0) @binding(3) var<storage, read_write> next: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 65535u * 64u;
    let r = i / CAP;
    let j = i % CAP;
    if (r >= p.rows || j > p.t) {
        return;
    }
    if (j == p.t) {
        next[i] = r;
    } else {
        next[i] = history[rows[r].parent * CAP + j];
    }
}
