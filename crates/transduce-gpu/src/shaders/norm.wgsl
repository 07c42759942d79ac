// A sub-layer's residual connection and LayerNorm (§3.1, post-norm): res = LayerNorm(res + y),
// y the sub-layer's output projection with its bias (linear.wgsl). Its own short kernel, one
// workgroup of 256 threads per row, N / 256 columns a thread, because the product before it
// spreads each row over many workgroups and WGSL has no fence between workgroups.
const N: u32 = {N}u;
const THREADS: u32 = 256u;
const PER: u32 = (N + THREADS - 1u) / THREADS;
const EPSILON: f32 = 1e-5;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;

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
    let row = wg.x + wg.y * 65535u;
    if (row >= p.rows) {
        return;
    }
    var v: array<f32, PER>;
    var s = 0.0;
    for (var m = 0u; m < PER; m++) {
        let j = lid.x + m * THREADS;
        if (j < N) {
            v[m] = res[row * N + j] + y[row * N + j];
            s += v[m];
        }
    }
    let mean = total(s, lid.x) / f32(N);
    var q = 0.0;
    for (var m = 0u; m < PER; m++) {
        if (lid.x + m * THREADS < N) {
            let d = v[m] - mean;
            q += d * d;
        }
    }
    let scale = 1.0 / sqrt(total(q, lid.x) / f32(N) + EPSILON);
    for (var m = 0u; m < PER; m++) {
        let j = lid.x + m * THREADS;
        if (j < N) {
            res[row * N + j] = (v[m] - mean) * scale * gamma[j] + beta[j];
        }
    }
}
