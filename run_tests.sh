#!/usr/bin/env bash
# Run the whole test suite and the linter: bash run_tests.sh [pytest args]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/ensure_env.sh
source scripts/ensure_env.sh
status=0
"$PY" -m pytest "$@" || status=$?
"$PY" -m ruff check . || status=$?
exit "$status"
