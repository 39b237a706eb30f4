"""``shards``, ``import-results`` and ``ray-shards``: a stage's model calls made elsewhere.

``python -m hbpsych_utils shards PROFILE --stage 07_grading`` (or ``06_generation``) writes the
calls the stage would send next as OpenAI Batch JSONL shards (:mod:`hbpsych_utils.llm.shards`)
into ``outputs/PROFILE/shards/<stage>-<time>/``. The requests are built by the functions the
stage itself calls (``evaluation.generation.generation_requests``,
``evaluation.panel.next_requests``) from the profile and the files its upstream stages wrote,
which must be current, and resolved by the engine the stage would open, so each ``custom_id``
is the key the stage's own run looks up. ``import-results PROFILE FILE_OR_DIR`` reads Batch
output files into the run's store; ``ray-shards PROFILE [EXPORT]`` runs an export's shards
with Ray Data (:mod:`hbpsych_utils.llm.ray_shards`, the ``ray`` extra) against the profile's
endpoint and writes Batch output files for ``import-results``.

Each holds the run folder's lock (one command per run folder at a time). Exit codes: 0 done,
1 it could not go on (an upstream stage not current, a changed shard, a file-system error) or,
for ``import-results``, some lines were refused (the others are imported), 2 bad arguments
(a stage that sends no model call under the profile included), 3 another command holds the run
folder, 130 interrupted.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hbpsych_utils.core import arguments, paths, runlock

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 1, 2, 3
STAGES = ("06_generation", "07_grading")
"""The stages whose calls can be exported (``llm.external`` names the same two)."""
SHARDS_DIR = "shards"
"""Where exports go inside a run folder (one folder per export)."""
MAX_NAMED = 50
"""Refused lines named on the terminal; the import record in the run folder holds them all."""


class CommandError(Exception):
    """One line for the user, and the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def _common(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("profile", type=arguments.profile,
                    help="a profile of params/ by name, or a profile YAML file")
    ap.add_argument("--outputs", type=arguments.outputs_root, default=None,
                    help="outputs root (default: outputs/ of the project)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="KEY=VALUE", help="a profile value, as the run that made the folder "
                    "was given it (repeat for several)")


def shards_parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych shards",
        description="Write the model calls a stage would send next as OpenAI Batch JSONL "
        "shards (custom_id = the store key, body = what the engine sends), with a manifest.",
        epilog="exit codes: 0 written, 1 an upstream stage is not current or a file cannot be "
        "written, 2 bad arguments, 3 another command holds the run folder")
    _common(ap)
    ap.add_argument("--stage", required=True, choices=STAGES)
    ap.add_argument("--size", type=_size, default=50_000,
                    help="lines per shard at most (default 50,000, OpenAI's Batch limit)")
    ap.add_argument("--output", type=arguments.output_folder, default=None,
                    help="folder for the shards (default outputs/PROFILE/shards/STAGE-TIME/)")
    return ap


def import_parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych import-results",
        description="Read OpenAI Batch output JSONL (OpenAI's output and error files, vllm "
        "run-batch's output, ray-shards') into the run's store, matched against the shards "
        "exported into the run folder.",
        epilog="exit codes: 0 imported, 1 some lines refused (the others imported) or the "
        "shards cannot be read, 2 bad arguments, 3 another command holds the run folder")
    _common(ap)
    ap.add_argument("results", type=Path, help="a Batch output file, or a folder of *.jsonl")
    ap.add_argument("--shards", type=Path, action="append", default=None,
                    help="export folder(s) to match against (default: every export in "
                    "outputs/PROFILE/shards/)")
    return ap


def ray_parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="hbpsych ray-shards",
        description="Run an export's shards with Ray Data against the profile's endpoint "
        "(its base URL, rate limits and concurrency; the engine's retries) and write Batch "
        "output JSONL for import-results. Needs the ray extra.",
        epilog="exit codes: 0 every shard ran, 1 Ray is missing or a shard cannot be read, "
        "2 bad arguments, 3 another command holds the run folder")
    _common(ap)
    ap.add_argument("export", type=Path, nargs="?", default=None,
                    help="export folder (default: the newest in outputs/PROFILE/shards/)")
    ap.add_argument("--output", type=arguments.output_folder, default=None,
                    help="folder for the output files (default EXPORT/ray-output/)")
    ap.add_argument("--address", default=None, help="a Ray cluster's address (default: a "
                    "local Ray, or the cluster RAY_ADDRESS names)")
    ap.add_argument("--actors", type=_size, default=None,
                    help="Ray actors sending requests (default: one per 16 calls the profile "
                    "allows at once, at most 8)")
    return ap


def _size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def _parse(ap: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    try:
        return ap.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else EXIT_USAGE


# ---------------------------------------------------------------- the run folder

class _Upstream:
    """The files a stage reads from its upstream stages, as ``pipeline.stage.Stage`` reads
    them (only what the graph declares), without making the stage's folder."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name

    def _path(self, stage: str, filename: str) -> Path:
        from hbpsych_utils.pipeline import graph

        if not graph.spec(self.name).declares(stage, filename):
            raise CommandError(f"{self.name} does not read {stage}/{filename}")
        return self.root / stage / filename

    def upstream(self, stage: str, filename: str) -> Path:
        path = self._path(stage, filename)
        if not path.is_file():
            raise CommandError(f"{path} is missing: run {stage} first")
        return path

    def upstream_optional(self, stage: str, filename: str) -> Path | None:
        path = self._path(stage, filename)
        return path if path.is_file() else None


def _profile(args: argparse.Namespace) -> Any:
    from hbpsych_utils.core import config
    from hbpsych_utils.pipeline import profiles

    try:
        return profiles.load_profile(args.profile, config.parse_overrides(args.overrides))
    except (config.ProfileError, FileNotFoundError) as exc:
        raise CommandError(f"error: {exc}", EXIT_USAGE) from None


def _run_dir(args: argparse.Namespace, profile: Any) -> Path:
    root = paths.outputs_root() if args.outputs is None else paths.from_caller(args.outputs)
    try:
        run_dir = paths.run_folder(root, profile.name)
    except paths.UnsafePath as exc:
        raise CommandError(f"error: {exc}", EXIT_USAGE) from None
    if not run_dir.is_dir():
        raise CommandError(f"error: {run_dir}: no run folder of profile {profile.name!r} "
                           f"(bash run_all.sh {profile.name})")
    return run_dir


@contextmanager
def _locked(run_dir: Path, command: str) -> Iterator[None]:
    try:
        with runlock.run_lock(run_dir, run_dir.name, command):
            yield
    except runlock.RunLocked as exc:
        raise CommandError(f"error: {exc}", EXIT_LOCKED) from None


def _upstream_current(run_dir: Path, profile: Any, stage: str) -> None:
    """Refuse an export whose inputs the stage's next run would not read as they are."""
    from hbpsych_utils.pipeline import graph, state

    states = {s.stage: s for s in state.stage_states(run_dir, profile)}
    for up in graph.spec(stage).upstream(profile):
        s = states.get(up)
        if s is not None and not s.current:
            raise CommandError(
                f"error: {stage}'s upstream {up} is not current ({s.reason or s.state}): its "
                f"next run would send other calls; run the profile first (bash run_all.sh "
                f"{profile.name}; with llm.external: [{stage}] it stops at {stage})")


def _first_turns(conversations: Any) -> dict[str, str]:
    return {c.prompt_id: next(m.content for m in c.prompt if m.role == "user")
            for c in conversations}


def held_corpus(run_dir: Path, stage: str) -> list[Any]:
    """The corpus 01_corpus recorded (re-read and checked), as ``stage`` reads it."""
    from hbpsych_utils.construction import corpus
    from hbpsych_utils.pipeline import graph

    return corpus.load_recorded(_Upstream(run_dir, stage).upstream(graph.CORPUS,
                                                                    graph.CORPUS_RECORD))


@contextmanager
def stage_engine(profile: Any, run_dir: Path, stage: str, held: list[Any]) -> Iterator[Any]:
    """The engine ``stage`` opens (its store, base URLs, limits, simulator and its faults)."""
    from hbpsych_utils.llm.session import open_engine

    with open_engine(profile.llm.model_dump(mode="json"), run_dir,
                     first_user_turns=_first_turns(held), progress=False, stage=stage) as engine:
        yield engine


def stage_requests(run_dir: Path, profile: Any, stage: str, held: list[Any], engine: Any
                   ) -> list[Any]:
    """The requests ``stage`` would send next, built by the functions the stage calls, from the
    profile and its upstream files (``held``: the run's corpus)."""
    from hbpsych_utils.construction import subset as subsets
    from hbpsych_utils.core import sources
    from hbpsych_utils.evaluation import generation, grading, panel
    from hbpsych_utils.pipeline import graph

    files = _Upstream(run_dir, stage)
    by_id = {c.prompt_id: c for c in held}
    if stage == graph.GENERATION:
        params = profile.generation
        wanted = subsets.stage_ids(files, params.subset)
        selected = [by_id[i] for i in wanted if i in by_id][:params.n_conversations]
        return generation.generation_requests(
            selected, params.candidates, temperature=params.temperature,
            max_tokens=params.max_tokens, samples=params.samples, seed=profile.seed)
    params = profile.grading
    responses = generation.read_responses(files.upstream(graph.GENERATION, graph.RESPONSES))
    more = files.upstream_optional(graph.GENERATION, graph.RESPONSE_SAMPLES)
    responses = generation.with_samples(
        responses, None if more is None else generation.read_sample_responses(more))
    template = grading.load_template(sources.fetch(grading.TEMPLATE_ARTIFACT))
    return panel.next_requests(
        engine, responses, by_id, params.judge_panel(), template,
        temperature=params.temperature, max_tokens=params.max_tokens,
        max_reasks=params.max_reasks,
        response_schema=grading.VERDICT_SCHEMA if params.response_schema else None,
        prompt_caching=profile.llm.prompt_caching)


def _live(profile: Any, stage: str) -> None:
    from hbpsych_utils.pipeline import graph

    if stage not in graph.profile_stages(profile):
        raise CommandError(f"error: {stage} is not among the notebooks of profile "
                           f"{profile.name!r}", EXIT_USAGE)
    mode = graph.stage_mode(profile, stage)
    if mode != graph.LIVE:
        raise CommandError(f"error: profile {profile.name!r} runs {stage} in {mode} mode, which "
                           "sends no model call (evaluation_mode: live makes it call models)",
                           EXIT_USAGE)


def _command(name: str, argv: list[str]) -> str:
    return f"{shlex.quote(sys.executable)} -m hbpsych_utils {name} {shlex.join(argv)}"


def _answer(run: Callable[[], int]) -> int:
    from hbpsych_utils.core.writes import describe_os_error
    from hbpsych_utils.llm.models import ConfigError
    from hbpsych_utils.llm.shards import ShardsError
    from hbpsych_utils.llm.store import StoreError

    try:
        return run()
    except CommandError as exc:
        text = str(exc)
        print(text if text.startswith("error:") else f"error: {text}", file=sys.stderr)
        return exc.code
    except OSError as exc:
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except (ShardsError, StoreError, ValueError, ConfigError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_FAILED


# ---------------------------------------------------------------- shards

def shards_main(argv: list[str]) -> int:
    """``python -m hbpsych_utils shards PROFILE --stage STAGE [--size N] [--output DIR]``."""
    args = _parse(shards_parser(), argv)
    if isinstance(args, int):
        return args
    return _answer(lambda: _shards(args, _command("shards", argv)))


def _shards(args: argparse.Namespace, command: str) -> int:
    from hbpsych_utils.llm import shards

    profile = _profile(args)
    _live(profile, args.stage)
    run_dir = _run_dir(args, profile)
    out = (paths.from_caller(args.output) if args.output is not None else
           run_dir / SHARDS_DIR / f"{args.stage}-{time.strftime('%Y%m%dT%H%M%S')}")
    if out.exists() and any(out.iterdir()):
        raise CommandError(f"error: {out}: not empty (an export goes into a folder of its own)",
                           EXIT_USAGE)
    with _locked(run_dir, command):
        _upstream_current(run_dir, profile, args.stage)
        held = held_corpus(run_dir, args.stage)
        with stage_engine(profile, run_dir, args.stage, held) as engine:
            requests = stage_requests(run_dir, profile, args.stage, held, engine)
            manifest = shards.export(engine, requests, out, profile=profile.name,
                                     stage=args.stage, size=args.size)
    print(f"{args.stage} of profile {profile.name!r}: {manifest.requests:,} distinct call(s) "
          f"to make next, {manifest.already_stored:,} already in the store; exported "
          f"{manifest.exported:,} in {len(manifest.shards)} shard(s) -> {out}")
    for s in manifest.shards:
        print(f"  {s.file}: {s.lines:,} line(s), {s.model} ({s.provider}), sha256 {s.sha256[:16]}")
    for model, left in manifest.not_exported.items():
        print(f"  not exported: {left.requests:,} call(s) of {model}: {left.why}")
    plan = manifest.plan
    print(f"  plan: est. {plan['est_input_tokens']:,} input + {plan['est_output_tokens']:,} "
          f"output tokens, est. ${plan['est_cost']:,.2f} at the registry's prices (batch where "
          "the provider has a batch API)")
    if manifest.shards:
        print(f"next: run the shards (docs/scale.md), then python -m hbpsych_utils "
              f"import-results {profile.name} OUTPUT")
    return 0


# ---------------------------------------------------------------- import-results

def import_main(argv: list[str]) -> int:
    """``python -m hbpsych_utils import-results PROFILE FILE_OR_DIR [--shards DIR ...]``."""
    args = _parse(import_parser(), argv)
    if isinstance(args, int):
        return args
    return _answer(lambda: _import(args, _command("import-results", argv)))


def exports_in(run_dir: Path) -> list[Path]:
    """The export folders of a run folder, oldest first."""
    from hbpsych_utils.llm.shards import MANIFEST

    base = run_dir / SHARDS_DIR
    return sorted(p.parent for p in base.glob(f"*/{MANIFEST}")) if base.is_dir() else []


def _import_inputs(args: argparse.Namespace, name: str,
                   run_dir: Path) -> tuple[list[Path], list[Path]]:
    """The result files to import and the exports to match them against, or a one-line
    error naming what is missing."""
    from hbpsych_utils.llm import shards

    target = paths.from_caller(args.results)
    if not target.exists():
        raise CommandError(f"error: {target}: no such file or folder", EXIT_USAGE)
    files = shards.output_files(target)
    if not files:
        raise CommandError(f"error: {target}: holds no *.jsonl file", EXIT_USAGE)
    exports = ([paths.from_caller(p) for p in args.shards] if args.shards
               else exports_in(run_dir))
    if not exports:
        raise CommandError(f"error: {run_dir / SHARDS_DIR}: no export to match results against "
                           f"(python -m hbpsych_utils shards {name} --stage STAGE)")
    return list(files), list(exports)


def _import(args: argparse.Namespace, command: str) -> int:
    from hbpsych_utils.core.writes import write_json_record
    from hbpsych_utils.llm import shards
    from hbpsych_utils.llm.models import profile_registry
    from hbpsych_utils.llm.store import STORE_NAME, Store, check

    profile = _profile(args)
    run_dir = _run_dir(args, profile)
    files, exports = _import_inputs(args, profile.name, run_dir)
    registry = profile_registry(profile.llm.registry_file)
    with _locked(run_dir, command):
        store_path = run_dir / STORE_NAME
        if store_path.exists():
            check(store_path)
        with Store(store_path) as store:
            report = shards.import_results(store, registry, exports, files)
        record = run_dir / SHARDS_DIR / f"import-{report.run_id}.json"
        write_json_record(record, {
            "run_id": report.run_id, "results": [str(f) for f in files],
            "exports": [str(e) for e in exports], "lines": report.lines,
            "added": dict(report.added), "refusals": dict(report.refusals),
            "already_stored": report.already_stored,
            "failures": [str(f) for f in report.failures],
            "refused": [str(r) for r in report.refused]})
    print(f"{profile.name}: {report.summary()}")
    for failure in report.failures[:MAX_NAMED]:
        print(f"  failure recorded: {failure}")
    for refused in report.refused[:MAX_NAMED]:
        print(f"  refused: {refused}")
    more = max(0, len(report.failures) - MAX_NAMED) + max(0, len(report.refused) - MAX_NAMED)
    if more:
        print(f"  ... and {more:,} more, every one in {record}")
    print(f"record: {record}")
    if report.n_added:
        print(f"next: bash run_all.sh {profile.name} (the stage's run reads these answers from "
              "the store and sends none of them again; a stage already current runs again with "
              "--only STAGE)")
    return EXIT_FAILED if report.refused else 0


# ---------------------------------------------------------------- ray-shards

def ray_main(argv: list[str]) -> int:
    """``python -m hbpsych_utils ray-shards PROFILE [EXPORT] [--output DIR]``."""
    args = _parse(ray_parser(), argv)
    if isinstance(args, int):
        return args
    return _answer(lambda: _ray(args))


def _ray(args: argparse.Namespace) -> int:
    from hbpsych_utils.llm import ray_shards, shards

    profile = _profile(args)
    run_dir = _run_dir(args, profile)
    if args.export is not None:
        export = paths.from_caller(args.export)
    else:
        found = exports_in(run_dir)
        if not found:
            raise CommandError(f"error: {run_dir / SHARDS_DIR}: no export to run")
        export = found[-1]
    manifest = shards.read_manifest(export)
    out = (paths.from_caller(args.output) if args.output is not None
           else export / ray_shards.OUTPUT_DIR)
    if not ray_shards.available():
        raise CommandError(f"error: ray-shards needs Ray Data, which is not installed: "
                           f"{ray_shards.INSTALL}")
    # the corpus lets a simulator's faults name a conversation, as in the stage's own run
    held = held_corpus(run_dir, manifest.stage)
    with stage_engine(profile, run_dir, manifest.stage, held) as engine:
        written = ray_shards.run_export(engine, export, manifest, out, address=args.address,
                                        actors=args.actors)
    for path, n in written:
        print(f"  {path.name}: {n:,} result line(s)")
    print(f"ran {len(written)} shard(s) of {export} with Ray Data -> {out}")
    print(f"next: python -m hbpsych_utils import-results {profile.name} {out}")
    return 0
