#!/usr/bin/env bash
# The threaded CPU module (transduce-web with `threads`: src/threads.rs) and its relaxed-SIMD
# kernel over a shared memory, next to the modules trunk makes: run by trunk as a post_build
# hook (Trunk.toml). The worker loads them only where the page is cross-origin isolated, and
# decodes there on navigator.hardwareConcurrency threads (Web Workers over one memory).
#
# Wasm threads need every object compiled with atomics, std included, so std is rebuilt
# (`-Z build-std`) by the nightly toolchain's rust-src. Where this machine has no such
# toolchain, nothing is built and the page decodes on one thread (it says so).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
out=${TRUNK_STAGING_DIR:-${1:?usage: scripts/build-threads-wasm.sh OUT_DIR (trunk passes TRUNK_STAGING_DIR)}}

nightly=$NIGHTLY
if ! has_nightly_src; then
    log "SKIP: no $nightly toolchain with rust-src here: the page decodes on one thread"
    exit 0
fi

# The page module's flags (.cargo/config.toml) plus atomics, a shared memory imported (each
# thread's instance takes the same one) and the TLS symbols wasm-bindgen's thread set-up
# needs. 4 GiB: the whole wasm32 address space, reserved, not committed. Its own target
# folder: other flags, another std.
threads_flags="--cfg getrandom_backend=\"wasm_js\" -C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals"
for arg in --shared-memory --import-memory --max-memory=4294967296 \
    --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base; do
    threads_flags+=" -C link-arg=$arg"
done
log "building the threaded wasm module (cargo +$nightly -Z build-std, --features threads)"
RUSTFLAGS="$threads_flags" cargo "+$nightly" build --locked --profile web \
    --target wasm32-unknown-unknown -Z build-std=std,panic_abort \
    -p transduce-web --features threads --target-dir "$CARGO_TARGET_DIR/threads"
wasm-bindgen --target web --typescript --out-name transduce-web-threads --out-dir "$out" \
    "$CARGO_TARGET_DIR/threads/wasm32-unknown-unknown/web/transduce_web.wasm"
log "wasm-opt -Os on the threaded module"
wasm-opt -Os --enable-simd --enable-bulk-memory --enable-nontrapping-float-to-int \
    --enable-sign-ext --enable-mutable-globals --enable-threads \
    -o "$out/transduce-web-threads_bg.wasm" "$out/transduce-web-threads_bg.wasm"

# The relaxed kernel importing that shared memory (a memory import must match the memory's
# kind): the same code, with atomics, so the linker declares the import shared.
log "building the relaxed-SIMD kernel module over a shared memory"
RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd,+atomics,+bulk-memory -C link-arg=--import-memory -C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=-zstack-size=0 -C link-arg=--initial-memory=65536" \
    cargo "+$nightly" build --locked --release --target wasm32-unknown-unknown -Z build-std=core \
    --manifest-path crates/transduce-relaxed/Cargo.toml --target-dir "$CARGO_TARGET_DIR/relaxed-threads"
cp "$CARGO_TARGET_DIR/relaxed-threads/wasm32-unknown-unknown/release/transduce_relaxed.wasm" \
    "$out/transduce-relaxed-threads.wasm"
