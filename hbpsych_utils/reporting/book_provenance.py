"""The book's provenance page: everything ``manifest.json`` records about the run (profile,
commit, stages, artifacts, subset files, grader template, spend, packages) and the
mindbench-results artifacts published from the run, copied into the book as downloads.
"""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from hbpsych_utils import study
from hbpsych_utils.core import wording
from hbpsych_utils.pipeline import metrics as m
from hbpsych_utils.pipeline.state import StageState
from hbpsych_utils.reporting import vocabulary
from hbpsych_utils.reporting.book_markdown import (
    cell,
    chapter_link,
    code,
    table,
    url,
    yaml_block,
)
from hbpsych_utils.reporting.book_run import STATE_WORDS, outputs_option
from hbpsych_utils.reporting.publish_contract import BENCHMARK_SLUG, items_name
from hbpsych_utils.reporting.run_metrics import RunMetrics, of

if TYPE_CHECKING:  # a book's publications, read only to build one (with pandas)
    from hbpsych_utils.reporting import publish

PUBLISHED_FILES = "published"
"""The book's copies of the files published from the run (downloads, not pages)."""


def _profile_values(profile: str | None) -> dict[str, Any] | None:
    """The profile's values as its YAML sets them (None when it cannot be loaded here)."""
    if not profile:
        return None
    from hbpsych_utils.core import config
    from hbpsych_utils.pipeline import profiles

    try:
        return profiles.load_profile(profile).model_dump(mode="json", exclude_unset=True)
    except (config.ProfileError, OSError, ValueError):
        return None


class ModelSpend(BaseModel):
    """One line of the ledger summary: a provider's model in one mode (none: a line without)."""

    model_config = ConfigDict(extra="ignore")
    provider: str = ""
    model: str = ""
    mode: str | None = ""
    calls: int | str = ""
    cost: float | str = ""


class Spend(BaseModel):
    """The LLM store's ledger summary as the manifest records it."""

    model_config = ConfigDict(extra="ignore")
    calls: int
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float
    by_model: list[ModelSpend] = []


def provenance_markdown(manifest: Mapping[str, Any] | None, chapters: Sequence[str],
                        metrics: RunMetrics,
                        states: Mapping[str, StageState] | None = None,
                        published: str = "") -> str:
    """The provenance page: everything ``manifest.json`` records about the run, every stage's
    build (who made its outputs, when, whether they are current), and ``published``
    (:func:`published_markdown`)."""
    parts = ["# Provenance\n"]
    if manifest is None:
        parts.append("This run folder has no `manifest.json`.\n")
        return "\n".join(parts)
    parts += _run(manifest)
    parts += _stages(states or {}, chapters)
    parts += _notebooks(manifest.get("notebooks") or [], chapters)
    parts += _profile(manifest)
    parts += _overrides(manifest.get("overrides"))
    parts += _artifacts(manifest.get("artifacts") or {})
    parts += _subset_files(manifest.get("subset_sha256") or {})
    parts += _grading(manifest)
    if published:
        parts.append(published)
    parts += ["## Spend\n", _spend_markdown(manifest.get("spend"), metrics)]
    parts += _packages(manifest.get("packages"), manifest.get("package_version", "?"))
    return "\n".join(parts)


# The page's sections, each from its part of the manifest (JSON as the runner wrote it)


def _run(manifest: Mapping[str, Any]) -> list[str]:
    git = manifest.get("git") or {}
    commit = git.get("commit") or "unknown (not a git checkout)"
    changes = git.get("dirty")
    dirty = ("" if not isinstance(changes, bool) else " (with uncommitted changes)" if changes
             else " (clean)")
    return ["## Run\n", table(["", ""], [
        ("profile", code(manifest.get("profile", "?"))),
        ("package version", code(manifest.get("package_version", "?"))),
        ("git commit", code(commit) + dirty),
        ("Python", code(manifest.get("python", "?"))),
        ("written at", cell(manifest.get("written_at", "?"))),
        ("external artifacts from", "the offline mirror" if manifest.get("mirror")
         else "their upstream URLs (or the local cache)"),
    ])]


def _stages(states: Mapping[str, StageState], chapters: Sequence[str]) -> list[str]:
    if not states:
        return []
    return ["## Stages\n",
            "Who made each stage's outputs and when (`build.json` in its folder), and whether "
            "they are current.\n",
            table(["stage", "state", "made by", "at"], [
                (chapter_link(name, name, chapters),
                 cell(STATE_WORDS[st.state] + (f": {st.reason}" if st.reason else "")),
                 cell({"runner": "the runner", "hand": "a notebook run by hand"}.get(
                     st.by or "", "–")), cell(st.written_at or "–"))
                for name, st in states.items() if st.state != "not_in_profile"])]


def _notebooks(notebooks: Sequence[Any], chapters: Sequence[str]) -> list[str]:
    if not notebooks:
        return []
    return ["## Notebooks of the last invocation\n", table(["notebook", "status", "seconds"], [
        (chapter_link(str(nb.get("notebook")), str(nb.get("notebook")), chapters),
         cell(nb.get("status", "?")), cell(nb.get("seconds", "")))
        for nb in notebooks if isinstance(nb, dict)])]


def _profile(manifest: Mapping[str, Any]) -> list[str]:
    values = manifest.get("profile_values")
    if values:
        return ["## Profile values\n\nThe validated profile the run used, every value "
                "(overrides applied).\n", yaml_block(values)]
    if values := _profile_values(manifest.get("profile")):
        return ["## Profile values\n\nAs the profile file sets them today (this manifest "
                "does not record them; every other value is its default).\n",
                yaml_block(values)]
    return []


def _overrides(overrides: object) -> list[str]:
    parts = ["## Overrides\n"]
    if isinstance(overrides, dict) and overrides:
        parts.append("Set on the command line for this run (`--set section.key=value`), with "
                     "the values the run used:\n")
        parts.append(table(["key", "value"], [
            (code(k), code(json.dumps(v, default=str))) for k, v in overrides.items()]))
    elif overrides:
        parts.append(yaml_block(overrides))
    else:
        parts.append("None: the run used the profile as written.\n")
    return parts


def _artifacts(artifacts: Mapping[str, Any]) -> list[str]:
    if not artifacts:
        return []
    infos = {name: (info if isinstance(info, dict) else {})
             for name, info in sorted(artifacts.items())}
    return ["## External artifacts\n",
            table(["artifact", "sha256", "from", "used by"], [
                (code(name), vocabulary.identifier_html(info.get("sha256", "?"), shown=12),
                 cell(info.get("source", "")), cell(", ".join(info.get("used_by", []))))
                for name, info in infos.items()]),
            "Upstream, pinned to a commit or a content hash:\n",
            "".join(f"- {code(name, cell=False)}: {url(info.get('url'))}"
                    + (f" ({cell(info['licence'])})" if info.get("licence") else "") + "\n"
                    for name, info in infos.items())]


def _subset_files(hashes: Mapping[str, Any]) -> list[str]:
    if not hashes:
        return []
    return ["## Subset files\n", table(["subset", "sha256"], [
        (cell(study.SUBSET_TITLES.get(k, k)), vocabulary.identifier_html(v, shown=12))
        for k, v in hashes.items()])]


def _grading(manifest: Mapping[str, Any]) -> list[str]:
    """The grader template's hash, and a live run's generation and grading settings."""
    grading = manifest.get("grading") if isinstance(manifest.get("grading"), dict) else {}
    template = manifest.get("grader_template_sha256") or (grading or {}).get(
        "grader_template_sha256")
    parts = ["## Grader template\n",
             f"sha256 {code(template, cell=False)}\n" if template
             else "Not recorded (no grading stage ran).\n"]
    for key, title in (("generation", "Generation"), ("grading", "Grading")):
        if isinstance(manifest.get(key), dict):
            parts += [f"## {title} (live)\n", yaml_block(manifest[key])]
    return parts


def _packages(packages: object, version: object) -> list[str]:
    parts = ["## Package versions\n"]
    if isinstance(packages, dict) and packages:
        parts.append(table(["package", "version"], [
            (code(k), cell(v) if v is not None else "not installed")
            for k, v in sorted(packages.items(), key=lambda kv: kv[0].lower())]))
    elif packages:
        parts.append(yaml_block(packages))
    else:
        parts.append(f"Not recorded by this manifest (package `hbpsych_utils` "
                     f"{cell(version)}).\n")
    return parts


def published_markdown(profile_dir: Path, src: Path, profile: str) -> str:
    """The provenance page's section on the mindbench-results artifacts published from the run
    (``python -m hbpsych_utils publish``): each publication's files copied into the book's
    sources (``src``) as downloads, while they are still the files it wrote; one that reports
    stages changed since says so, with the command that publishes again ("" when nothing was
    published)."""
    from hbpsych_utils.reporting import publish  # with pandas: loaded only to build a book

    try:
        shown = publish.for_book(profile_dir)
    except publish.PublishError as exc:
        return f"## Published results\n\n{cell(exc)}\n"
    if not shown:
        return ""
    parts = ["## Published results\n",
             "This run's scores as mindbench-results v1 artifacts (the MindBench results "
             "hub's contract), one per candidate, each validated against the registry's schema "
             "before it was written.\n"]
    for item in sorted(shown, key=lambda x: x.record.subset):
        parts += _publication(item, profile_dir, src, profile)
    return "\n".join(parts)


def _publication(item: publish.Shown, profile_dir: Path, src: Path, profile: str) -> list[str]:
    """One publication: where its artifacts went and when, whether it is current, and (while
    its files are those it wrote) its files as downloads, copied into the book's sources."""
    from hbpsych_utils.reporting.publish import EXPORT_MANIFEST

    rec = item.record
    again = (f"python -m hbpsych_utils publish {shlex.quote(profile)} --subset "
             f"{rec.subset}{outputs_option(profile_dir.parent)}")
    names = sorted(n for n in rec.files if n.endswith(".json") and n != EXPORT_MANIFEST)
    folder, inside = rec.place()
    parts = [f"### {cell(study.SUBSET_TITLES.get(rec.subset, rec.subset))}, {rec.mode} mode\n",
             f"{wording.count(len(names), 'artifact')} written to {code(folder, cell=False)} "
             f"{'in the run folder' if inside else '(a folder outside the run folder)'}"
             f" at {cell(rec.written_at)}.\n"]
    if item.stale:
        parts.append(f"**Not current**: {', '.join(item.stale)} changed since they were "
                     f"written. Publish again with `{again}`.\n")
    if not item.files_ok:
        parts.append(f"The files are no longer those it wrote (missing or changed), so the "
                     f"book does not link them. Publish again with `{again}`.\n")
        return parts
    dest = src / PUBLISHED_FILES / rec.subset
    dest.mkdir(parents=True, exist_ok=True)
    for name in rec.files:
        shutil.copyfile(item.folder / name, dest / name)
    rel = f"{PUBLISHED_FILES}/{rec.subset}"
    parts.append(f"Export manifest (the files' sha256): {{download}}"
                 f"`{EXPORT_MANIFEST} <{rel}/{EXPORT_MANIFEST}>`.\n")
    rows = []
    for name in names:
        items = items_name(name.removeprefix(f"{BENCHMARK_SLUG}--").removesuffix(".json"))
        rows.append((code(name), f"{{download}}`artifact <{rel}/{name}>`",
                     f"{{download}}`per item <{rel}/{items}>`" if items in rec.files else "–",
                     code(rec.files[name][:12])))
    parts.append(table(["file", "artifact", "per-item scores", "sha256"], rows))
    return parts


def _spend_markdown(spend: object, metrics: RunMetrics) -> str:
    """What this run's model calls cost (the manifest's ledger summary), and in paper mode what
    the released study paid."""
    parts = []
    if spend is not None:
        try:
            s = Spend.model_validate(spend)
        except ValidationError:
            parts.append(yaml_block(spend))
        else:
            parts.append(f"This run's model calls: {s.calls:,} calls, {s.input_tokens:,} input "
                         f"and {s.output_tokens:,} output tokens, US$ {s.cost:.4f}.\n")
            if s.by_model:
                parts.append(table(["provider", "model", "mode", "calls", "cost (US$)"], [
                    (cell(r.provider), code(r.model), cell(r.mode), cell(r.calls), cell(r.cost))
                    for r in s.by_model]))
    generated, graded = of(metrics, m.GENERATION), of(metrics, m.GRADING)
    released = ([("generation", generated.spend_generate_usd)]
                if isinstance(generated, m.GenerationPaperMetrics) else [])
    released += ([("grading", graded.spend_grade_usd)]
                 if isinstance(graded, m.GradingPaperMetrics) else [])
    if released:
        parts.append("The released study's own spend (paper mode, from its run log): "
                     + ", ".join(f"{label} US$ {v:,.2f}" for label, v in released) + ".\n")
    return "\n".join(parts) if parts else "No model calls recorded.\n"
