# Shared set-up for the project's scripts: toolchain targets and the build cache.
# Sourced, not run.

# Build cache outside the clone, so every clone on this machine shares it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}"
export PATH="$HOME/.cargo/bin:$PATH"

# The native builds link with mold where it is installed (scripts/test.sh installs it): the
# test binaries each hold the burn stack, and ld spent minutes on them. Set for every script
# alike, since the flags are part of cargo's fingerprint (a build with other flags rebuilds).
fast_linker() {
    if command -v mold >/dev/null 2>&1; then
        export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C link-arg=-fuse-ld=mold"
    fi
}
fast_linker

# Each step is stamped with the time since the script started, so a slow run shows where
# the time went.
log() { printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2; }

ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        log "installing the Rust toolchain (rustup)"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
    fi
    for component in rustfmt clippy; do
        if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
            log "adding rustup component $component"
            rustup component add "$component"
        fi
    done
}

ensure_wasm_target() {
    if ! rustup target list --installed | grep -q '^wasm32-unknown-unknown$'; then
        log "adding the wasm32-unknown-unknown target"
        rustup target add wasm32-unknown-unknown
    fi
}

# Installs Debian packages that are missing (root or sudo needed).
ensure_apt() {
    local missing=()
    for pkg in "$@"; do
        # Removed-but-not-purged packages still have a status entry: ask for "installed".
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Tools built with cargo install get their own build cache, away from the project's.
TOOLS_TARGET_DIR="${TOOLS_TARGET_DIR:-$HOME/.cache/transduce-tools}"
TRUNK_VERSION=0.21.14

# wasm-bindgen-cli must match the wasm-bindgen crate in Cargo.lock exactly.
wasm_bindgen_version() {
    awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock
}

# cargo install for the page's tools, into their own build cache. trunk's release profile is
# fat LTO in one codegen unit: 6.6 minutes on 2 cores for a tool whose own work (running
# cargo, wasm-bindgen and wasm-opt, copying files) is light. Without LTO, in 16 units at
# opt-level 0: 2.35 minutes (opt-level 1: 4.5; measured 2026-11-28).
tool_install() {
    CARGO_TARGET_DIR="$TOOLS_TARGET_DIR" CARGO_PROFILE_RELEASE_LTO=off \
        CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
        cargo install "$@"
}

ensure_wasm_bindgen() {
    local want
    want=$(wasm_bindgen_version)
    if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $want"; then
        log "installing wasm-bindgen-cli $want (about a minute)"
        # No --locked: with it this version's install fails to resolve. Built as trunk is
        # (below), which also lets the two share their common dependencies' builds: 57 s on
        # 2 cores instead of about 3 minutes at the release profile's opt-level 3; it then
        # takes 2.7 s per wasm module instead of 0.8 (measured 2026-12-07).
        tool_install wasm-bindgen-cli --version "$want" --force
    fi
}

ensure_trunk() {
    if ! trunk --version 2>/dev/null | grep -q "trunk $TRUNK_VERSION"; then
        log "installing trunk $TRUNK_VERSION (about 2.5 minutes; 0.22 needs a newer rustc)"
        tool_install trunk --version "$TRUNK_VERSION" --locked --force
    fi
}

# Node packages from package-lock.json: playwright-core for the browser tests and
# binaryen@132.0.0 for wasm-opt (Debian's binaryen 108 breaks the wasm).
ensure_node_modules() {
    if ! command -v npm >/dev/null 2>&1; then
        ensure_apt nodejs npm
    fi
    if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] \
        || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        log "installing node packages (npm ci)"
        npm ci --no-audit --no-fund --loglevel=error
    fi
    export PATH="$PWD/node_modules/.bin:$PATH"
}

# CTranslate2 in a virtual environment, for scripts/ct2.py (the export of a bundle to CT2
# is checked by decoding with CT2). Versions pinned: the ones the export was written for.
ensure_ct2() {
    local venv="$TOOLS_TARGET_DIR/ct2-venv"
    if ! "$venv/bin/python" -c 'import ctranslate2, tokenizers, safetensors, numpy' 2>/dev/null; then
        log "installing CTranslate2 4.8.5 into $venv (pip)"
        rm -rf "$venv"
        python3 -m venv "$venv" 2>/dev/null || { ensure_apt python3-venv && python3 -m venv "$venv"; } || return 1
        "$venv/bin/pip" install -q --disable-pip-version-check \
            ctranslate2==4.8.5 tokenizers==0.23.3 safetensors==0.8.0 numpy==2.4.6 || return 1
    fi
    CT2_PYTHON="$venv/bin/python"
}

# The threaded CPU module (scripts/build/threads-wasm.sh) rebuilds std with atomics, which
# needs the nightly toolchain's rust-src. Where no nightly toolchain is installed, or the
# component cannot be had, the page is built without that module and decodes on one thread
# (the hook and the browser test of threads say so, as a skip).
NIGHTLY=${TRANSDUCE_NIGHTLY:-nightly}

# Whether the nightly toolchain is installed with rust-src.
has_nightly_src() {
    local sysroot
    sysroot=$(rustc "+$NIGHTLY" --print sysroot 2>/dev/null) \
        && [ -d "$sysroot/lib/rustlib/src/rust/library" ]
}

ensure_nightly_src() {
    local nightly=$NIGHTLY
    rustc "+$nightly" --print sysroot >/dev/null 2>&1 || return 0
    has_nightly_src && return 0
    log "adding rust-src to the $nightly toolchain (the threaded page module rebuilds std)"
    rustup component add rust-src --toolchain "$nightly" \
        || log "SKIP: rust-src for $nightly could not be added: the page decodes on one thread"
}

# The page's wasm builds, one function each: the trunk hooks (scripts/build-*-wasm.sh, which
# add wasm-bindgen and wasm-opt) and scripts/test.sh (which compiles them before the page's
# tools are installed: `wasm_cargo_all`) run the same commands, so cargo's fingerprint sees
# the same flags and trunk later finds them built.
wasm_cargo_cpu() {
    cargo build --locked --profile web --target wasm32-unknown-unknown -p transduce-web
}
wasm_cargo_webgpu() {
    cargo build --locked --profile web --target wasm32-unknown-unknown -p transduce-web --features webgpu
}
wasm_cargo_adapt() {
    cargo build --locked --profile web --target wasm32-unknown-unknown -p transduce-adapt-web
}
wasm_cargo_import() {
    cargo build --locked --profile web --target wasm32-unknown-unknown -p transduce-import-web
}
# The relaxed-SIMD kernel: its own target folder, since these flags must not touch the page
# module's build cache.
wasm_cargo_relaxed() {
    RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd -C link-arg=--import-memory -C link-arg=-zstack-size=0 -C link-arg=--initial-memory=65536" \
        cargo build --locked --release --target wasm32-unknown-unknown \
        --manifest-path crates/transduce-relaxed/Cargo.toml --target-dir "$CARGO_TARGET_DIR/relaxed"
}
# The threaded CPU module: std rebuilt with atomics by the nightly toolchain (has_nightly_src
# says whether it can be). The page module's flags (.cargo/config.toml) plus atomics, a
# shared memory imported (each thread's instance takes the same one) and the TLS symbols
# wasm-bindgen's thread set-up needs. 4 GiB: the whole wasm32 address space, reserved, not
# committed. Its own target folder: other flags, another std.
wasm_cargo_threads() {
    local flags="--cfg getrandom_backend=\"wasm_js\" -C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals"
    for arg in --shared-memory --import-memory --max-memory=4294967296 \
        --export=__wasm_init_tls --export=__tls_size --export=__tls_align --export=__tls_base; do
        flags+=" -C link-arg=$arg"
    done
    RUSTFLAGS="$flags" cargo "+$NIGHTLY" build --locked --profile web \
        --target wasm32-unknown-unknown -Z build-std=std,panic_abort \
        -p transduce-web --features threads --target-dir "$CARGO_TARGET_DIR/threads"
}
# The relaxed-SIMD kernel over a shared memory, for the threaded module.
wasm_cargo_relaxed_threads() {
    RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd,+atomics,+bulk-memory -C link-arg=--import-memory -C link-arg=--shared-memory -C link-arg=--max-memory=4294967296 -C link-arg=-zstack-size=0 -C link-arg=--initial-memory=65536" \
        cargo "+$NIGHTLY" build --locked --release --target wasm32-unknown-unknown -Z build-std=core \
        --manifest-path crates/transduce-relaxed/Cargo.toml --target-dir "$CARGO_TARGET_DIR/relaxed-threads"
}
# Every wasm build the page has, one after another.
wasm_cargo_all() {
    wasm_cargo_cpu && wasm_cargo_webgpu && wasm_cargo_adapt && wasm_cargo_import \
        && wasm_cargo_relaxed || return 1
    if has_nightly_src; then
        wasm_cargo_threads && wasm_cargo_relaxed_threads
    fi
}

# Everything the page's build needs.
ensure_page_tools() {
    ensure_rust
    ensure_wasm_target
    ensure_nightly_src
    ensure_wasm_bindgen
    ensure_trunk
    ensure_node_modules
}

# Builds the demo page into dist/ with trunk, unless nothing it is made of changed since.
build_page() {
    local stamp=dist/.built
    if [ -f "$stamp" ] && [ -z "$(find index.html Trunk.toml Cargo.toml Cargo.lock crates web \
        -newer "$stamp" -type f 2>/dev/null | head -1)" ]; then
        log "dist/ is up to date"
        return 0
    fi
    log "building the page (trunk build; a clean wasm build takes about 10 minutes)"
    trunk build && touch "$stamp"
}
