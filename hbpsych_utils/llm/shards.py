"""Batch shards: a stage's pending model calls as OpenAI Batch JSONL, and their results back.

Export (:func:`export`). Every request is resolved by the engine exactly as a run resolves it
(registry quirks, wire body, content-addressed key); requests already answered in the store are
left out. What remains is written per model (a Batch API file and a ``vllm run-batch`` server
each hold one model) in shards of at most ``size`` lines (and at most
:data:`MAX_SHARD_BYTES`, under OpenAI's 200 MB file limit): each line is the line the engine's
own batch path would upload (:func:`~hbpsych_utils.llm.providers.openai_chat.batch_line`:
``custom_id`` = the store key, ``body`` = the wire body). Beside each shard an index
(``*.index.jsonl``, line by line) keeps what the store needs to take an answer back (the
registry model, provider, tag, the decoding config recorded with a result); ``manifest.json``,
written last, holds each file's sha256, the counts, the models and the plan's estimated tokens
and cost. Only providers that speak the OpenAI wire format (``openai`` and
``openai_compatible`` kinds: OpenAI, vLLM, SGLang, llama.cpp, gateways) are exported; requests
for Anthropic or Google models are counted in the manifest as not exported, with the reason:
the engine's batch path already sends them to those providers' own batch APIs.

Import (:func:`import_results`). Batch output JSONL (OpenAI's output and error files,
``vllm run-batch``'s output, the Ray runner's) is read line by line against the shards exported
into the run folder (their hashes checked first): a line that is not JSON, a ``custom_id`` that
no shard holds, a result answered by another model than its shard asked, or a second result for
a key in the same import is refused and named (file and line), and the rest is kept. An answer
is stored as the engine stores one (scrubbed of keys, with its ledger line); an error line, or
an empty reply, is stored as a failure, never as an answer, so the next run asks again. A key
the store already answers is skipped and counted, so importing the same output twice adds
nothing; a stage whose answers are all imported sends no request when it runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from hbpsych_utils.core.records import NotUTF8, utf8_lines
from hbpsych_utils.core.writes import write_json, write_text
from hbpsych_utils.llm.cost import Plan, call_cost
from hbpsych_utils.llm.models import ConfigError, Registry
from hbpsych_utils.llm.providers import OPENAI_WIRE_KINDS, CallError
from hbpsych_utils.llm.requests import Request, Result
from hbpsych_utils.llm.run_context import Item, is_answer
from hbpsych_utils.llm.store import Store

FORMAT = "hbpsych-shards/1"
MANIFEST = "manifest.json"
DEFAULT_SIZE = 50_000
"""Lines per shard: OpenAI's Batch API takes at most 50,000 requests per file."""
MAX_SHARD_BYTES = 190 * 1024 * 1024
"""Bytes per shard, under OpenAI's 200 MB input file limit (the engine's batch path uses the
same cap)."""
WIRE_KINDS = OPENAI_WIRE_KINDS
"""Provider kinds whose requests are exported (OpenAI Chat Completions bodies)."""
IMPORT_MODE = "import"
"""The mode an imported answer is stored with (the engine's own are ``sync`` and ``batch``)."""
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


class ShardsError(ValueError):
    """An export or import that cannot go on; the message names the file and what is wrong."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShardFile(_Record):
    """One shard of a manifest: a Batch input file of one model, and its index."""

    file: str
    index: str
    model: str
    """The registry's name of the model (the index names it per line too)."""
    api_model: str
    """The ``model`` every line's body sends."""
    provider: str
    lines: int
    bytes: int
    sha256: str
    index_sha256: str


class NotExported(_Record):
    """Requests of one model left out of the shards, and why."""

    provider: str
    kind: str
    requests: int
    why: str


class Manifest(_Record):
    """``manifest.json`` of one export."""

    format: Literal["hbpsych-shards/1"] = FORMAT
    profile: str
    stage: str
    created: str
    url: str
    size: int
    requests: int
    """Distinct requests the stage would send next (duplicates are asked once)."""
    already_stored: int
    """Of those, answered in the store already: not exported."""
    exported: int
    shards: list[ShardFile]
    not_exported: dict[str, NotExported]
    plan: dict[str, Any]
    """The engine's plan of the exported calls (``Plan.as_dict``): estimated tokens and cost,
    at the batch price where the provider has a batch API."""


class IndexLine(_Record):
    """One line of a shard's index: what the store records with the answer to that line."""

    custom_id: str
    model: str
    provider: str
    tag: str
    config: dict[str, Any]


# ---------------------------------------------------------------- export

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _chunks(lines: list[tuple[Item, str]], size: int, max_bytes: int
            ) -> list[list[tuple[Item, str]]]:
    out: list[list[tuple[Item, str]]] = []
    cur: list[tuple[Item, str]] = []
    used = 0
    for it, line in lines:
        n = len(line.encode("utf-8")) + 1
        if cur and (len(cur) >= size or used + n > max_bytes):
            out.append(cur)
            cur, used = [], 0
        cur.append((it, line))
        used += n
    if cur:
        out.append(cur)
    return out


def resolve_pending(engine: Any, requests: Sequence[Request]) -> tuple[list[Item], int, int]:
    """The distinct requests the store does not answer yet, resolved as the engine resolves
    them (key, wire body, config), in request order; with the number of distinct requests and
    of those already answered."""
    items: dict[str, Item] = {}
    for i, req in enumerate(requests):
        try:
            it = engine.resolve(req)
        except ConfigError as exc:
            raise ShardsError(f"request {i} (tag {req.tag!r}): {exc}") from None
        items.setdefault(it.key, it)
    stored = engine.store.completed_keys(items)
    return [it for k, it in items.items() if k not in stored], len(items), len(stored)


def export(engine: Any, requests: Sequence[Request], out_dir: Path, *, profile: str,
           stage: str, size: int = DEFAULT_SIZE, max_bytes: int = MAX_SHARD_BYTES) -> Manifest:
    """Write the pending ones of ``requests`` as shards into ``out_dir`` (module doc)."""
    from hbpsych_utils.llm.providers.openai_chat import BATCH_URL, batch_line

    if size < 1:
        raise ShardsError(f"size must be at least 1, got {size}")
    pending, n_unique, n_stored = resolve_pending(engine, requests)
    by_model: dict[str, list[Item]] = {}
    not_exported: dict[str, NotExported] = {}
    for it in pending:
        if it.provider.kind in WIRE_KINDS:
            by_model.setdefault(it.spec.name, []).append(it)
            continue
        prev = not_exported.get(it.spec.name)
        not_exported[it.spec.name] = NotExported(
            provider=it.provider.name, kind=it.provider.kind,
            requests=(prev.requests if prev else 0) + 1,
            why=f"{it.provider.name} speaks the {it.provider.kind} API, not OpenAI's Chat "
                "Completions: the stage's engine sends these calls itself (with llm.mode: "
                "batch, through that provider's batch API), llm.external or not")
    plan = Plan(requests=len(requests), unique=n_unique, cached=n_stored, mode="batch")
    shards: list[ShardFile] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    number = 0
    for model, items in by_model.items():
        lines = [(it, batch_line(it.key, it.body)) for it in items]
        for chunk in _chunks(lines, size, max_bytes):
            number += 1
            name = f"shard-{number:05d}"
            shard, index = out_dir / f"{name}.jsonl", out_dir / f"{name}.index.jsonl"
            write_text(shard, "".join(line + "\n" for _, line in chunk))
            write_text(index, "".join(json.dumps(
                {"custom_id": it.key, "model": it.spec.name, "provider": it.provider.name,
                 "tag": it.request.tag, "config": it.config},
                ensure_ascii=False, sort_keys=True) + "\n" for it, _ in chunk))
            first = chunk[0][0]
            shards.append(ShardFile(
                file=shard.name, index=index.name, model=model,
                api_model=str(first.body["model"]), provider=first.provider.name,
                lines=len(chunk), bytes=shard.stat().st_size, sha256=_sha256(shard),
                index_sha256=_sha256(index)))
            for it, _ in chunk:
                plan.add(it.spec.name, it.provider.name, it.est_in, it.est_out,
                         it.est_cost(batch=it.provider.batch))
    manifest = Manifest(
        profile=profile, stage=stage, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        url=BATCH_URL, size=size, requests=n_unique, already_stored=n_stored,
        exported=sum(s.lines for s in shards), shards=shards, not_exported=not_exported,
        plan=plan.as_dict())
    write_json(out_dir / MANIFEST, manifest.model_dump(mode="json"))
    return manifest


def read_manifest(folder: Path) -> Manifest:
    """An export's manifest, validated (errors name the file and field)."""
    path = folder / MANIFEST
    from hbpsych_utils.core import records

    try:
        return Manifest.model_validate(records.read_json(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise ShardsError(f"{path}: field {where}: {first['msg']}") from None


# ---------------------------------------------------------------- import

@dataclass(frozen=True)
class _Known:
    entry: IndexLine
    api_model: str
    where: str
    """``shard-00001.jsonl:12`` in its export folder."""


@dataclass
class Refused:
    """An output line that was not imported, and why."""

    file: str
    line: int
    custom_id: str | None
    why: str

    def __str__(self) -> str:
        key = f" (custom_id {self.custom_id[:16]}…)" if self.custom_id else ""
        return f"{self.file}:{self.line}{key}: {self.why}"


@dataclass
class ImportReport:
    """What one import did."""

    run_id: str
    lines: int = 0
    added: Counter = field(default_factory=Counter)
    """Answers stored, per model."""
    refusals: Counter = field(default_factory=Counter)
    """Of those, the providers' refusals (stored as answers: the model's own stop)."""
    failures: list[Refused] = field(default_factory=list)
    """Error lines and empty replies, stored as failures (the next run asks again)."""
    already_stored: int = 0
    refused: list[Refused] = field(default_factory=list)

    @property
    def n_added(self) -> int:
        return sum(self.added.values())

    def summary(self) -> str:
        models = ", ".join(f"{m}: {n:,}" for m, n in sorted(self.added.items())) or "none"
        refusals = sum(self.refusals.values())
        return (f"read {self.lines:,} result line(s): added {self.n_added:,} answer(s) ({models}"
                + (f"; {refusals:,} of them the provider's refusals" if refusals else "")
                + f"), recorded {len(self.failures):,} failure(s) (asked again by the next "
                f"run), skipped {self.already_stored:,} already in the store, refused "
                f"{len(self.refused):,} line(s)")


def known_requests(exports: Iterable[Path]) -> dict[str, _Known]:
    """Every request the given export folders hold, by key; each shard and index checked
    against its manifest's sha256 first (a shard edited after export is refused)."""
    known: dict[str, _Known] = {}
    for folder in exports:
        manifest = read_manifest(folder)
        for s in manifest.shards:
            for name, digest in ((s.file, s.sha256), (s.index, s.index_sha256)):
                path = folder / name
                if not path.is_file():
                    raise ShardsError(f"{path}: missing (listed in {folder / MANIFEST})")
                if _sha256(path) != digest:
                    raise ShardsError(f"{path}: its sha256 is not the one {folder / MANIFEST} "
                                      "records: the file changed after it was exported")
            for lineno, line in utf8_lines(folder / s.index):
                if isinstance(line, NotUTF8) or not line.strip():
                    continue
                try:
                    entry = IndexLine.model_validate_json(line)
                except ValidationError as exc:
                    raise ShardsError(f"{folder / s.index}:{lineno}: {exc.errors()[0]['msg']}"
                                      ) from None
                known.setdefault(entry.custom_id, _Known(
                    entry, s.api_model, f"{folder.name}/{s.file}:{lineno}"))
    return known


def _answered_by(body: Any) -> str | None:
    return body.get("model") if isinstance(body, dict) else None


def _same_model(asked: str, answered: str | None) -> bool:
    """The answering model is the one asked, or a dated snapshot of it (an alias answered by
    the provider's current snapshot); a response that names no model is not contradicted."""
    if answered is None or answered == asked:
        return True
    return answered.startswith(asked + "-") and bool(_SNAPSHOT.search(answered[len(asked):]))


def import_results(store: Store, registry: Registry, exports: Sequence[Path],
                   outputs: Sequence[Path], *, chunk: int = 5000) -> ImportReport:
    """Read Batch output files into ``store`` (module doc); refused lines are in the report."""
    known = known_requests(exports)
    report = ImportReport(run_id=time.strftime("%Y%m%dT%H%M%S") + "-import-"
                          + uuid.uuid4().hex[:8])
    seen: dict[str, tuple[str, bool]] = {}
    """key -> (where its first result in this import is, whether that was an answer)"""
    pending: list[Result] = []
    for path in outputs:
        for lineno, line in utf8_lines(path):
            if not isinstance(line, NotUTF8) and not line.strip():
                continue
            report.lines += 1
            checked = _checked_line(line, (str(path), lineno), known, seen)
            if isinstance(checked, Refused):
                report.refused.append(checked)
                continue
            key, hit, rec = checked
            if store.completed_keys([key]):
                report.already_stored += 1
                continue
            result, why = _imported_result(rec, key, hit, registry)
            # a failure may be followed by the answer of a retry; an answer is final
            seen[key] = (f"{path}:{lineno}", why is None)
            pending.append(result)
            if why is not None:
                report.failures.append(Refused(str(path), lineno, key, why))
            else:
                report.added[result.model] += 1
                if result.refusal:
                    report.refusals[result.model] += 1
            if len(pending) >= chunk:
                store.put_many(pending, run_id=report.run_id)
                pending.clear()
    if pending:
        store.put_many(pending, run_id=report.run_id)
    return report


def _checked_line(line: str | NotUTF8, where: tuple[str, int], known: Mapping[str, _Known],
                  seen: Mapping[str, tuple[str, bool]]
                  ) -> Refused | tuple[str, _Known, dict[str, Any]]:
    """One output line's key, its shard's request and the record, or why it is refused: not
    UTF-8 or JSON, no ``custom_id``, a key no shard of the run holds, a second result after an
    answer, or an answer by another model than the shard asked."""
    if isinstance(line, NotUTF8):
        return Refused(*where, None, "corrupted: not UTF-8")
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        return Refused(*where, None, f"corrupted: not JSON ({exc.msg})")
    key = rec.get("custom_id") if isinstance(rec, dict) else None
    if not isinstance(key, str) or not key:
        return Refused(*where, None, "corrupted: no custom_id")
    hit = known.get(key)
    if hit is None:
        return Refused(*where, key, "foreign custom_id: no shard exported into this run holds it")
    first = seen.get(key)
    if first is not None and first[1]:
        return Refused(*where, key, f"a second result for this custom_id in this import (the "
                                    f"first, {first[0]}, is stored)")
    response = rec.get("response")
    answered = _answered_by(response.get("body") if isinstance(response, dict) else None)
    if not _same_model(hit.api_model, answered):
        return Refused(*where, key, f"does not match its shard ({hit.where}): answered by model "
                                    f"{answered!r}, the shard asked {hit.api_model!r}")
    return key, hit, rec


def _imported_result(rec: dict[str, Any], key: str, hit: _Known, registry: Registry
                     ) -> tuple[Result, str | None]:
    """The store row of one accepted output line, and why it is a failure (``None`` for an
    answer): an error line or an empty reply without a refusal is stored as failed, so the next
    run asks again; an answer is priced as the engine prices a batch answer."""
    from hbpsych_utils.llm.providers.openai_chat import batch_result

    e = hit.entry
    try:
        spec = registry.model(e.model)
    except ConfigError as exc:
        raise ShardsError(f"{hit.where}: {exc}") from None
    got = batch_result(rec)
    if isinstance(got, CallError) or not is_answer(got):
        why = str(got) if isinstance(got, CallError) else "empty reply without a refusal"
        return Result(key=key, model=e.model, provider=e.provider, status="failed",
                      error=f"imported: {why}", attempts=1, mode=IMPORT_MODE,
                      config=dict(e.config), tag=e.tag), why
    batch = registry.providers[e.provider].batch
    return Result(
        key=key, model=e.model, provider=e.provider,
        status="refused" if got.refusal else "ok", text=got.text,
        stop_reason=got.stop_reason, refusal=got.refusal,
        input_tokens=got.input_tokens, output_tokens=got.output_tokens,
        cache_read_tokens=got.cache_read_tokens, cache_write_tokens=got.cache_write_tokens,
        cost=call_cost(spec.price, got.input_tokens, got.output_tokens, batch,
                       cache_read_tokens=got.cache_read_tokens,
                       cache_write_tokens=got.cache_write_tokens),
        attempts=1, mode=IMPORT_MODE, config=dict(e.config), tag=e.tag), None


def output_files(target: Path) -> list[Path]:
    """The Batch output files ``target`` names: the file, or every ``*.jsonl`` in the folder
    (sorted)."""
    if target.is_dir():
        return sorted(p for p in target.glob("*.jsonl") if p.is_file())
    return [target]
