# Sourced by scripts/ensure_env.sh and scripts/lock.sh: the pinned uv that installs and resolves
# the locks. `hbpsych_uv BASE_PYTHON` sets HBPSYCH_UV to the path of a uv executable, or returns 1
# with HBPSYCH_UV_WHY saying why in one line. $UV, when set, is used as it is; otherwise uv
# $HBPSYCH_UV_VERSION from PyPI is installed once, with pip, into a small virtualenv of its own
# under ~/.cache/hbpsych (made aside and moved into place, so two set-ups at once never leave a
# half-installed one), and reused after that.

HBPSYCH_UV_VERSION="0.13.9"

hbpsych_uv() {  # hbpsych_uv BASE_PYTHON
  HBPSYCH_UV="" HBPSYCH_UV_WHY=""
  if [ -n "${UV:-}" ]; then
    HBPSYCH_UV="$(command -v "$UV")" || { HBPSYCH_UV_WHY="UV=$UV is not an executable"; return 1; }
    return 0
  fi
  local tools="${XDG_CACHE_HOME:-$HOME/.cache}/hbpsych/uv-$HBPSYCH_UV_VERSION"
  if [ ! -x "$tools/bin/uv" ]; then
    local aside err
    mkdir -p "$(dirname "$tools")" 2>/dev/null &&
      aside="$(mktemp -d "$tools.XXXXXX" 2>/dev/null)" ||
      { HBPSYCH_UV_WHY="cannot write under $(dirname "$tools")"; return 1; }
    echo "installing uv $HBPSYCH_UV_VERSION into $tools ..." >&2
    if ! err="$("$1" -m venv "$aside" 2>&1 >/dev/null &&
                "$aside/bin/python" -m pip install --quiet --quiet --disable-pip-version-check \
                  "uv==$HBPSYCH_UV_VERSION" 2>&1 >/dev/null)"; then
      rm -rf "$aside"
      HBPSYCH_UV_WHY="pip could not install uv==$HBPSYCH_UV_VERSION: $(echo "$err" | grep . | tail -n 1)"
      return 1
    fi
    # uv is one binary that runs from any folder, so the virtualenv may move; when another
    # set-up moved its own in first, that one is kept
    mv -T "$aside" "$tools" 2>/dev/null || rm -rf "$aside"
  fi
  if ! "$tools/bin/uv" --version >/dev/null 2>&1; then
    HBPSYCH_UV_WHY="$tools/bin/uv does not run (delete that folder to reinstall it)"
    return 1
  fi
  HBPSYCH_UV="$tools/bin/uv"
}
