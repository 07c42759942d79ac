# Shared set-up for the project's scripts: toolchain targets and the build cache.
# Sourced, not run.

# Build cache outside the clone, so every clone on this machine shares it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/transduce-target}"
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

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
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
