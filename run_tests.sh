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
# Compiled modules are kept (in the gitignored __pycache__ folders) even when the environment
# sets PYTHONDONTWRITEBYTECODE: without them every worker compiles the package and pytest
# rewrites every test module's asserts again (collecting the fast tier: 19.6 s of CPU
# without them, 13.2 s with them, measured under load).
unset PYTHONDONTWRITEBYTECODE
# The tests' temp folders on a RAM disk where the machine has one with room to spare (4 GB free),
# unless you chose a temp folder: a passing test's tmp_path is deleted when it ends, and on a
# disk mounted with `discard` (this build machine's) each deleted folder waits for the disk
# (600 folders and 900 small files: 1.7 s on it, 0.01 s on /dev/shm).
if [ -z "${PYTEST_DEBUG_TEMPROOT:-}" ] && [ -z "${TMPDIR:-}" ] \
    && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
    && [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')" -ge 4194304 ]; then
  export PYTEST_DEBUG_TEMPROOT=/dev/shm
fi
# ruff beside pytest, not after it (its report is printed once pytest has finished)
ruff_out="$(mktemp)"
trap 'rm -f "$ruff_out"' EXIT
"$PY" -m ruff check . >"$ruff_out" 2>&1 &
ruff_pid=$!
status=0
"$PY" -m pytest "${parallel[@]}" "$@" || status=$?
ruff_status=0
wait "$ruff_pid" || ruff_status=$?
cat "$ruff_out"
[ "$ruff_status" -eq 0 ] || status=$ruff_status
exit "$status"
