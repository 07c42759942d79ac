#!/usr/bin/env bash
# The WebGPU build of the wasm module, next to the CPU build trunk makes: run by trunk as a
# post_build hook (Trunk.toml), so `trunk build` and `scripts/demo.sh` produce both.
#
# The two builds share one API. The page and the npm package load the CPU build
# (transduce-web.js) unless a bundle is loaded on WebGPU, and only then fetch this one
# (transduce-web-webgpu.js): wgpu, naga and cubecl make it several times larger. It is
# built with the plain release profile (opt-level 3, no LTO): LTO over the wgpu stack
# would add minutes to every build of the page.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook (see Trunk.toml)}

log "building the WebGPU wasm module (cargo --features webgpu)"
cargo build --locked --release --target wasm32-unknown-unknown -p transduce-web --features webgpu
wasm-bindgen --target web --typescript --out-name transduce-web-webgpu --out-dir "$out" \
    "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/transduce_web.wasm"
log "wasm-opt -Os on the WebGPU module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals \
    -o "$out/transduce-web-webgpu_bg.wasm" "$out/transduce-web-webgpu_bg.wasm"
