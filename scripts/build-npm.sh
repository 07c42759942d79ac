#!/usr/bin/env bash
# Builds the npm package into pkg/: the wasm module (from the page's trunk build),
# the JavaScript API with its worker, TypeScript types, package.json and a README.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_page_tools

version=$(awk -F'"' '/^version = / { print $2; exit }' Cargo.toml)
# The page's build already holds the optimized wasm module and its bindings
# (wasm-bindgen --target web, wasm-opt from binaryen 132): the package reuses them.
build_page
rm -rf pkg
mkdir -p pkg
# Two builds of the module: the CPU one (loaded by default) and the WebGPU one (fetched by
# the worker only when a bundle is loaded on WebGPU), the relaxed-SIMD kernel module both
# use where the browser has relaxed SIMD, and the adaptation module (fetched only by adapt()).
cp dist/transduce-web.js dist/transduce-web_bg.wasm dist/transduce-web.d.ts pkg/
cp dist/transduce-web-webgpu.js dist/transduce-web-webgpu_bg.wasm dist/transduce-web-webgpu.d.ts pkg/
cp dist/transduce-relaxed.wasm pkg/
cp dist/transduce-adapt.js dist/transduce-adapt_bg.wasm dist/transduce-adapt.d.ts pkg/
# The import module (a model loaded by name is converted in a worker of its own, convert.js).
cp dist/transduce-import.js dist/transduce-import_bg.wasm dist/transduce-import.d.ts pkg/
# The threaded CPU module, its relaxed kernel and its thread worker, where this machine
# built them (scripts/build/threads-wasm.sh); without them the package decodes on one thread.
if [ -f dist/transduce-web-threads_bg.wasm ]; then
    cp dist/transduce-web-threads.js dist/transduce-web-threads_bg.wasm dist/transduce-web-threads.d.ts \
        dist/transduce-relaxed-threads.wasm web/thread.js pkg/
fi
cp web/transduce.js web/worker.js web/transduce.d.ts web/translator.js web/translator.d.ts web/hub.js web/convert.js \
    web/bytes.js web/store.js web/routes.js web/iso639.js web/bundles.js web/calibration.js web/adapted.js \
    web/element.js web/element.d.ts web/blocks.js web/placement.js pkg/
cat > pkg/package.json <<JSON
{
  "name": "transduce",
  "version": "$version",
  "description": "The Transformer of \"Attention Is All You Need\" in the browser: translate and parse on WebGPU or the CPU, in a Web Worker",
  "license": "MIT OR Apache-2.0",
  "type": "module",
  "main": "transduce.js",
  "module": "transduce.js",
  "types": "transduce.d.ts",
  "exports": {
    ".": { "types": "./transduce.d.ts", "default": "./transduce.js" },
    "./translator.js": { "types": "./translator.d.ts", "default": "./translator.js" },
    "./element.js": { "types": "./element.d.ts", "default": "./element.js" },
    "./worker.js": "./worker.js",
    "./transduce-web.js": "./transduce-web.js",
    "./transduce-web-webgpu.js": "./transduce-web-webgpu.js",
    "./transduce-web-threads.js": "./transduce-web-threads.js",
    "./thread.js": "./thread.js",
    "./transduce-adapt.js": "./transduce-adapt.js",
    "./transduce-import.js": "./transduce-import.js",
    "./hub.js": "./hub.js",
    "./convert.js": "./convert.js"
  },
  "files": ["transduce.js", "transduce.d.ts", "translator.js", "translator.d.ts", "worker.js", "transduce-web.js", "transduce-web.d.ts", "transduce-web_bg.wasm", "transduce-web-webgpu.js", "transduce-web-webgpu.d.ts", "transduce-web-webgpu_bg.wasm", "transduce-relaxed.wasm", "transduce-web-threads.js", "transduce-web-threads.d.ts", "transduce-web-threads_bg.wasm", "transduce-relaxed-threads.wasm", "thread.js", "transduce-adapt.js", "transduce-adapt.d.ts", "transduce-adapt_bg.wasm", "transduce-import.js", "transduce-import.d.ts", "transduce-import_bg.wasm", "hub.js", "convert.js", "bytes.js", "store.js", "routes.js", "iso639.js", "bundles.js", "calibration.js", "adapted.js", "element.js", "element.d.ts", "blocks.js", "placement.js", "README.md"],
  "sideEffects": false,
  "keywords": ["transformer", "translation", "parsing", "webgpu", "wasm", "burn"]
}
JSON
cp web/NPM-README.md pkg/README.md
log "pkg/: $(du -sh pkg | cut -f1) (wasm: CPU $(du -h pkg/transduce-web_bg.wasm | cut -f1), WebGPU $(du -h pkg/transduce-web-webgpu_bg.wasm | cut -f1), adaptation $(du -h pkg/transduce-adapt_bg.wasm | cut -f1), import $(du -h pkg/transduce-import_bg.wasm | cut -f1)$([ -f pkg/transduce-web-threads_bg.wasm ] && echo ", CPU threaded $(du -h pkg/transduce-web-threads_bg.wasm | cut -f1)"))"
