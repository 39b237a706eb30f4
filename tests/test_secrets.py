"""A key a server sends back never reaches a file or the terminal: the store, failure records,
executed notebooks, manifests and the runner's lines are scrubbed of every key set here."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from conftest import notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.core import paths, secrets, writes
from hbpsych_utils.runner import manifest

KEY = "-".join(["sk", "echo", "QWERTYUIOPasdfghjklZXCVBNMqwertyuiop"])
"""A key-shaped value, assembled at run time (no key-shaped string is committed); its letters
are not hex, so none of its fragments turns up in a hash by chance."""


def fragments(key: str, n: int = 8) -> list[str]:
    return [key[i:i + n] for i in range(len(key) - n + 1)]


def leaks(text: str) -> list[str]:
    return [f for f in fragments(KEY) if f in text]


def test_scrub_removes_every_key_by_value_and_a_key_cut_short(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TOGETHER_API_KEY", "tg-" + "Z" * 20)  # a registry of one's own
    monkeypatch.setenv("ANTHROPIC_API_KEY", "short")  # not a key: left alone
    text = f"Incorrect API key provided: {KEY}; again {KEY}, other tg-{'Z' * 20}; short"
    assert secrets.scrub(text) == ("Incorrect API key provided: [OPENAI_API_KEY removed]; "
                                   "again [OPENAI_API_KEY removed], other "
                                   "[TOGETHER_API_KEY removed]; short")
    cut = f"HTTP 401: {KEY}"[:20]  # a message cut to a length, through the key
    assert secrets.scrub(cut, cut=True) == "HTTP 401: [OPENAI_API_KEY removed]"
    assert secrets.scrub(cut) == cut  # a reply's own text is changed only where a key is whole
    assert secrets.scrub("no key here: sk", cut=True) == "no key here: sk"  # too short
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("TOGETHER_API_KEY")
    assert secrets.scrub(text) == text


def test_a_message_clipped_through_a_key_and_then_wrapped_keeps_no_fragment(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    from hbpsych_utils.llm.providers.base import classify_status

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    body = "Incorrect API key provided: " + KEY
    clipped = secrets.clip(body, len(body) - 10)  # the limit falls inside the key
    assert clipped == "Incorrect API key provided: [OPENAI_API_KEY removed]"
    assert secrets.clip("short", 500) == "short"
    # the fatal-error wording puts the clipped message in the middle of a sentence
    error = classify_status(401, f"HTTP 401: {secrets.clip(body, len(body) - 10)}", None)
    assert error.kind == "fatal" and not leaks(str(error))
    unclipped = classify_status(401, f"HTTP 401: {body[:len(body) - 10]}", None)
    assert leaks(str(unclipped))  # what clipping without scrubbing left before


def test_every_key_variable_of_the_registry_is_a_secret() -> None:
    registry = yaml.safe_load((paths.params_dir() / "models.yaml").read_text())
    named = {p["api_key_env"] for p in registry["providers"].values() if p.get("api_key_env")}
    assert named <= set(secrets.SECRET_ENV_VARS)


def test_files_and_manifests_are_written_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = writes.write_json(tmp_path / "failed.json", {"error": f"HTTP 401: {KEY}"})
    assert not leaks(path.read_text()) and "[OPENAI_API_KEY removed]" in path.read_text()
    # the manifest's guard scrubs instead of crashing the run
    written = manifest.write_manifest(tmp_path, "p", [{"notebook": "06_generation",
                                                       "error": {"evalue": KEY}}],
                                      profile_values={"llm": {"x": KEY}})
    assert not leaks(written.read_text())


def test_store_rows_are_written_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hbpsych_utils.llm.requests import Result
    from hbpsych_utils.llm.store import Store

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Store(tmp_path / "s.sqlite") as store:
        store.put(Result(key="k", model="m", provider="p", status="failed",
                         error=f"HTTP 401: invalid_api_key {KEY}"))
        assert store.get("k").error == "HTTP 401: invalid_api_key [OPENAI_API_KEY removed]"
    assert not leaks((tmp_path / "s.sqlite").read_bytes().decode("latin-1"))


class EchoKey(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that answers 401 with the key it was sent, many times
    over, so that a message cut to a length cuts through one of them."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        message = "Incorrect API key provided: " + " ".join([key] * 40)
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


ENGINE_CELL = """\
from pathlib import Path
from hbpsych_utils.llm import Engine, Request, load_registry
engine = Engine(Path(outputs_root) / profile / "llm_store.sqlite", load_registry(),
                base_urls={{"openai": {url!r}}}, progress=False)
engine.run([Request("gpt-4.1-2025-04-14", [{{"role": "user", "content": "hi"}}], max_tokens=8)])
"""


@pytest.mark.slow
def test_a_key_echoed_by_the_endpoint_is_never_written_or_printed(
    project: Path, echo_server: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    write_profile(project, "01_corpus")
    notebook(project / "notebooks" / "01_corpus.ipynb", ENGINE_CELL.format(url=echo_server))
    out = project / "outputs"
    assert runner.main(["p", "--outputs", str(out)]) == runner.EXIT_FAILED
    said = capsys.readouterr()
    terminal = said.out + said.err
    assert "Traceback" not in terminal
    assert "FAILED: 01_corpus at cell 2" in terminal and "[OPENAI_API_KEY removed]" in terminal
    assert not leaks(terminal)
    written = {p: p.read_bytes().decode("latin-1") for p in (out / "p").rglob("*")
               if p.is_file()}
    names = {p.name for p in written}
    assert {"llm_store.sqlite", "failed.json", "01_corpus.ipynb", "manifest.json"} <= names
    assert {p.name: leaks(text) for p, text in written.items() if leaks(text)} == {}
    record = json.loads((out / "p" / "01_corpus" / "failed.json").read_text())
    assert "[OPENAI_API_KEY removed]" in record["error"]["evalue"]
    entry = json.loads((out / "p" / "manifest.json").read_text())["notebooks"][0]
    assert entry["status"] == "failed"
