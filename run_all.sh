#!/usr/bin/env bash
# Run every notebook of a profile in order:
#   bash run_all.sh [PROFILE] [--only NOTEBOOK ...] [--set section.key=value ...] [--outputs DIR]
# PROFILE defaults to `default`. Executed notebooks, tables, figures, metrics and the run
# manifest go to outputs/<PROFILE>/. `python -m hbpsych_utils run --help` lists the options and
# exit codes. One run per outputs folder at a time; after Ctrl-C, the same command resumes.
set -euo pipefail
# How this run was started, for the line that says how to resume it after Ctrl-C.
HBPSYCH_LAUNCHER="bash $(printf %q "${BASH_SOURCE[0]}")"
export HBPSYCH_LAUNCHER
cd "$(dirname "${BASH_SOURCE[0]}")"
# shellcheck source=scripts/ensure_env.sh
source scripts/ensure_env.sh
exec "$PY" -m hbpsych_utils run "$@"
