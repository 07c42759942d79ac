#!/usr/bin/env bash
# The relaxed-SIMD kernel module (crates/transduce-relaxed), next to the page's modules: run
# by trunk as a post_build hook (Trunk.toml). One function, no data, no stack, ~2 KB; it
# imports the page module's memory, so the worker instantiates it over that module's
# (web/worker.js) where the browser validates it. Its own target folder: these flags must
# not touch the page module's build cache.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:-${1:?usage: scripts/build/relaxed-wasm.sh OUT_DIR (trunk passes TRUNK_STAGING_DIR)}}

log "building the relaxed-SIMD kernel module"
wasm_cargo_relaxed
cp "$CARGO_TARGET_DIR/relaxed/wasm32-unknown-unknown/release/transduce_relaxed.wasm" \
    "$out/transduce-relaxed.wasm"
