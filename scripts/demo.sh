#!/usr/bin/env bash
# The main job: installs what is missing, builds the demo page with the shipped models and
# serves it on http://127.0.0.1:8080 (PORT=… to change). A second run installs nothing and
# starts in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

ensure_page_tools
build_page
exec node scripts/serve.mjs --dir dist --port "${PORT:-8080}" --host 127.0.0.1
