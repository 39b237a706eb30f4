"""HealthBench-Psych and Psych-Hard scores from per-conversation results a lab already has.

The subsets are lists of HealthBench ``prompt_id``s, so anyone who ran HealthBench can report
them by filtering their own per-conversation scores: no new generation, no new grading
(METHODS.md section 9). ``python -m hbpsych_utils filter-results INPUT ...`` reads three
layouts, filters them to a subset and reports, per model and subset, n, the clipped mean with a
seeded percentile bootstrap interval (via :mod:`hbpsych_utils.evaluation.scoring`, so the
statistic is the study's), and the subset ids the input lacks. This module loads any input and
is the command; each part has a module of its own:

- the layouts' readers, each documenting its format: ``simple-evals``
  (:mod:`~hbpsych_utils.reporting.interop_simple_evals`, openai/simple-evals'
  ``*_allresults.json``), ``inspect`` (:mod:`~hbpsych_utils.reporting.interop_inspect`, a UK
  AISI Inspect ``.eval`` or ``.json`` log) and ``hbpsych``
  (:mod:`~hbpsych_utils.reporting.interop_hbpsych`, this compendium's score export); ``--format
  auto`` tells them apart by content and file extension (:func:`detect_format`);
- what they share (:mod:`~hbpsych_utils.reporting.interop_records`: the score records, how the
  run behind an input ended, the validation of a file's records);
- the report (:mod:`~hbpsych_utils.reporting.interop_report`) and, with ``--by-tag``, every
  rubric axis and theme from logs with per-criterion results
  (:mod:`~hbpsych_utils.reporting.interop_tags`).

Every input's prompt ids must be HealthBench ids (the 5,000 of the released screen); a record
that is malformed, scored above 1 (impossible in HealthBench, usually a percentage) or repeated
is an error naming the file, the record and the field. Each layout's records are checked by a
pydantic model (``SimpleEvalsExample``, ``InspectSample`` and ``HealthBenchValue``,
``HbpsychScore``); the error lists every bad field of the record. One file may hold several
models (the hbpsych layout); several files may be given; each model gets its own report.

A run that did not finish is not a HealthBench-Psych result: each input's ``RunStatus``
(complete, failed, cancelled or incomplete, with the samples scored and errored) is reported,
and the command exits with :data:`EXIT_INCOMPLETE` without a report unless
``--allow-incomplete`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Collection, Sequence
from pathlib import Path

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.core import arguments, records, sources
from hbpsych_utils.core.writes import describe_os_error
from hbpsych_utils.reporting.interop_hbpsych import (
    HBPSYCH_FIELDS,
    hbpsych_panel_scores,
    read_hbpsych,
)
from hbpsych_utils.reporting.interop_inspect import is_inspect_json, read_inspect
from hbpsych_utils.reporting.interop_records import (
    ConversationScore,
    Details,
    InputSummary,
    InteropError,
    LoadedResults,
    RunStatus,
)
from hbpsych_utils.reporting.interop_report import (
    SubsetReport,
    filter_results,
    format_text,
    reports_json,
    resolve_subset,
    subset_argument,
)
from hbpsych_utils.reporting.interop_simple_evals import (
    SIMPLE_EVALS_NAME,
    is_simple_evals,
    simple_evals_run,
)
from hbpsych_utils.reporting.interop_tags import (
    TagReport,
    corpus_themes,
    format_tags,
    tag_reports,
)

FORMATS = ("simple-evals", "inspect", "hbpsych")
DEFAULT_SUBSETS = ("v1", "hard")
"""HealthBench-Psych v1 and HealthBench-Psych-Hard, the two the study reports."""

EXIT_INCOMPLETE = 3
"""``filter-results`` exit code when an input's run failed, was cancelled or did not finish."""


# --------------------------------------------------------------------------------------------
# Loading any input


def detect_format(path: Path | str) -> str:
    """``simple-evals``, ``inspect`` or ``hbpsych``, judged from the content."""
    path = Path(path)
    if not path.is_file():
        raise InteropError(f"{path}: no such file")
    if zipfile.is_zipfile(path) or path.suffix.lower() == ".eval":
        return "inspect"
    if path.suffix.lower() in (".jsonl", ".csv"):
        return "hbpsych"
    try:
        data = records.read_json(path)
    except (records.NotUTF8, records.NotJSON):
        return "hbpsych"  # not one JSON document: JSON lines, or an error reported there
    if is_simple_evals(data):
        return "simple-evals"
    if is_inspect_json(data):
        return "inspect"
    if isinstance(data, dict) and set(HBPSYCH_FIELDS) <= set(data):
        return "hbpsych"  # a one-line JSONL file
    raise InteropError(
        f"{path}: not a recognised results file (simple-evals *_allresults.json, Inspect "
        ".eval/.json log, or the hbpsych scores JSONL); name the format with --format"
    )


def load_results(
    paths: Sequence[Path | str],
    fmt: str = "auto",
    *,
    model: str | None = None,
    scorer: str | None = None,
    criteria: bool = False,
) -> LoadedResults:
    """Read every input, one score per (model, conversation); a repeat anywhere is an error.

    ``model`` renames the model of simple-evals and Inspect inputs (the hbpsych layout names its
    candidates itself). hbpsych files are pooled before the panel is formed, so judges may come
    in separate files.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise InteropError(f"unknown format {fmt!r}; one of auto, {', '.join(FORMATS)}")
    records: list[ConversationScore] = []
    inputs: list[InputSummary] = []
    hb_frames: list[pd.DataFrame] = []
    for p in map(Path, paths):
        kind = detect_format(p) if fmt == "auto" else fmt
        if not p.is_file():
            raise InteropError(f"{p}: no such file")
        if kind == "hbpsych":
            frame = read_hbpsych(p)
            hb_frames.append(frame)
            inputs.append(InputSummary(str(p), kind, tuple(sorted(frame["candidate"].unique())),
                                       len(frame), {"judges": sorted(frame["judge"].unique())}))
            continue
        recs, details, run = _read_log(p, kind, model, scorer, criteria)
        records.extend(recs)
        inputs.append(InputSummary(str(p), kind, tuple(sorted({r.model for r in recs})),
                                   len(recs), details, run))
    if hb_frames:
        records.extend(hbpsych_panel_scores(pd.concat(hb_frames, ignore_index=True)))
    return LoadedResults(_one_per_conversation(records), inputs)


def _read_log(p: Path, kind: str, model: str | None, scorer: str | None, criteria: bool
              ) -> tuple[list[ConversationScore], Details, RunStatus]:
    """A simple-evals or Inspect log's scores, what it says of itself (the eval, or the task
    and status) and how its run ended."""
    if kind == "inspect":
        return read_inspect(p, model, scorer=scorer, criteria=criteria)
    recs, run = simple_evals_run(p, model, None, criteria)
    m = SIMPLE_EVALS_NAME.match(p.name)
    return recs, ({"eval": m.group("eval")} if m else {}), run


def _one_per_conversation(records: Sequence[ConversationScore]
                          ) -> dict[str, dict[str, ConversationScore]]:
    """The scores by model and conversation; a second one for the same pair is an error naming
    both."""
    by_model: dict[str, dict[str, ConversationScore]] = {}
    for r in records:
        seen = by_model.setdefault(r.model, {})
        if r.prompt_id in seen:
            raise InteropError(
                f"{r.where}: duplicate result for model {r.model}, prompt_id {r.prompt_id} "
                f"(first at {seen[r.prompt_id].where}); the report takes one score per "
                "conversation (simple-evals --n-repeats, reference-completion runs and "
                "repeated inputs list one more than once)"
            )
        seen[r.prompt_id] = r
    return by_model


def check_known_ids(results: LoadedResults, known_ids: Collection[str]) -> None:
    """Every prompt id must be a HealthBench conversation id."""
    known = set(known_ids)
    unknown = [r for recs in results.by_model.values() for r in recs.values()
               if r.prompt_id not in known]
    if unknown:
        r = unknown[0]
        raise InteropError(
            f"{r.where}: field 'prompt_id': {r.prompt_id!r} is not a HealthBench conversation "
            f"id ({len(unknown)} unknown id(s) in the input; the {len(known)} known ids are "
            "those of the released screen)"
        )


def healthbench_ids() -> list[str]:
    """The 5,000 HealthBench ids (every prompt_id of the released screen)."""
    return corpus.screening_ids(sources.fetch("screening_labels"))


# --------------------------------------------------------------------------------------------
# Command line


def _default_seed() -> int:
    from hbpsych_utils.pipeline import profiles

    return int(profiles.Profile.model_fields["seed"].default)


def _parser() -> argparse.ArgumentParser:
    ap = arguments.Parser(
        prog="python -m hbpsych_utils filter-results",
        description="Report HealthBench-Psych / Psych-Hard from per-conversation HealthBench "
        "results you already have (no generation, no grading).",
        epilog=f"exit codes: 0 reported, 1 bad input, 2 bad usage, {EXIT_INCOMPLETE} an "
        "input's run failed, was cancelled or did not finish (nothing reported unless "
        "--allow-incomplete)",
    )
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="simple-evals *_allresults.json, Inspect .eval/.json log, or hbpsych "
                    "scores .jsonl/.csv")
    ap.add_argument("--format", default="auto", choices=("auto", *FORMATS))
    ap.add_argument("--subset", action="append", metavar="v1|v2|hard|PATH.json",
                    type=subset_argument,
                    help="subset to report (repeatable; default: v1 and hard)")
    ap.add_argument("--seed", type=arguments.seed, default=None,
                    help="bootstrap seed, 0 to 2**32-1 (default: the default profile's seed)")
    ap.add_argument("--resamples", type=arguments.resamples, default=study.N_RESAMPLES,
                    help=f"bootstrap resamples, 1 to {study.MAX_RESAMPLES:,} "
                    f"(default {study.N_RESAMPLES})")
    ap.add_argument("--json", action="store_true", help="print JSON (with the missing ids)")
    ap.add_argument("--model", default=None,
                    help="model name for simple-evals/Inspect inputs (default: from the file)")
    ap.add_argument("--scorer", default=None,
                    help="Inspect scorer to read when a log has several")
    ap.add_argument("--allow-incomplete", action="store_true",
                    help="report the scores of a run that failed, was cancelled or did not "
                    "finish (its status is printed with them)")
    ap.add_argument("--by-tag", action="store_true",
                    help="also report every rubric axis and theme, for inputs with "
                    "per-criterion results (simple-evals and Inspect logs)")
    return ap


def unfinished_runs(inputs: Sequence[InputSummary]) -> list[str]:
    """One line per input whose run did not complete: file and what its log says."""
    return [f"{i.path}: {i.run.describe()}" for i in inputs
            if i.run is not None and not i.run.complete]


def main(argv: list[str] | None = None) -> int:
    """``filter-results``: 0 on success, 1 on bad input, 2 on bad usage, 3
    (:data:`EXIT_INCOMPLETE`) when an input's run did not complete and ``--allow-incomplete``
    was not given."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse's own exit (a one-line usage error or --help)
        return int(exc.code or 0)
    seed = _default_seed() if args.seed is None else args.seed
    try:
        results = load_results(args.inputs, args.format, model=args.model, scorer=args.scorer,
                               criteria=args.by_tag)
        check_known_ids(results, healthbench_ids())
        subsets = [resolve_subset(s) for s in (args.subset or DEFAULT_SUBSETS)]
        reports = filter_results(results, subsets, n_resamples=args.resamples, seed=seed,
                                 level=study.CI_LEVEL)
        tags = (tag_reports(results, subsets, corpus_tags=corpus_themes(results),
                            n_resamples=args.resamples, seed=seed, level=study.CI_LEVEL)
                if args.by_tag else None)
    except (InteropError, sources.ArtifactError, corpus.CorpusError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # an input that cannot be read (a folder, no permission): named
        print(f"error: {describe_os_error(exc)}", file=sys.stderr)
        return 1
    unfinished = unfinished_runs(results.inputs)
    if unfinished and not args.allow_incomplete:
        for line in unfinished:
            print(f"error: {line}; its scores are not a result of the whole run, so none are "
                  "reported (--allow-incomplete reports them, with this status)", file=sys.stderr)
        return EXIT_INCOMPLETE
    print(_output(args.json, results, reports, tags, n_resamples=args.resamples, seed=seed))
    return 0


def _output(as_json: bool, results: LoadedResults, reports: Sequence[SubsetReport],
            tags: Sequence[TagReport] | None, *, n_resamples: int, seed: int) -> str:
    """What the command prints: the report as JSON (the tags in it) or as text (the tags
    after it)."""
    if as_json:
        doc = reports_json(reports, results.inputs, n_resamples=n_resamples, seed=seed,
                           level=study.CI_LEVEL)
        if tags is not None:
            doc["tags"] = [t.as_dict() for t in tags]
        return json.dumps(doc, indent=2)
    text = format_text(reports, results.inputs, n_resamples=n_resamples, seed=seed,
                       level=study.CI_LEVEL)
    return text if tags is None else f"{text}\n{format_tags(tags, results)}"
