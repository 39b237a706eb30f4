#!/usr/bin/env bash
# Run the notebooks of a profile, independent ones at once (--jobs N, default the machine's
# cores; --jobs 1 runs them one after another in the graph's order):
#   bash run_all.sh [PROFILE] [--only NOTEBOOK ...] [--set section.key=value ...] [--outputs DIR]
#                   [--jobs N]
# PROFILE defaults to `default`. Executed notebooks, tables, figures, metrics and the run
# manifest go to outputs/<PROFILE>/. `python -m hbpsych_utils run --help` lists the options and
# exit codes. One run per outputs folder at a time; after Ctrl-C, the same command resumes.
# A relative --outputs or profile file is relative to the directory this is started from.
set -euo pipefail
# How this run was started, for the line that says how to resume it after Ctrl-C.
HBPSYCH_LAUNCHER="bash $(printf %q "${BASH_SOURCE[0]}")"
# Python runs from the project folder; paths given on the command line are the caller's.
HBPSYCH_CALLER_DIR="$PWD"
export HBPSYCH_LAUNCHER HBPSYCH_CALLER_DIR
cd "$(dirname "${BASH_SOURCE[0]}")"
# A second run into the same outputs folder is refused now, in a fraction of a second, rather
# than after the environment check below (seconds; minutes when it sets .venv up). The check
# needs only the standard library, so the first Python 3 found will do, before any set-up.
for _py in "${HBPSYCH_PYTHON:-}" .venv/bin/python "${HBPSYCH_BASE_PYTHON:-python3}"; do
  if [ -n "$_py" ] && command -v "$_py" >/dev/null 2>&1; then
    "$_py" scripts/refuse_if_running.py "$@" || { _rc=$?; [ "$_rc" -ne 3 ] || exit 3; }
    break
  fi
done
# shellcheck source=scripts/ensure_env.sh
source scripts/ensure_env.sh
exec "$PY" -m hbpsych_utils run "$@"
