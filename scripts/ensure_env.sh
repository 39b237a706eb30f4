# Sourced by run_all.sh and run_tests.sh: sets PY to a Python that has this package installed.
#
# Order of preference:
#   1. $HBPSYCH_PYTHON, when set;
#   2. the active virtualenv or conda env, when it already has hbpsych_utils (from this checkout)
#      and papermill;
#   3. ./.venv, created when missing and installed from the lock when stale: exactly the locked
#      versions, each checked against its sha256 (--require-hashes), then this package itself,
#      editable and without dependencies. Base interpreter: $HBPSYCH_BASE_PYTHON or python3.
# The installer is uv (`uv pip install --require-hashes -r LOCK`: the same lock, the same checks,
# several times quicker than pip; scripts/uv.sh installs it once, pinned, or takes $UV), or pip
# when uv cannot be installed (one line says so) or HBPSYCH_INSTALLER=pip asks for it. Both
# install into the existing .venv and remove nothing, so packages installed by hand stay.
# The lock is requirements.lock (dependencies + dev extra), requirements-inspect.lock with
# HBPSYCH_EXTRAS=inspect (adds the Inspect task's extra), or requirements-all.lock with
# HBPSYCH_EXTRAS=all (every extra: Inspect and Ray Data; .ci/run sets it).
# "Stale" means the lock or pyproject.toml changed since the last install (a stamp file remembers
# their hash). Packages installed by hand (e.g. scripts/install_local_model.sh) stay; going back
# from a lock with extras to the default one leaves them installed (delete .venv to drop them).

_here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${HBPSYCH_EXTRAS:-}" in
  "") _lock="$_here/requirements.lock" ;;
  inspect) _lock="$_here/requirements-inspect.lock" ;;
  all) _lock="$_here/requirements-all.lock" ;;
  *)
    echo "error: HBPSYCH_EXTRAS=${HBPSYCH_EXTRAS}: unknown extra set (allowed: inspect, all, or unset)" >&2
    return 1 2>/dev/null || exit 1 ;;
esac

_has_pkg() {
  # Found, not imported: importing papermill alone costs a second of CPU before every run and
  # every test session; an installed package that fails to import says so when it is used.
  "$1" - "$_here" <<'PY' >/dev/null 2>&1
import sys, pathlib
from importlib.util import find_spec
specs = [find_spec(name) for name in ("hbpsych_utils", "papermill", "pytest")]
if None in specs or specs[0].origin is None:
    sys.exit(1)
root = pathlib.Path(sys.argv[1]).resolve()
sys.exit(0 if pathlib.Path(specs[0].origin).resolve().parent.parent == root else 1)
PY
}

_env_hash() {
  cat "$_lock" "$_here/pyproject.toml" | sha256sum | cut -d' ' -f1
}

_stamp_ok() {
  [ -f "$_here/.venv/.hbpsych-stamp" ] &&
    [ "$(cat "$_here/.venv/.hbpsych-stamp")" = "$(_env_hash)" ]
}

_choose_installer() {  # sets _installer to uv (and HBPSYCH_UV to its path) or pip
  _installer=pip
  case "${HBPSYCH_INSTALLER:-uv}" in
    pip) return ;;
    uv) ;;
    *) echo "warning: HBPSYCH_INSTALLER=${HBPSYCH_INSTALLER} is neither uv nor pip; using uv" >&2 ;;
  esac
  # shellcheck source=scripts/uv.sh
  source "$_here/scripts/uv.sh"
  if hbpsych_uv "${HBPSYCH_BASE_PYTHON:-python3}"; then
    _installer=uv
  else
    echo "uv could not be installed ($HBPSYCH_UV_WHY); installing with pip instead (slower)" >&2
  fi
}

if [ -n "${HBPSYCH_PYTHON:-}" ]; then
  PY="$HBPSYCH_PYTHON"
elif { [ -n "${VIRTUAL_ENV:-}" ] || [ -n "${CONDA_PREFIX:-}" ]; } &&
     [ "${VIRTUAL_ENV:-}" != "$_here/.venv" ] && _has_pkg python; then
  PY="$(command -v python)"
else
  PY="$_here/.venv/bin/python"
  if [ ! -f "$_lock" ]; then
    echo "error: $_lock is missing; regenerate it with: bash scripts/lock.sh" >&2
    return 1 2>/dev/null || exit 1
  fi
  if [ ! -x "$PY" ] || ! _stamp_ok || ! _has_pkg "$PY"; then
    echo "setting up $_here/.venv from $(basename "$_lock") (first run or dependencies changed) ..." >&2
    _choose_installer
    if [ ! -x "$PY" ]; then
      base="${HBPSYCH_BASE_PYTHON:-python3}"
      "$base" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
        echo "error: $base is missing or older than Python 3.11; set HBPSYCH_BASE_PYTHON to a newer one" >&2
        return 1 2>/dev/null || exit 1
      }
      if [ "$_installer" = uv ]; then
        # --seed: pip (and setuptools, wheel) in .venv too, for what is installed by hand
        "$HBPSYCH_UV" venv --quiet --seed --python "$(command -v "$base")" "$_here/.venv" || {
          echo "error: 'uv venv' failed to create $_here/.venv from $base" >&2
          return 1 2>/dev/null || exit 1
        }
      else
        "$base" -m venv "$_here/.venv" || {
          echo "error: '$base -m venv' failed (Debian: apt-get install python3-venv)" >&2
          return 1 2>/dev/null || exit 1
        }
      fi
    fi
    case "$_installer" in
      uv)
        # --compile-bytecode: the .pyc files pip writes at install too (without them every
        # process, each kernel among them, compiles what it imports when PYTHONDONTWRITEBYTECODE
        # is set)
        _uv=("$HBPSYCH_UV" pip install --python "$PY" --quiet --compile-bytecode)
        "${_uv[@]}" --require-hashes -r "$_lock" >&2 &&
          "${_uv[@]}" --no-deps -e "$_here" >&2 ;;
      *)
        # -qq: errors only (pip's per-package notes about extra index folders are not news).
        _pip=("$PY" -m pip --disable-pip-version-check -qq)
        "${_pip[@]}" install --upgrade pip >&2 &&
          "${_pip[@]}" install --require-hashes -r "$_lock" >&2 &&
          "${_pip[@]}" install --no-deps -e "$_here" >&2 ;;
    esac || {
      echo "error: installing $(basename "$_lock") and the package into $_here/.venv with" \
           "$_installer failed (see above)" >&2
      return 1 2>/dev/null || exit 1
    }
    unset _pip _uv _installer
    _env_hash > "$_here/.venv/.hbpsych-stamp"
    basename "$_lock" > "$_here/.venv/.hbpsych-lock"
  fi
fi
export PY
