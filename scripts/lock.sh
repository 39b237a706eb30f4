#!/usr/bin/env bash
# Regenerate the locked environments that scripts/ensure_env.sh installs, resolved with uv to exact
# versions with sha256 hashes, for CPython 3.11 on Linux x86_64:
#
#   requirements.lock          [project.dependencies] + the dev extra (the default .venv)
#   requirements-inspect.lock  the same + the inspect extra (HBPSYCH_EXTRAS=inspect)
#   requirements-all.lock      the same + every extra: inspect and ray (HBPSYCH_EXTRAS=all; .ci/run)
#
# The full lock is resolved first and seeds the other two, so every package they share has the
# same version in all three (tests/test_environment.py checks it).
#
#   bash scripts/lock.sh                          # after editing pyproject.toml's dependencies
#   bash scripts/lock.sh --upgrade                # move every pin to the newest allowed release
#   bash scripts/lock.sh --upgrade-package NAME   # move one pin (any `uv pip compile` option works)
#
# Without --upgrade the pins already in the locks are kept where pyproject.toml still allows them,
# so adding one dependency changes only what it needs. Needs the package index (uv resolves
# there); takes seconds. uv itself is installed once, at a pinned version, into a small
# virtualenv under ~/.cache/hbpsych (or $UV, when set, is used as it is): scripts/uv.sh, which
# scripts/ensure_env.sh uses too.
#
# Why --python-version 3.11 (= 3.11.0) and not the interpreter here: the lock then holds only
# releases that install on every 3.11.x; e.g. soupsieve 4 needs Python >= 3.11.5, Debian 12 ships
# 3.11.2. tests/test_environment.py fails when pyproject.toml changed without this script.
set -euo pipefail

LOCK="requirements.lock"
INSPECT_LOCK="requirements-inspect.lock"
FULL_LOCK="requirements-all.lock"
PLATFORM="x86_64-manylinux_2_28"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

base="${HBPSYCH_BASE_PYTHON:-python3}"
"$base" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || {
    echo "error: $base is missing or older than Python 3.11; set HBPSYCH_BASE_PYTHON" >&2
    exit 1
}

# shellcheck source=scripts/uv.sh
source scripts/uv.sh
hbpsych_uv "$base" || { echo "error: uv: $HBPSYCH_UV_WHY" >&2; exit 1; }
uv="$HBPSYCH_UV"
UV_VERSION="$HBPSYCH_UV_VERSION"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# uv keeps the versions it finds in the output file (unless told to upgrade them).
if [ -f "$FULL_LOCK" ]; then cp "$FULL_LOCK" "$work/full.txt"
elif [ -f "$INSPECT_LOCK" ]; then cp "$INSPECT_LOCK" "$work/full.txt"
elif [ -f "$LOCK" ]; then cp "$LOCK" "$work/full.txt"; fi

compile() {  # compile OUTPUT [uv options...]
    local out="$1"; shift
    "$uv" pip compile pyproject.toml --generate-hashes \
        --python-version 3.11 --python-platform "$PLATFORM" \
        --custom-compile-command "bash scripts/lock.sh" \
        --no-progress --quiet --output-file "$out" "$@"
}
compile "$work/full.txt" --all-extras "$@"
cp "$work/full.txt" "$work/inspect.txt"
compile "$work/inspect.txt" --extra dev --extra inspect "$@"
cp "$work/full.txt" "$work/lock.txt"
compile "$work/lock.txt" --extra dev "$@"

# CPU-only environment: a GPU stack (hundreds of MB, and a slow install) is never wanted here.
if grep -qiE '^(torch|nvidia-[a-z0-9-]+|triton)==' "$work/full.txt"; then
    echo "error: the resolution pulls in torch/CUDA packages:" >&2
    grep -iE '^(torch|nvidia-[a-z0-9-]+|triton)==' "$work/full.txt" >&2
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

write_lock() {  # write_lock RESOLVED TARGET WHAT
    {
        echo "# Locked environment of hbpsych_utils: $3,"
        echo "# exact versions with sha256 hashes, for CPython 3.11 on Linux x86_64 (uv $UV_VERSION)."
        echo "# Installed by scripts/ensure_env.sh: uv pip install --require-hashes -r $2 (or pip)"
        echo "# Regenerate after changing pyproject.toml's dependencies: bash scripts/lock.sh"
        echo "# (bash scripts/lock.sh --upgrade moves every pin to the newest allowed release)."
        echo "# pyproject-dependencies-sha256: $spec_hash"
        cat "$1"
    } > "$work/final.txt"
    mv "$work/final.txt" "$2"
    echo "wrote $2: $(grep -cE '^[A-Za-z0-9][A-Za-z0-9._-]*==' "$2") packages pinned with hashes"
}
write_lock "$work/lock.txt" "$LOCK" "the dependencies and the dev extra of pyproject.toml"
write_lock "$work/inspect.txt" "$INSPECT_LOCK" "the dependencies and the dev and inspect extras"
write_lock "$work/full.txt" "$FULL_LOCK" "the dependencies and every extra (dev, inspect, ray)"
