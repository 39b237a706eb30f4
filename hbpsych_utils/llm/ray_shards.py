"""Ray Data as a distributed engine for exported shards (the optional ``ray`` extra).

``run_export`` sends every line of an export's shards (:mod:`hbpsych_utils.llm.shards`) to an
OpenAI-compatible endpoint (a vLLM or SGLang server or cluster, a gateway, OpenAI itself) from
Ray actors, and writes OpenAI Batch output JSONL, one file per shard, for ``import-results``.
The endpoint and its limits are the profile's, as the stage's engine would use them: the
provider's base URL, its concurrency (calls in flight, shared among the actors) and its rpm /
tpm (each actor paces its share), and the engine's retries (``max_attempts``, jittered
exponential back-off never shorter than the server's ``retry-after``; errors classified as the
engine classifies them: a transient error is retried, any other ends the line as an error
line, which the import records as a failure).

Why Ray Data's ``map_batches`` with our own HTTP client, and not ``ray.data.llm``'s
``HttpRequestProcessorConfig`` (which imports and runs without vLLM): that processor carries
each request body as an Arrow struct column, and Arrow unifies the structs of a block. Measured
with Ray 2.60 (``tests/test_ray_shards.py`` keeps the check): a body without
``response_format`` is sent with ``"response_format": null``, one without ``temperature`` with
``"temperature": null``, and ``"max_completion_tokens": 5`` as ``5.0`` — no longer the request
whose key is its ``custom_id``, and not what the engine sends. It also keeps no status code for
an error response, and a request that exhausts its retries raises and stops the whole dataset.
Here each shard line travels as a string (its bytes as the shard holds them), the body sent is
that line's body, and every line ends as one output line. Shards are read with
``read_binary_files`` and split on ``\\n`` only: ``read_text`` splits with ``str.splitlines``,
which also cuts at U+2028 inside a JSON string.

On a cluster every worker needs this package installed and the provider's key variable set in
its environment (the key is read there, never passed through Ray); the shard files must be on
storage the workers can read.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hbpsych_utils.core.secrets import scrubber
from hbpsych_utils.core.writes import write_text
from hbpsych_utils.llm.cost import estimate_input_tokens
from hbpsych_utils.llm.providers.base import classify_error, parse_retry_after
from hbpsych_utils.llm.providers.openai_chat import openai_fields
from hbpsych_utils.llm.run_context import Limiter
from hbpsych_utils.llm.shards import Manifest, known_requests

OUTPUT_DIR = "ray-output"
INSTALL = ("pip install -e '.[ray]' (or HBPSYCH_EXTRAS=all bash run_tests.sh, which installs "
           "requirements-all.lock into .venv)")
CALLS_PER_ACTOR = 16
"""Calls in flight per actor when the number of actors is not given."""
MAX_ACTORS = 8
ACTOR_CPUS = 0.1
"""CPUs an actor reserves: it mostly waits for its HTTP calls."""
OPENAI_URL = "https://api.openai.com/v1"


def available() -> bool:
    """Whether Ray Data can be imported here."""
    return importlib.util.find_spec("ray") is not None and importlib.util.find_spec(
        "ray.data") is not None


@dataclass(frozen=True)
class Endpoint:
    """Where and how one actor sends: what the profile's engine would use for the provider."""

    url: str
    """The chat completions URL."""
    key_env: str | None
    """The variable holding the API key, read in the worker (None: no key)."""
    in_flight: int
    rpm: float | None
    tpm: float | None
    max_attempts: int
    backoff_base: float
    backoff_max: float
    timeout: float


def _output(key: str | None, status: int | None, body: Any, error: Any,
            request_id: str | None = None) -> str:
    rid = request_id or f"ray-{uuid.uuid4().hex}"
    response = None if status is None else {"status_code": status, "request_id": rid,
                                            "body": body}
    return json.dumps({"id": f"ray-{uuid.uuid4().hex}", "custom_id": key, "response": response,
                       "error": error}, ensure_ascii=False)


class Caller:
    """One Ray actor: sends a batch of shard lines, at most ``in_flight`` at once."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        key = os.environ.get(endpoint.key_env) if endpoint.key_env else None
        self._headers = {"content-type": "application/json",
                         **({"authorization": f"Bearer {key}"} if key else {})}
        self._limiter = Limiter(endpoint.rpm, endpoint.tpm)
        self._fatal: str | None = None
        """An account-level error met by this actor (quota, key, model): the engine would stop
        its run, so the actor sends nothing more and ends its other lines as error lines."""

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        lines = [str(x) for x in batch["line"]]
        return {"line": asyncio.run(self._all(lines))}

    async def _all(self, lines: list[str]) -> list[str]:
        import httpx

        gate = asyncio.Semaphore(self.endpoint.in_flight)
        self._limiter = Limiter(self.endpoint.rpm, self.endpoint.tpm)  # this loop's clock
        async with httpx.AsyncClient(timeout=self.endpoint.timeout) as client:

            async def one(line: str) -> str:
                async with gate:
                    return await self._send(client, line)

            return list(await asyncio.gather(*(one(x) for x in lines)))

    async def _send(self, client: Any, line: str) -> str:
        import httpx

        try:
            rec = json.loads(line)
            key, body = rec["custom_id"], rec["body"]
        except (ValueError, KeyError, TypeError) as exc:
            return _output(None, None, None, {"code": "bad_shard_line", "message": str(exc)})
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        ep = self.endpoint
        for attempt in range(1, ep.max_attempts + 1):
            if self._fatal is not None:
                return _output(key, None, None, {"code": "not_sent",
                                                 "message": f"not sent: {self._fatal}"})
            await self._limiter.acquire(estimate_input_tokens(len(line)))
            try:
                resp = await client.post(ep.url, content=data, headers=self._headers)
            except httpx.HTTPError as exc:
                if attempt == ep.max_attempts:
                    return _output(key, None, None, {"code": "transport_error",
                                                     "message": f"{type(exc).__name__}: {exc}"})
                await asyncio.sleep(self._backoff(attempt, None))
                continue
            rid = resp.headers.get("x-request-id")
            try:
                parsed = resp.json()
            except ValueError:
                parsed = None
            if resp.status_code == 200 and isinstance(parsed, dict):
                return _output(key, 200, parsed, None, rid)
            # the engine's classes, read from the error object's code and type as the engine's
            # OpenAI adapter reads them (a body that is no JSON object: its status and text)
            error = parsed.get("error", parsed) if isinstance(parsed, dict) else resp.text[:2000]
            err = classify_error(openai_fields(resp.status_code, error),
                                 f"HTTP {resp.status_code}: {resp.text[:500]}",
                                 parse_retry_after(resp.headers))
            if err.kind == "transient" and attempt < ep.max_attempts:
                if err.retry_after:
                    self._limiter.pause(err.retry_after)
                await asyncio.sleep(self._backoff(attempt, err.retry_after))
                continue
            if err.kind == "fatal":
                self._fatal = str(err)
            if not isinstance(parsed, dict):
                parsed = {"error": {"message": resp.text[:2000], "type": "server_error",
                                    "code": resp.status_code}}
            return _output(key, resp.status_code, parsed, None, rid)
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ep = self.endpoint
        delay = min(ep.backoff_max, ep.backoff_base * (2 ** (attempt - 1)))
        delay *= random.uniform(0.5, 1.0)
        return max(delay, retry_after or 0.0)


def _split_lines(row: dict[str, Any]) -> Iterator[dict[str, str]]:
    """A shard file's rows: its lines, split on ``\\n`` only (module doc)."""
    text = bytes(row["bytes"]).decode("utf-8")
    for line in text.split("\n"):
        if line.strip():
            yield {"line": line}


def endpoint_for(engine: Any, provider: str, actors: int) -> Endpoint:
    """The endpoint of one provider as the profile's engine would call it, with its limits
    shared among ``actors``."""
    p = engine.registry.providers[provider]
    base = engine.base_url(p) or OPENAI_URL
    lim = engine.limits[provider]
    return Endpoint(
        url=base.rstrip("/") + "/chat/completions", key_env=p.api_key_env,
        in_flight=max(1, math.ceil(lim.concurrency / actors)),
        rpm=lim.rpm / actors if lim.rpm else None, tpm=lim.tpm / actors if lim.tpm else None,
        max_attempts=engine.max_attempts, backoff_base=engine.backoff_base,
        backoff_max=engine.backoff_max, timeout=engine.timeout)


def run_export(engine: Any, export: Path, manifest: Manifest, out_dir: Path, *,
               address: str | None = None, actors: int | None = None
               ) -> list[tuple[Path, int]]:
    """Every shard of ``export`` through Ray Data; one output file per shard (module doc).
    Returns each output file with its number of lines."""
    known_requests([export])  # every shard as exported (sha256), before anything is sent
    engine.require_keys({s.provider for s in manifest.shards})
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # nothing leaves the machine
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    clean = scrubber()
    written: list[tuple[Path, int]] = []
    try:
        for s in manifest.shards:
            lim = engine.limits[s.provider]
            n = actors or max(1, min(MAX_ACTORS, math.ceil(lim.concurrency / CALLS_PER_ACTOR)))
            endpoint = endpoint_for(engine, s.provider, n)
            batch_size = max(1, endpoint.in_flight * 4)  # lines an actor takes at a time
            ds = (ray.data.read_binary_files([str(export / s.file)]).flat_map(_split_lines)
                  .repartition(max(1, math.ceil(s.lines / batch_size))))
            # an actor waits on the network: it holds a sliver of a CPU, so that the actors
            # never take every CPU from the task that reads the shard (a 2-core machine)
            ds = ds.map_batches(Caller, fn_constructor_kwargs={"endpoint": endpoint},
                                compute=ray.data.ActorPoolStrategy(size=n),
                                num_cpus=ACTOR_CPUS, batch_size=batch_size)
            lines = [str(x) for batch in ds.iter_batches(batch_size=4096)
                     for x in batch["line"]]
            path = out_dir / (Path(s.file).stem + ".output.jsonl")
            # a reply may quote a key a careless server echoed: replaced, as the store does
            write_text(path, "".join(clean(x) + "\n" for x in lines))
            written.append((path, len(lines)))
    finally:
        if started:
            ray.shutdown()
    return written

