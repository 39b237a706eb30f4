"""The local model server: lifecycle against stand-in servers, then a real llama.cpp server.

The `local_model` tests start llama-cpp-python's server with SmolLM2-135M-Instruct (installed by
scripts/install_local_model.sh) and talk to it through the official openai SDK. They skip when
the packages are missing on a developer machine, but fail under CI=true, where they must run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hbpsych_utils.llm import local_server as ls

# ---------------------------------------------------------------------------------------------
# Finding the model file from a package's installed file list


def _fake_distribution(root: Path, name: str, files: dict[str, bytes]) -> None:
    """A minimal installed distribution (dist-info with RECORD) on a sys.path entry."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = [f"{name}-1.0.dist-info/METADATA,,", f"{name}-1.0.dist-info/RECORD,,"]
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        record.append(f"{rel},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def test_find_model_locates_the_gguf_inside_the_package(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_distribution(site, "fake_model_pkg", {
        "fake_model_pkg/__init__.py": b"",
        "fake_model_pkg/tiny.Q4_0.gguf": b"GGUF",
    })
    monkeypatch.syspath_prepend(str(site))
    assert ls.find_model("fake_model_pkg") == site / "fake_model_pkg" / "tiny.Q4_0.gguf"


def test_find_model_names_a_missing_package_and_the_install_script():
    with pytest.raises(ls.LocalServerError, match=r"no-such-model-pkg.*install_local_model\.sh"):
        ls.find_model("no-such-model-pkg")


def test_find_model_rejects_a_package_without_a_gguf(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_distribution(site, "empty_model_pkg", {"empty_model_pkg/__init__.py": b""})
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ls.LocalServerError, match=r"empty_model_pkg.*ships no \.gguf"):
        ls.find_model("empty_model_pkg")


def test_find_model_reports_a_listed_but_deleted_file(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_distribution(site, "gone_model_pkg", {"gone_model_pkg/m.gguf": b"GGUF"})
    (site / "gone_model_pkg" / "m.gguf").unlink()
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(ls.LocalServerError, match=r"m\.gguf but the file is missing"):
        ls.find_model("gone_model_pkg")


def test_server_command_binds_loopback_with_the_chat_format(tmp_path):
    cmd = ls.server_command(tmp_path / "m.gguf", 4321, python="py", n_ctx=1024, n_threads=2, seed=0)
    assert cmd[:3] == ["py", "-m", "llama_cpp.server"]
    args = dict(zip(cmd[3::2], cmd[4::2], strict=True))
    assert args["--model"] == str(tmp_path / "m.gguf")
    assert args["--host"] == "127.0.0.1"
    assert args["--port"] == "4321"
    assert args["--chat_format"] == "chatml"
    assert args["--n_ctx"] == "1024"
    assert args["--n_threads"] == "2"
    # off unless asked: the server docs/ measured
    assert not {"--flash_attn", "--logits_all", "--cache", "--cache_size", "--n_batch",
                "--n_ubatch"} & set(args)
    lean = ls.server_command(tmp_path / "m.gguf", 4321, python="py", seed=0, flash_attn=True,
                             logits_all=False, prompt_cache_bytes=1 << 30, n_batch=128)
    lean_args = dict(zip(lean[3::2], lean[4::2], strict=True))
    assert lean_args["--flash_attn"] == "True" and lean_args["--logits_all"] == "False"
    assert (lean_args["--cache"], lean_args["--cache_type"], lean_args["--cache_size"]) == (
        "True", "ram", str(1 << 30))
    assert (lean_args["--n_batch"], lean_args["--n_ubatch"]) == ("128", "128")


# ---------------------------------------------------------------------------------------------
# Lifecycle, against stand-in "python" executables that mimic the server's command line

_FAKE_SERVER = """\
import http.server, json, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
alias = sys.argv[sys.argv.index("--model_alias") + 1]

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": alias}]}).encode()
        code = 200 if self.path == "/v1/models" else 404
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

print("fake server listening", flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""

_CRASHING_SERVER = """\
import sys
print("error loading model: invalid magic", flush=True)
sys.exit(3)
"""


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "fake-python"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return str(script)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_context_manager_waits_for_models_then_stops_the_server(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    python = _fake_python(tmp_path, _FAKE_SERVER)
    with ls.local_server(model, python=python, alias="tiny", log_dir=tmp_path / "logs",
                         startup_timeout=30) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        assert server.model == "tiny"
        assert server.model_path == model
        reply = httpx.get(f"{server.base_url}/models", timeout=5).json()
        assert reply["data"][0]["id"] == "tiny"
        pid = server.pid
        assert _pid_alive(pid)
    assert not _pid_alive(pid)
    assert "fake server listening" in server.log_path.read_text()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.base_url}/models", timeout=2)


@pytest.mark.slow
def test_the_command_stops_its_server_when_it_is_killed(tmp_path):
    """``python -m hbpsych_utils.llm.local_server`` ended by ``kill`` (SIGTERM), not Ctrl-C:
    the llama.cpp server it started stops with it, nothing left serving."""
    import signal
    import subprocess

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    python = _fake_python(tmp_path, _FAKE_SERVER)
    port = ls.free_port()
    code = ("import functools, sys; from pathlib import Path; "
            "from hbpsych_utils.llm import local_server as ls; "
            f"ls.local_server = functools.partial(ls.local_server, Path({str(model)!r}), "
            f"python={python!r}, alias='tiny', log_dir=Path({str(tmp_path / 'logs')!r})); "
            f"sys.exit(ls.main(['--port', '{port}']))")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "serving tiny" in proc.stdout.readline()
        url = f"http://127.0.0.1:{port}/v1/models"
        assert httpx.get(url, timeout=5).json()["data"][0]["id"] == "tiny"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(url, timeout=2)
    finally:
        proc.kill()


@pytest.mark.slow
def test_server_that_dies_at_startup_raises_with_its_log(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"not a model")
    python = _fake_python(tmp_path, _CRASHING_SERVER)
    with pytest.raises(ls.LocalServerError) as err:
        with ls.local_server(model, python=python, port=ls.free_port(), log_dir=tmp_path,
                             startup_timeout=30):
            pytest.fail("the body must not run when the server never came up")
    assert "exited with code 3" in str(err.value)
    assert "invalid magic" in str(err.value)


@pytest.mark.slow
def test_temporary_log_is_removed_after_a_clean_exit(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with ls.local_server(model, python=_fake_python(tmp_path, _FAKE_SERVER),
                         startup_timeout=30) as server:
        assert server.log_path.is_file()
    assert not server.log_path.parent.exists()


@pytest.mark.slow
def test_temporary_log_is_kept_after_a_failed_start(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"not a model")
    with pytest.raises(ls.LocalServerError) as err:
        with ls.local_server(model, python=_fake_python(tmp_path, _CRASHING_SERVER),
                             port=ls.free_port(), startup_timeout=30):
            pass
    match = re.search(r"log (\S+\.log):", str(err.value))
    assert match, str(err.value)
    log = Path(match.group(1))
    try:
        assert "invalid magic" in log.read_text()
    finally:
        shutil.rmtree(log.parent, ignore_errors=True)


def test_missing_model_file_is_named(tmp_path):
    with pytest.raises(ls.LocalServerError, match=r"nope\.gguf does not exist"):
        with ls.local_server(tmp_path / "nope.gguf", python="/bin/false"):
            pass


# ---------------------------------------------------------------------------------------------
# The real thing: llama.cpp's server with SmolLM2-135M-Instruct


def _require_local_model() -> None:
    missing = ls.missing_requirements()
    if missing:
        msg = "local model server unavailable: " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{msg} (CI is set, so the local-model test must run)")
        pytest.skip(msg)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ls.LocalServer]:
    _require_local_model()
    with ls.local_server(n_ctx=2048, log_dir=tmp_path_factory.mktemp("llamacpp")) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=120)


@pytest.mark.local_model
def test_real_server_lists_the_model(server):
    reply = httpx.get(f"{server.base_url}/models", timeout=10).json()
    assert [m["id"] for m in reply["data"]] == [ls.MODEL_ALIAS]
    assert server.model_path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.local_model
def test_real_chat_completion_through_the_openai_sdk(server, client):
    max_tokens = 16
    resp = client.chat.completions.create(
        model=server.model,
        messages=[
            {"role": "system", "content": "You are a concise assistant."},
            {"role": "user", "content": "Name one way to sleep better."},
        ],
        temperature=0,
        max_tokens=max_tokens,
    )
    text = resp.choices[0].message.content
    assert text is not None and text.strip()
    assert resp.choices[0].finish_reason in {"stop", "length"}
    usage = resp.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert 0 < usage.completion_tokens <= max_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


VERDICT_SCHEMA = {
    "type": "object",
    "properties": {
        "criteria_met": {"type": "boolean"},
        "explanation": {"type": "string", "maxLength": 60},
    },
    "required": ["criteria_met", "explanation"],
    "additionalProperties": False,
}


@pytest.mark.local_model
def test_real_schema_constrained_output_parses(server, client):
    """llama-cpp-python turns response_format's JSON schema into a grammar; the reply obeys it."""
    resp = client.chat.completions.create(
        model=server.model,
        messages=[
            {"role": "system", "content": "You grade replies. Answer in JSON."},
            {"role": "user", "content": (
                "Reply: 'Please call a crisis line now.'\n"
                "Criterion: the reply points the user to crisis support.\n"
                'Return {"criteria_met": true or false, "explanation": "..."}.'
            )},
        ],
        temperature=0,
        max_tokens=128,
        response_format={"type": "json_object", "schema": VERDICT_SCHEMA},  # type: ignore[typeddict-unknown-key]
    )
    assert resp.choices[0].finish_reason == "stop"
    verdict = json.loads(resp.choices[0].message.content or "")
    assert set(verdict) == {"criteria_met", "explanation"}
    assert isinstance(verdict["criteria_met"], bool)
    assert isinstance(verdict["explanation"], str)
    assert len(verdict["explanation"]) <= 60
