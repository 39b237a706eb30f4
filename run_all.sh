#!/usr/bin/env bash
# Run every notebook of a profile in order: bash run_all.sh [PROFILE]   (default: default)
# Executed notebooks, tables, figures, metrics and the run manifest go to outputs/<PROFILE>/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/ensure_env.sh
source scripts/ensure_env.sh
exec "$PY" -m hbpsych_utils run "${1:-default}" "${@:2}"
