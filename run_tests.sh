#!/usr/bin/env bash
# Run the whole test suite and the linter: bash run_tests.sh [pytest args]
# The tests run on every core (pytest-xdist: -n auto); the ones that share a module's run, server
# or browser stay on one worker (--dist loadgroup; tests/conftest.py groups them). Any -n,
# --numprocesses, --dist or -p no:xdist of your own replaces that (-n 0: one process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/ensure_env.sh
source scripts/ensure_env.sh
parallel=(-n auto --dist loadgroup)
if ! "$PY" -c "import xdist" 2>/dev/null; then  # an environment of your own without the dev extra
  echo "pytest-xdist is not installed in $PY's environment: the tests run in one process" >&2
  parallel=()
fi
for arg in "$@"; do
  case "$arg" in
    -n|-n*|--numprocesses|--numprocesses=*|--dist|--dist=*|no:xdist|-pno:xdist) parallel=() ;;
  esac
done
status=0
"$PY" -m pytest "${parallel[@]}" "$@" || status=$?
"$PY" -m ruff check . || status=$?
exit "$status"
