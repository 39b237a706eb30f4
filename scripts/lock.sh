#!/usr/bin/env bash
# Regenerate requirements.lock, the locked environment that scripts/ensure_env.sh installs:
# every dependency of pyproject.toml ([project.dependencies] and every extra), resolved with uv
# to exact versions with sha256 hashes, for CPython 3.11 on Linux x86_64.
#
#   bash scripts/lock.sh                          # after editing pyproject.toml's dependencies
#   bash scripts/lock.sh --upgrade                # move every pin to the newest allowed release
#   bash scripts/lock.sh --upgrade-package NAME   # move one pin (any `uv pip compile` option works)
#
# Without --upgrade the pins already in requirements.lock are kept where pyproject.toml still
# allows them, so adding one dependency changes only what it needs. Needs the package index
# (uv resolves there); takes seconds. uv itself is installed once, at a pinned version, into a
# small virtualenv under ~/.cache/hbpsych (or $UV, when set, is used as it is).
#
# Why --python-version 3.11 (= 3.11.0) and not the interpreter here: the lock then holds only
# releases that install on every 3.11.x; e.g. soupsieve 4 needs Python >= 3.11.5, Debian 12 ships
# 3.11.2. tests/test_environment.py fails when pyproject.toml changed without this script.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV_VERSION="0.13.9"
LOCK="requirements.lock"
PLATFORM="x86_64-manylinux_2_28"

base="${HBPSYCH_BASE_PYTHON:-python3}"
"$base" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || {
    echo "error: $base is missing or older than Python 3.11; set HBPSYCH_BASE_PYTHON" >&2
    exit 1
}

uv="${UV:-}"
if [ -z "$uv" ]; then
    tools="${XDG_CACHE_HOME:-$HOME/.cache}/hbpsych/uv-$UV_VERSION"
    uv="$tools/bin/uv"
    if [ ! -x "$uv" ]; then
        echo "installing uv $UV_VERSION into $tools ..." >&2
        "$base" -m venv "$tools"
        "$tools/bin/python" -m pip install --quiet --quiet --disable-pip-version-check \
            "uv==$UV_VERSION"
    fi
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# uv keeps the versions it finds in the output file (unless told to upgrade them).
if [ -f "$LOCK" ]; then cp "$LOCK" "$work/lock.txt"; fi

"$uv" pip compile pyproject.toml --all-extras --generate-hashes \
    --python-version 3.11 --python-platform "$PLATFORM" \
    --custom-compile-command "bash scripts/lock.sh" \
    --no-progress --quiet --output-file "$work/lock.txt" "$@"

# CPU-only environment: a GPU stack (hundreds of MB, and a slow install) is never wanted here.
if grep -qiE '^(torch|nvidia-[a-z0-9-]+|triton)==' "$work/lock.txt"; then
    echo "error: the resolution pulls in torch/CUDA packages:" >&2
    grep -iE '^(torch|nvidia-[a-z0-9-]+|triton)==' "$work/lock.txt" >&2
    exit 1
fi

# The fingerprint of the dependency declarations; tests/test_environment.py recomputes it from
# pyproject.toml the same way (whitespace removed, sorted, JSON with sorted keys).
spec_hash="$("$base" - <<'PY'
import hashlib, json, tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
norm = lambda reqs: sorted("".join(r.split()) for r in reqs)  # noqa: E731
spec = {
    "dependencies": norm(project.get("dependencies", [])),
    "optional-dependencies": {
        k: norm(v) for k, v in project.get("optional-dependencies", {}).items()
    },
}
print(hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest())
PY
)"

{
    echo "# Locked environment of hbpsych_utils: the dependencies and every extra of pyproject.toml,"
    echo "# exact versions with sha256 hashes, for CPython 3.11 on Linux x86_64 (uv $UV_VERSION)."
    echo "# Installed by scripts/ensure_env.sh: pip install --require-hashes -r $LOCK"
    echo "# Regenerate after changing pyproject.toml's dependencies: bash scripts/lock.sh"
    echo "# (bash scripts/lock.sh --upgrade moves every pin to the newest allowed release)."
    echo "# pyproject-dependencies-sha256: $spec_hash"
    cat "$work/lock.txt"
} > "$work/final.txt"
mv "$work/final.txt" "$LOCK"

count="$(grep -cE '^[A-Za-z0-9][A-Za-z0-9._-]*==' "$LOCK")"
echo "wrote $LOCK: $count packages pinned with hashes"
