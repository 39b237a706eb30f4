"""A key a server sends back never reaches a file or the terminal: the store, failure records,
executed notebooks, manifests and the runner's lines are scrubbed of every key set here. Only a
value shaped like a key is one: a placeholder word is never scrubbed, and data is never edited
(a data file that would hold a key is refused); every replacement is counted and said."""

from __future__ import annotations

import json
import random
import string
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from conftest import FAKE_KEYS, notebook, write_profile

from hbpsych_utils import runner
from hbpsych_utils.core import paths, secrets, writes
from hbpsych_utils.runner import manifest

KEY = "-".join(["sk", "echo", "QWERTYUIOPasdfghjklZXCVBNMqwertyuiop"])
"""A key-shaped value, assembled at run time (no key-shaped string is committed); its letters
are not hex, so none of its fragments turns up in a hash by chance."""


OTHER = "tg-" + "".join(["ZyXw", "9876", "VuTs", "5432", "RqPo"])
"""A key of a registry of one's own (``TOGETHER_API_KEY``), assembled at run time."""

PLACEHOLDERS = ("therapist", "lm-studio", "not-needed", "token-abc123", "sk-no-key-required",
                "EMPTY", "dummy", "ollama", "sim-not-a-key", "placeholder_api_key_123",
                "my-local-server-key-2024", "this-is-not-a-real-key-placeholder",
                "tg-" + "Z" * 20, "ab" * 15 + "12" * 5, "put your key here 0123456789AB")
"""What local servers' docs and people set instead of a key: words, words with numbers, long
but not random values, a sentence."""


def fragments(key: str, n: int = 8) -> list[str]:
    return [key[i:i + n] for i in range(len(key) - n + 1)]


def leaks(text: str) -> list[str]:
    return [f for f in fragments(KEY) if f in text]


def test_scrub_removes_every_key_by_value_and_a_key_cut_short(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("TOGETHER_API_KEY", OTHER)  # a registry of one's own
    monkeypatch.setenv("ANTHROPIC_API_KEY", "short")  # not a key: left alone
    monkeypatch.setenv("MISTRAL_API_KEY", "tg-" + "Z" * 20)  # long, not random: left alone
    text = f"Incorrect API key provided: {KEY}; again {KEY}, other {OTHER}; short tg-{'Z' * 20}"
    assert secrets.scrub(text) == ("Incorrect API key provided: [OPENAI_API_KEY removed]; "
                                   "again [OPENAI_API_KEY removed], other "
                                   f"[TOGETHER_API_KEY removed]; short tg-{'Z' * 20}")
    assert secrets.scrubber().count(text) == {"OPENAI_API_KEY": 2, "TOGETHER_API_KEY": 1}
    cut = f"HTTP 401: {KEY}"[:20]  # a message cut to a length, through the key
    assert secrets.scrub(cut, cut=True) == "HTTP 401: [OPENAI_API_KEY removed]"
    assert secrets.scrub(cut) == cut  # a reply's own text is changed only where a key is whole
    assert secrets.scrub("no key here: sk", cut=True) == "no key here: sk"  # too short
    assert secrets.scrubber(cut=True).count(cut) == {"OPENAI_API_KEY": 1}
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("TOGETHER_API_KEY")
    assert secrets.scrub(text) == text and secrets.scrubber().count(text) == {}


def draw(rng: random.Random, chars: str, n: int) -> str:
    return "".join(rng.choices(chars, k=n))  # n characters at once: a million draws in all


def provider_shapes(rng: random.Random) -> dict[str, str]:
    """One random key of each provider's published shape (assembled here, never committed)."""
    alnum, url = string.ascii_letters + string.digits, string.ascii_letters + string.digits + "-_"
    hexd = "0123456789abcdef"
    return {
        "openai": "sk-" + draw(rng, alnum, 48),
        "openai project": "-".join(["sk", "proj", draw(rng, url, 156)]),
        "anthropic": "-".join(["sk", "ant", "api03", draw(rng, url, 93) + "AA"]),
        "google": "AIza" + draw(rng, url, 35),
        "deepseek, dashscope": "sk-" + draw(rng, hexd, 32),
        "mistral": draw(rng, alnum, 32),
        "xai": "xai-" + draw(rng, alnum, 80),
        "together": draw(rng, hexd, 64),
    }


def test_placeholder_words_are_not_keys_and_every_provider_shape_is() -> None:
    for value in PLACEHOLDERS:
        assert not secrets.looks_like_key(value), value
    assert not secrets.looks_like_key("") and not secrets.looks_like_key("   ")
    # the keys the tests set are shaped like real ones
    for value in (KEY, OTHER, *FAKE_KEYS.values()):
        assert secrets.looks_like_key(value), value
    assert secrets.looks_like_key(f"  {KEY}\n")  # white space at its ends aside
    rng = random.Random(20260101)
    missed = [(shape, value) for _ in range(2000)
              for shape, value in provider_shapes(rng).items()
              if not secrets.looks_like_key(value)]
    assert missed == []


def test_a_placeholder_is_never_scrubbed_and_named_without_its_value(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "therapist")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "not-needed")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MISTRAL_API_KEY", "")  # set to nothing: neither a key nor a placeholder
    text = "I saw a therapist; a reply said not-needed."
    assert secrets.scrub(text) == text and secrets.scrubber().count(text) == {}
    assert secrets.secrets() == {"ANTHROPIC_API_KEY": KEY}
    assert secrets.placeholders() == ["DEEPSEEK_API_KEY", "OPENAI_API_KEY"]
    notice = secrets.placeholder_notice()
    assert notice is not None and "\n" not in notice
    assert "DEEPSEEK_API_KEY" in notice and "OPENAI_API_KEY" in notice
    assert "therapist" not in notice and "not-needed" not in notice
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    assert secrets.placeholder_notice() is None


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
    writes.take_replaced()
    path = writes.write_json_record(tmp_path / "failed.json", {"error": f"HTTP 401: {KEY}"})
    assert not leaks(path.read_text()) and "[OPENAI_API_KEY removed]" in path.read_text()
    assert writes.take_replaced() == [(path, {"OPENAI_API_KEY": 1})]  # said, not silent
    assert writes.take_replaced() == []
    # the manifest's guard scrubs instead of crashing the run
    written = manifest.write_manifest(tmp_path, "p", [{"notebook": "06_generation",
                                                       "error": {"evalue": KEY}}],
                                      profile_values={"llm": {"x": KEY}})
    assert not leaks(written.read_text())
    scrubbed = json.loads(written.read_text())["scrubbed"]
    assert scrubbed == [{"file": "manifest.json", "what": "record",
                         "replaced": {"OPENAI_API_KEY": 2}}]
    assert writes.take_replaced() == []  # the manifest says it of itself


def test_data_is_never_edited_a_data_file_with_a_key_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "therapist")  # a placeholder: data written as given
    text = '{"prompt": "my therapist said"}\n'
    assert writes.write_text(tmp_path / "a.jsonl", text).read_text() == text
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for write in (lambda p: writes.write_text(p, f"pasted {KEY} twice {KEY}"),
                  lambda p: writes.write_json(p, {"prompt": KEY})):
        target = tmp_path / "b.json"
        with pytest.raises(secrets.KeyInData) as refused:
            write(target)
        assert not target.exists() and list(tmp_path.iterdir()) == [tmp_path / "a.jsonl"]
        message = str(refused.value)
        assert str(target) in message and "OPENAI_API_KEY" in message and not leaks(message)
        assert "\n" not in message
    assert refused.value.counts == {"OPENAI_API_KEY": 1}


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
        assert store.scrubbed() == []  # an error is a message, not a reply: it says so itself
    assert not leaks((tmp_path / "s.sqlite").read_bytes().decode("latin-1"))


def test_a_reply_quoting_a_key_is_stored_without_it_counted_and_handed_back_as_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hbpsych_utils.llm.requests import Result
    from hbpsych_utils.llm.store import Store

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "lm-studio")  # a placeholder: replies keep it

    def reply(key: str, text: str, tag: str = "generate") -> Result:
        return Result(key=key, model="m", provider="p", status="ok", text=text, tag=tag)

    long_text = "word " * 60 + KEY  # long enough to be stored compressed
    with Store(tmp_path / "s.sqlite") as store:
        clean = reply("c", "my lm-studio key works")
        got = store.put_many([reply("a", f"here: {KEY} and {KEY}"), clean,
                              reply("b", long_text, "grade")])
        assert got[0].text == "here: [OPENAI_API_KEY removed] and [OPENAI_API_KEY removed]"
        assert got[1] is clean  # nothing replaced: the same result
        assert got[2].text == long_text.replace(KEY, "[OPENAI_API_KEY removed]")
        stored = store.get_many(["a", "b", "c"])
        assert [stored[k].text for k in "acb"] == [r.text for r in got]  # store == results
        counted = [{"model": "m", "tag": "generate", "variable": "OPENAI_API_KEY", "rows": 1,
                    "occurrences": 2},
                   {"model": "m", "tag": "grade", "variable": "OPENAI_API_KEY", "rows": 1,
                    "occurrences": 1}]
        assert store.scrubbed() == counted
        # a final row is never replaced: the count of its first write stands
        store.put(reply("a", f"{KEY} {KEY} {KEY}"))
        assert store.scrubbed() == counted and store.get("a").text == got[0].text
    assert not leaks((tmp_path / "s.sqlite").read_bytes().decode("latin-1"))
    with Store(tmp_path / "s.sqlite") as store:  # read back by a later process
        assert store.scrubbed() == counted


def test_the_manifest_says_where_keys_were_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hbpsych_utils.llm.requests import Result
    from hbpsych_utils.llm.store import STORE_NAME, Store

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", "EMPTY")
    run = tmp_path / "p"

    def replies(*keys: str) -> None:
        with Store(run / STORE_NAME) as store:
            store.put_many([Result(key=k, model="m", provider="p", status="ok", tag="generate",
                                   text=f"echo {KEY}") for k in keys])

    replies("a")
    before = manifest.store_entries(run)
    replies("b", "c")
    after = manifest.store_entries(run)
    assert after == [{"file": STORE_NAME, "what": "model replies", "model": "m",
                      "tag": "generate", "rows": 3, "replaced": {"OPENAI_API_KEY": 3}}]
    [added] = manifest.new_store_entries(before, after)  # what one stage added
    assert (added["rows"], added["replaced"]) == (2, {"OPENAI_API_KEY": 2})
    line = manifest.describe_entry(added)
    assert line.startswith("llm_store.sqlite: 2 model replies of m (generate) quoted the "
                           "value of OPENAI_API_KEY 2 times") and "[OPENAI_API_KEY removed]" in line
    failed = run / "06_generation" / "failed.json"
    record = manifest.record_entry(run, failed, {"OPENAI_API_KEY": 1})
    assert record == {"file": "06_generation/failed.json", "what": "record",
                      "replaced": {"OPENAI_API_KEY": 1}}
    written = manifest.write_manifest(run, "p", [], scrubbed=[record])
    data = json.loads(written.read_text())
    assert data["scrubbed"] == [*after, record] and data["key_placeholders"] == ["GEMINI_API_KEY"]
    assert not leaks(written.read_text())


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
def test_a_key_echoed_in_a_simulated_reply_is_replaced_and_the_run_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hbpsych_utils.evaluation import generation
    from hbpsych_utils.llm import Engine, Request, load_registry
    from hbpsych_utils.llm.store import Store
    from hbpsych_utils.llm.testing import Simulator
    from hbpsych_utils.llm.testing.simulator import ECHO_KEY

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    registry = load_registry()
    asks = [Request("gpt-4.1-2025-04-14", [{"role": "user", "content": f"hi {i} {ECHO_KEY}"}],
                    max_tokens=2048, tag="generate", metadata={"prompt_id": f"p{i}"})
            for i in range(3)]
    with Simulator() as sim:
        engine = Engine(tmp_path / "s.sqlite", registry, base_urls=sim.base_urls_for(registry),
                        progress=False)
        first = engine.run(asks)
        assert all(KEY in x["reply"] for x in sim.log)  # the simulator did send the key back
        again = engine.run(asks)  # answered from the store
        engine.store.close()
    assert all(r.text.endswith("The key you sent: [OPENAI_API_KEY removed]") for r in first)
    assert [r.text for r in again] == [r.text for r in first] and all(r.cached for r in again)
    with Store(tmp_path / "s.sqlite") as store:
        assert store.scrubbed() == [{"model": "gpt-4.1-2025-04-14", "tag": "generate",
                                     "variable": "OPENAI_API_KEY", "rows": 3,
                                     "occurrences": 3}]
    # the responses table made from the run is data: written as the store holds it
    table = generation.responses_table(first, seed=0)
    generation.write_responses(table, tmp_path / "responses.jsonl")
    written = generation.read_responses(tmp_path / "responses.jsonl")
    assert list(written["text"]) == [r.text for r in first]
    assert not leaks((tmp_path / "responses.jsonl").read_text())


ECHO_CELL = """\
from pathlib import Path
from hbpsych_utils.llm import Engine, Request, load_registry
engine = Engine(Path(outputs_root) / profile / "llm_store.sqlite", load_registry(),
                base_urls={{"openai": {url!r}}}, progress=False)
out = engine.run([Request("gpt-4.1-2025-04-14", [{{"role": "user", "content": "hi {marker}"}}],
                          max_tokens=2048, tag="generate")])
print(out[0].text, "(the placeholder lm-studio is left as it is)")
"""


@pytest.mark.slow
def test_a_run_says_where_a_reply_quoting_a_key_was_replaced_and_names_a_placeholder(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from hbpsych_utils.llm import load_registry
    from hbpsych_utils.llm.testing import Simulator
    from hbpsych_utils.llm.testing.simulator import ECHO_KEY

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "lm-studio")
    write_profile(project, "01_corpus")
    out = project / "outputs"
    with Simulator() as sim:
        url = sim.base_urls_for(load_registry())["openai"]
        notebook(project / "notebooks" / "01_corpus.ipynb",
                 ECHO_CELL.format(url=url, marker=ECHO_KEY))
        assert runner.main(["p", "--outputs", str(out)]) == 0
    said = capsys.readouterr()
    terminal = said.out + said.err
    assert not leaks(terminal)
    notices = [line for line in terminal.splitlines() if "placeholder" in line]
    assert len(notices) == 1 and "ANTHROPIC_API_KEY" in notices[0]
    assert "lm-studio" not in notices[0] and "OPENAI_API_KEY" not in notices[0]
    told = [line for line in terminal.splitlines() if "llm_store.sqlite" in line]
    assert len(told) == 1 and "1 model reply of gpt-4.1-2025-04-14" in told[0]
    assert "the value of OPENAI_API_KEY 1 time" in told[0]
    data = json.loads((out / "p" / "manifest.json").read_text())
    assert data["key_placeholders"] == ["ANTHROPIC_API_KEY"]
    assert data["scrubbed"] == [{"file": "llm_store.sqlite", "what": "model replies",
                                 "model": "gpt-4.1-2025-04-14", "tag": "generate", "rows": 1,
                                 "replaced": {"OPENAI_API_KEY": 1}}]
    executed = (out / "p" / "notebooks" / "01_corpus.ipynb").read_text()
    assert "The key you sent: [OPENAI_API_KEY removed]" in executed
    assert "the placeholder lm-studio is left" in executed
    written = {p.name: p.read_bytes().decode("latin-1") for p in (out / "p").rglob("*")
               if p.is_file()}
    assert {name: leaks(text) for name, text in written.items() if leaks(text)} == {}


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
