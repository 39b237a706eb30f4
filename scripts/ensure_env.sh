# Sourced by run_all.sh and run_tests.sh: sets PY to a Python that has this package installed.
#
# Order of preference:
#   1. $HBPSYCH_PYTHON, when set;
#   2. the active virtualenv or conda env, when it already has hbpsych_utils (from this checkout)
#      and papermill;
#   3. ./.venv, created and installed (editable, with the [dev] extra) when missing or stale.
# "Stale" means pyproject.toml changed since the last install (a stamp file remembers its hash).

_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_has_pkg() {
  "$1" - "$_here" <<'PY' >/dev/null 2>&1
import sys, pathlib
import hbpsych_utils, papermill, pytest  # noqa: F401
root = pathlib.Path(sys.argv[1]).resolve()
sys.exit(0 if pathlib.Path(hbpsych_utils.__file__).resolve().parent.parent == root else 1)
PY
}

_stamp_ok() {
  [ -f "$_here/.venv/.hbpsych-stamp" ] &&
    [ "$(cat "$_here/.venv/.hbpsych-stamp")" = "$(sha256sum "$_here/pyproject.toml" | cut -d' ' -f1)" ]
}

if [ -n "${HBPSYCH_PYTHON:-}" ]; then
  PY="$HBPSYCH_PYTHON"
elif { [ -n "${VIRTUAL_ENV:-}" ] || [ -n "${CONDA_PREFIX:-}" ]; } &&
     [ "${VIRTUAL_ENV:-}" != "$_here/.venv" ] && _has_pkg python; then
  PY="$(command -v python)"
else
  PY="$_here/.venv/bin/python"
  if [ ! -x "$PY" ] || ! _stamp_ok || ! _has_pkg "$PY"; then
    echo "setting up $_here/.venv (first run or dependencies changed) ..." >&2
    if [ ! -x "$PY" ]; then
      base="${HBPSYCH_BASE_PYTHON:-python3}"
      "$base" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
        echo "error: $base is older than Python 3.11; set HBPSYCH_BASE_PYTHON to a newer one" >&2
        return 1 2>/dev/null || exit 1
      }
      "$base" -m venv "$_here/.venv"
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2 &&
      "$PY" -m pip install --quiet --disable-pip-version-check -e "$_here[dev]" >&2 || {
        echo "error: installing the package into $_here/.venv failed (see above)" >&2
        return 1 2>/dev/null || exit 1
      }
    sha256sum "$_here/pyproject.toml" | cut -d' ' -f1 > "$_here/.venv/.hbpsych-stamp"
  fi
fi
export PY
