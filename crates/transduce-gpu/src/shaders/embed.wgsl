// Token embedding × √d_model plus position (§3.4, §3.5), plus the encoder output at the
// row's word focus when it has one. One workgroup of 256 threads per row.
const D: u32 = {D}u;
const SCALE: f32 = {SCALE};

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> rows: array<Row>;
{TABLE}
@group(0) @binding(3) var<storage, read> positions: array<f32>;
@group(0) @binding(4) var<storage, read> sources: array<Source>;
@group(0) @binding(5) var<storage, read> memory: array<f32>;
@group(0) @binding(6) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let r = wg.x + wg.y * 65535u;
    if (r >= p.rows) {
        return;
    }
    let row = rows[r];
    var focus = -1;
    if (row.focus >= 0 && u32(row.focus) < sources[row.src].len) {
        focus = i32(sources[row.src].offset) + row.focus;
    }
    for (var i = lid.x; i < D; i += 256u) {
        var v = embedding(row.token, i) * SCALE + positions[row.pos * D + i];
        if (focus >= 0) {
            v += memory[u32(focus) * D + i];
        }
        x[r * D + i] = v;
    }
}
