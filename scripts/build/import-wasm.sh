#!/usr/bin/env bash
# The import module (crates/transduce-import-web: a Marian/OPUS-MT model's files into a
# bundle, the same code as `transduce import`), next to the page's modules: run by trunk as a
# post_build hook (Trunk.toml). The worker fetches it only to convert a model loaded by name
# (hf:ORG/NAME) that is not cached yet, and drops it after the conversion, so the memory the
# conversion needed is given back. Same size-first profile as the CPU module.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:?run by trunk as a post_build hook (see Trunk.toml)}

log "building the import wasm module (transduce-import-web)"
wasm_cargo_import
wasm-bindgen --target web --typescript --out-name transduce-import --out-dir "$out" \
    "$CARGO_TARGET_DIR/wasm32-unknown-unknown/web/transduce_import_web.wasm"
log "wasm-opt -Os on the import module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals \
    -o "$out/transduce-import_bg.wasm" "$out/transduce-import_bg.wasm"
