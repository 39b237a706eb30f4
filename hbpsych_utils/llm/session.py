"""Opening the engine a profile asks for, from a notebook: store, registry, simulator, URLs.

A profile's ``llm`` settings say whether to start the loopback simulator (the smoke profile
and tests), which base URLs to use (a local OpenAI-compatible server), rate-limit overrides,
the execution mode and the spend cap. ``open_engine`` turns them into an :class:`Engine` whose
store lives in the run's output folder, so every stage of a run shares one content-addressed
store and an interrupted run resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from hbpsych_utils.llm.engine import Engine
from hbpsych_utils.llm.models import profile_registry
from hbpsych_utils.llm.store import STORE_NAME


def _faults(specs: Sequence[Mapping[str, Any]], first_user_turns: Mapping[str, str]) -> list:
    from hbpsych_utils.llm.testing import Fault

    out = []
    for spec in specs:
        match = spec.get("match")
        pid = spec.get("prompt_id")
        if pid is not None:
            if pid not in first_user_turns:
                raise ValueError(f"llm.faults: prompt_id {pid} is not in this run's corpus")
            match = first_user_turns[pid][:200]
        out.append(Fault(spec["kind"], match=match, api=spec.get("api"), model=spec.get("model"),
                         times=spec.get("times")))
    return out


@contextmanager
def open_engine(
    settings: Mapping[str, Any],
    run_dir: Path | str,
    *,
    first_user_turns: Mapping[str, str] | None = None,
    progress: bool = True,
    stage: str | None = None,
) -> Iterator[Engine]:
    """The run's engine (and simulator, when the settings ask for one) for a ``with`` block.

    ``first_user_turns`` (prompt id -> the conversation's first user message) lets a simulator
    fault name a conversation by ``prompt_id``. ``stage``: the stage that opens it; a stage the
    settings name in ``external`` (its calls to OpenAI-compatible APIs are made elsewhere, from
    exported shards) gets an engine that answers those from the store only and never sends
    them (``Engine(external=True)``)."""
    registry = profile_registry(settings.get("registry_file"))
    base_urls = dict(settings.get("base_urls") or {})
    limits = dict(settings.get("limits") or {})
    with ExitStack() as stack:
        if settings.get("simulator"):
            from hbpsych_utils.llm.testing import Simulator  # tests and the smoke profile only
            from hbpsych_utils.llm.testing.simulator import cache_minimums

            sim = stack.enter_context(Simulator(
                faults=_faults(settings.get("faults") or [], first_user_turns or {}),
                cache_min_tokens=cache_minimums(registry),  # the run's registry decides
                flip_rate=float(settings.get("simulator_flip_rate") or 0.0)))
            base_urls = {**sim.base_urls_for(registry), **base_urls}
            # the simulator has no real rate limits; pacing calls for them would only slow tests
            limits = {p: {"rpm": None, "tpm": None} for p in registry.providers} | limits
        engine = Engine(Path(run_dir) / STORE_NAME, registry, base_urls=base_urls,
                        limits=limits or None, max_cost=settings.get("max_cost"),
                        progress=progress,
                        external=stage is not None and stage in (settings.get("external") or ()),
                        stage=stage)
        yield engine
