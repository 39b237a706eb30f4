"""A stand-in for ``vllm run-batch`` in tests: a shard's lines sent to an OpenAI-compatible
server (the simulator) and the output written as vLLM writes it.

vLLM's batch runner (``vllm/entrypoints/openai/run_batch.py``) writes one line per request,
compact JSON: ``{"id": "vllm-<uuid>", "custom_id", "response": {"status_code", "request_id":
"vllm-batch-<uuid>", "body"}, "error"}``. A completed request has status 200, the chat
completion as ``body`` and ``error`` null; a request the server answers with an error has its
status code, ``body`` null and the server's error response as ``error`` (``{"error":
{"message", "type", "param", "code"}}``); one that raised has status 400, ``body`` null and the
exception's message as ``error``. :func:`replay` writes those three shapes, so the importer is
tested on what vLLM writes without a GPU.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx

from hbpsych_utils.core import jsonl


def _line(custom_id: str, status: int, body: dict | None, error: object) -> str:
    return json.dumps({"id": f"vllm-{uuid.uuid4().hex}", "custom_id": custom_id,
                       "response": {"status_code": status,
                                    "request_id": f"vllm-batch-{uuid.uuid4().hex}",
                                    "body": body},
                       "error": error}, ensure_ascii=False, separators=(",", ":"))


def replay(shard: Path, base_url: str, output: Path, *, timeout: float = 60.0) -> int:
    """Send every line of ``shard`` to ``base_url``'s chat completions, in order, and write
    vLLM's output file ``output``; returns the lines written."""
    out = []
    with httpx.Client(timeout=timeout) as client:
        for line in jsonl.lines(shard.read_text(encoding="utf-8")):
            rec = json.loads(line)
            try:
                resp = client.post(base_url.rstrip("/") + "/chat/completions",
                                   json=rec["body"])
            except httpx.HTTPError as exc:
                out.append(_line(rec["custom_id"], 400, None, str(exc)))
                continue
            if resp.status_code == 200:
                out.append(_line(rec["custom_id"], 200, resp.json(), None))
            else:
                error = resp.json()
                out.append(_line(rec["custom_id"], resp.status_code, None,
                                 error if "error" in error else {"error": error}))
    output.write_text("".join(x + "\n" for x in out), encoding="utf-8")
    return len(out)
