#!/usr/bin/env bash
# Makes `cargo build --release -p transduce-cli --features cuda` work offline.
#
#   scripts/setup-cuda-build.sh
#
# burn's CUDA backend (cubecl-cuda) always builds cubecl-llvm, whose build script (through
# tracel-llvm-bundler) downloads an LLVM bundle from GitHub unless its install folder,
# ${XDG_DATA_HOME:-~/.local/share}/tracel/tracel-llvm-<version>/, already holds the marker
# `.tracel-llvm-installed`. This script fills that folder from Debian's LLVM instead:
#   - installs llvm-22-dev and libzstd-dev (apt; the package registries are reachable);
#   - links the folder's include/ and lib/ to /usr/lib/llvm-22 (static LLVM libraries);
#   - puts a bin/llvm-config there that runs LLVM 22's and rewrites what the bundler
#     cannot read: system libraries given as paths (/usr/lib/…/libz3.so becomes -lz3) and
#     the Polly libraries Debian's llvm-config lists but ships in another package (dropped;
#     the PTX path does not use them);
#   - writes the marker.
# LLVM 22 emits PTX up to ISA 9.0, enough for CUDA 13 drivers. At run time the binary needs
# only the NVIDIA driver (cudarc loads libcuda.so; NVRTC is not used).
# Idempotent: run it again after `cargo update` moves tracel-llvm-bundler.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

LLVM_MAJOR=${LLVM_MAJOR:-22}
version=$(awk '/^name = "tracel-llvm-bundler"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ -z "$version" ]; then
    echo "Cargo.lock names no tracel-llvm-bundler: nothing to set up" >&2
    exit 1
fi
ensure_apt "llvm-$LLVM_MAJOR-dev" libzstd-dev
llvm=/usr/lib/llvm-$LLVM_MAJOR
[ -x "$llvm/bin/llvm-config" ] || {
    echo "$llvm/bin/llvm-config is missing after installing llvm-$LLVM_MAJOR-dev" >&2
    exit 1
}

prefix=${XDG_DATA_HOME:-$HOME/.local/share}/tracel/tracel-llvm-$version
log "laying out $prefix over $llvm"
mkdir -p "$prefix/bin"
ln -sfn "$llvm/include" "$prefix/include"
ln -sfn "$llvm/lib" "$prefix/lib"
cat > "$prefix/bin/llvm-config" <<EOF
#!/usr/bin/env bash
# Written by transduce's scripts/setup-cuda-build.sh: Debian's LLVM $LLVM_MAJOR as the
# tracel-llvm $version bundle that cubecl-llvm's build script expects.
out=\$("$llvm/bin/llvm-config" "\$@") || exit \$?
words=()
for word in \$out; do
    case \$word in
        -lPolly | -lPollyISL) ;;
        /*/lib*.so) name=\${word##*/lib}; words+=("-l\${name%.so}") ;;
        *) words+=("\$word") ;;
    esac
done
echo "\${words[*]}"
EOF
chmod +x "$prefix/bin/llvm-config"
touch "$prefix/.tracel-llvm-installed"
log "LLVM $("$prefix/bin/llvm-config" --version) stands in for tracel-llvm $version; now:"
echo "    cargo build --release -p transduce-cli --features cuda"
