"""The comparability card: what a headline score rests on, so it can be set beside another.

Published HealthBench scores of one model differ by a factor of two across harnesses whose
judges and settings go undeclared. Beside every headline score the book shows (the landing
page, Table 1, the what-if panel) and in every exported artifact, the card says which judges
graded and how they were called (temperature, output cap, thinking or effort), how the panel
combines them, the clip rule, the length adjustment, the subset and its hash, n, and the
interval method.

Every field is read from the run's records: the judges and their temperature from 07's metrics
(live) or the judges of the released matrix 08 read (paper: the released files record no
settings, so the card says the study's stated ones and says so); the output cap and the seed
from the manifest's profile values; what each judge was sent from the run's model registry
applied to those values (``llm.models.resolve_decoding``, as the engine sends them); the subset's
size and hash from 05's metrics; the resamples and level from 08's metrics. A what-if state
varies the card (:meth:`Card.varied`): its judges, combination, subset, clip, length rule and n.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from hbpsych_utils import study
from hbpsych_utils.evaluation import length
from hbpsych_utils.llm.models import ConfigError, profile_registry, resolve_decoding
from hbpsych_utils.pipeline import graph
from hbpsych_utils.pipeline import metrics as metrics_models
from hbpsych_utils.pipeline.profiles import Profile
from hbpsych_utils.reporting import vocabulary

CARD_CAPTION = ("Comparability card: what this score rests on, read from the run's manifest "
                "and its chapters' metrics")
CARD_SUMMARY = "Comparability card: judges, settings, rules, subset, n, interval"


class JudgeSetting(BaseModel):
    """One judge and what it was sent with each grading call."""

    model_config = ConfigDict(frozen=True)

    judge: str
    sent: dict[str, Any]
    """Decoding settings as the engine sends them (empty where the registry cannot say)."""


class Card(BaseModel):
    """The comparability card of one headline score (or of a what-if state)."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["paper", "live"]
    judges: list[JudgeSetting]
    settings_source: str
    """Where the judges' settings were read."""
    combine: Literal["mean", "median"] = "mean"
    clipped: bool = True
    length_variant: str | None = None
    """The HealthBench variant whose length penalty adjusts the score; None: raw scores."""
    refusals_excluded: bool = False
    subset: str
    subset_size: int | None
    subset_sha256: str | None
    n_min: int | None
    n_max: int | None
    n_resamples: int | None
    seed: int | None
    level: float | None
    """The intervals' level; None: point estimates."""
    grader_template_sha256: str | None

    def varied(self, *, judges: Sequence[str], combine: Literal["mean", "median"], subset: str,
               subset_size: int | None, subset_sha256: str | None, clipped: bool,
               length_variant: str | None, refusals_excluded: bool,
               n: Sequence[int]) -> Card:
        """The card of a what-if state: the same run, some judges, another rule or subset."""
        by_judge = {j.judge: j for j in self.judges}
        return self.model_copy(update={
            "judges": [by_judge[j] for j in judges], "combine": combine, "subset": subset,
            "subset_size": subset_size, "subset_sha256": subset_sha256, "clipped": clipped,
            "length_variant": length_variant, "refusals_excluded": refusals_excluded,
            "n_min": min(n, default=None), "n_max": max(n, default=None)})

    # --- what a reader sees ------------------------------------------------------------------

    def rows(self) -> dict[str, Any]:
        """The card's lines, by machine name (``labels.COLUMNS`` labels them)."""
        out: dict[str, Any] = {
            "card_judges": "; ".join(f"{study.display_name(j.judge)}: {settings_text(j.sent)}"
                                     for j in self.judges),
            "card_settings_source": self.settings_source,
            "card_panel": self.panel_text(),
            "card_clip": self.clip_text(),
            "card_length": self.length_text(),
        }
        if self.mode == graph.LIVE:
            out["card_refusals"] = ("each model's own refused conversations left out"
                                    if self.refusals_excluded else
                                    "kept: a refusal is graded as returned (the study's policy)")
        size = f", {self.subset_size:,} conversations" if self.subset_size else ""
        out["card_subset"] = study.SUBSET_TITLES.get(self.subset, self.subset) + size
        if self.subset_sha256:
            out["card_subset_sha256"] = self.subset_sha256
        out["card_n"] = self.n_text()
        out["card_interval"] = self.interval_text()
        if self.grader_template_sha256:
            out["card_grader"] = self.grader_template_sha256
        return out

    def panel_text(self) -> str:
        n = len(self.judges)
        if n == 1:
            return ("one judge: its mean over conversations" if self.mode == graph.LIVE
                    else "one judge: its released clipped mean")
        if self.mode == graph.LIVE:
            return (f"the {self.combine} of the {n} judges' scores of each conversation (the "
                    "conversations every one of them scored), then the mean over conversations")
        return (f"the {self.combine} of the {n} judges' released clipped means (the matrices "
                "hold no per-conversation grades)")

    def clip_text(self) -> str:
        if not self.clipped:
            return "none: the plain mean over conversations (HealthBench clips it to [0, 1])"
        if self.mode == graph.LIVE:
            return ("the mean over conversations clipped to [0, 1] (HealthBench's rule); a "
                    "conversation's own score is not clipped")
        return "each judge's mean over conversations clipped to [0, 1] (HealthBench's rule)"

    def length_text(self) -> str:
        if self.length_variant is None:
            return "none: raw scores"
        return (f"{length.VARIANT_NAMES[self.length_variant]} penalty, "
                f"{length.penalty(self.length_variant):g} per {length.PER_CHARS} characters "
                f"from {length.CENTER:,}, on each conversation's score before the mean")

    def n_text(self) -> str:
        if self.n_min is None or self.n_max is None:
            return "not recorded"
        span = (f"{self.n_min:,}" if self.n_min == self.n_max
                else f"{self.n_min:,} to {self.n_max:,}")
        return f"{span} conversations per model"

    def interval_text(self) -> str:
        if self.level is None:
            return ("none: point estimates (the released matrices hold one mean per model and "
                    "judge)")
        resamples = f"{self.n_resamples:,} resamples" if self.n_resamples else "resamples"
        seed = f", seed {self.seed}" if self.seed is not None else ""
        clip = ", each resample's mean clipped" if self.clipped else ""
        return (f"{vocabulary.level_text(self.level)} percentile bootstrap over "
                f"conversations, {resamples}{seed}{clip}")

    def table(self, caption: str = CARD_CAPTION) -> vocabulary.Facts:
        return vocabulary.facts(self.rows(), caption,
                                kinds={"card_subset_sha256": "identifier",
                                       "card_grader": "identifier"}, level=self.level)

    def html(self, caption: str = "") -> str:
        """The card as the vocabulary shows a table of facts (no inline stylesheet: the book
        links it)."""
        return self.table(caption or CARD_CAPTION).html(style=False)

    def markdown(self) -> str:
        """The card as a MyST block: its HTML inside a folded ``<details>``."""
        return (f'<details class="hb-card"><summary>{CARD_SUMMARY}</summary>\n\n'
                f"{self.html()}\n\n</details>\n")


_CAPS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def _setting_text(key: str, value: Any) -> str:
    """One decoding setting other than the temperature, in words."""
    if key in _CAPS:
        return f"at most {int(value):,} output tokens"
    if key == "thinking_config" and isinstance(value, Mapping):
        budget = value.get("thinking_budget")
        return "thinking off (budget 0)" if budget == 0 else f"thinking budget {budget}"
    if key == "thinking" and isinstance(value, Mapping):
        return (f"extended thinking, budget {value.get('budget_tokens')} tokens"
                if value.get("type") == "enabled" else "extended thinking off")
    if key in ("reasoning_effort", "effort"):
        return f"reasoning effort {value}"
    if key == "reasoning" and isinstance(value, Mapping) and "effort" in value:
        return f"reasoning effort {value['effort']}"
    return f"{key}={json.dumps(value, sort_keys=True)}"


def settings_text(sent: Mapping[str, Any]) -> str:
    """A judge's decoding settings in words: temperature (or the provider's default where the
    model takes none), the output cap, thinking or reasoning effort; anything else as
    ``key=value``."""
    if not sent:
        return "settings not recorded"
    parts = [f"temperature {sent['temperature']:g}" if "temperature" in sent
             else "temperature not sent (the provider's default)"]
    parts += [_setting_text(key, value) for key, value in sent.items() if key != "temperature"]
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# The card read from a run


def _sent(profile: Profile, judges: Sequence[str], temperature: float,
          max_tokens: int) -> list[JudgeSetting]:
    """What each judge is sent at ``temperature`` and ``max_tokens`` under the run's model
    registry (empty settings for a judge the registry does not hold)."""
    try:
        registry = profile_registry(profile.llm.registry_file)
    except ConfigError:
        return [JudgeSetting(judge=j, sent={}) for j in judges]
    out = []
    for j in judges:
        try:
            spec = registry.model(j)
        except ConfigError:
            out.append(JudgeSetting(judge=j, sent={}))
            continue
        kind = registry.providers[spec.provider].kind
        out.append(JudgeSetting(judge=j, sent=resolve_decoding(spec, kind, temperature,
                                                                max_tokens, seed=None)))
    return out


def run_card(profile: Profile, manifest: Mapping[str, Any], metrics: Mapping[str, Any], *,
             subset: str | None = None, n: Sequence[int] = ()) -> Card | None:
    """The card of a run's headline score on ``subset`` (08's primary by default), over the
    ``n`` of each model's score; None when 08 did not run."""
    scores = metrics.get(graph.SCORES)
    if scores is None:
        return None
    subset = subset or scores.subset
    grading = metrics.get(graph.GRADING)
    template = getattr(grading, "grader_template_sha256", None)
    if isinstance(grading, metrics_models.GradingLiveMetrics):
        judges = _sent(profile, grading.judges, grading.temperature,
                       profile.grading.max_tokens)
        source = ("the judges and temperature this run graded with (chapter 07's metrics), "
                  "its output cap (the run's profile), sent as the model registry says")
    else:
        judges = _sent(profile, list(scores.per_judge), study.STUDY_TEMPERATURE,
                       study.GRADER_MAX_TOKENS)
        source = ("the judges of the released matrices chapter 08 read; the released files "
                  "record no settings, so these are the study's stated ones, sent as the "
                  "model registry says")
    subsets = metrics.get(graph.SUBSET)
    size = subsets.sizes().get(subset) if subsets is not None else None
    sha = (subsets.hashes().get(subset) if subsets is not None
           else (manifest.get("subset_sha256") or {}).get(subset))
    live = scores.mode == graph.LIVE
    return Card(mode=scores.mode, judges=judges, settings_source=source, subset=subset,
                subset_size=size, subset_sha256=sha, n_min=min(n, default=None),
                n_max=max(n, default=None),
                n_resamples=scores.n_resamples if live else None,
                seed=profile.seed if live else None,
                level=(scores.ci_level or profile.ci_level) if live else None,
                grader_template_sha256=template)


def headline_n(metrics: Mapping[str, Any]) -> list[int]:
    """The n of each model's headline score as 08 recorded it (live: ``n_panel``)."""
    scores = metrics.get(graph.SCORES)
    return [int(v) for v in (getattr(scores, "n_panel", None) or {}).values()]


def read_run(run_dir: Path) -> tuple[Profile, dict[str, Any], dict[str, Any]] | None:
    """A run folder's profile (its manifest's values), manifest and the metrics the card
    reads; None when it has no readable manifest."""
    from hbpsych_utils.core import records

    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return None
    manifest = records.read_json(path, error=ValueError)
    if not isinstance(manifest, dict):
        return None
    try:
        profile = Profile.model_validate(manifest.get("profile_values"))
    except ValueError:
        return None
    return profile, manifest, run_metrics(run_dir)


def run_metrics(run_dir: Path) -> dict[str, Any]:
    """The metrics the card reads (05, 07, 08), typed, of those stages that wrote them."""
    return {stage: metrics_models.read(run_dir, stage)
            for stage in (graph.SUBSET, graph.GRADING, graph.SCORES)
            if (Path(run_dir) / stage / graph.METRICS).is_file()}


def exported(run_dir: Path, profile: Profile, manifest: Mapping[str, Any], subset: str
             ) -> Callable[[Sequence[int]], dict[str, Any] | None]:
    """The card as an exported artifact of subset ``subset`` carries it
    (``run.harness_config.comparability``), for a candidate's ``n``: its fields as JSON data
    and its lines in words (the run's records are read once)."""
    card = run_card(profile, manifest, run_metrics(run_dir), subset=subset)

    def for_n(n: Sequence[int]) -> dict[str, Any] | None:
        if card is None:
            return None
        mine = card.model_copy(update={"n_min": min(n, default=None),
                                       "n_max": max(n, default=None)})
        return {**mine.model_dump(mode="json"), "in_words": mine.rows()}

    return for_n
