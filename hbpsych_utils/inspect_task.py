"""HealthBench-Psych as a UK AISI Inspect task, graded by one judge or the study's panel.

    pip install -e '.[inspect]'
    inspect eval hbpsych_utils/inspect_task.py@healthbench_psych --model openai/gpt-4o \\
        -T subset=hard

Samples are the subset's conversations from the verified HealthBench corpus (``subset``: v1,
v2, hard or a subset JSON file; the registry's corpus, or ``corpus_file``), sample id = the
HealthBench ``prompt_id``, so Inspect's ``--sample-id`` takes ``python -m hbpsych_utils ids
--format inspect``. An offline machine has part of the corpus: the task runs the subset's
conversations it holds and says how many (log warning and ``Task.metadata``).

Generation is Inspect's own: ``generate()`` with the model and the generate options given to
``inspect eval``. Grading reuses this package, it does not fork it: the grader template comes
from the registry, sha256-checked (``grading.load_template``); each criterion's request is
``grading.build_requests`` (same rendering, byte for byte, as the compendium and simple-evals:
system "You are a helpful assistant.", the filled template, 2,048 tokens); replies go through
``grading.parse_verdict`` (reference parser, then pattern recovery) with at most ``max_reasks``
re-asks, and a criterion still without a verdict leaves the conversation unscored for that judge
(never counted as false); ``grading.score_conversation`` scores each judge and
``scoring.panel_conversation_scores`` makes the panel score (equal-weight mean over the judges,
only where every judge scored). Metrics use ``scoring.bootstrap_ci`` and
``scoring.reference_bootstrap_std`` with the compendium's seed: the same numbers
``python -m hbpsych_utils filter-results`` reports for the log.

Judges: the Inspect model role ``judges`` (``--model-role judges=A,B,C``; one model = one
judge), else the task argument ``judges`` (a list, or names joined by commas), else the study's
panel (GPT-4.1, Claude Haiku 4.5, Gemini 2.5 Flash, as ``openai/``, ``anthropic/`` and
``google/`` models; keys from the providers' usual environment variables). Each judge runs at
``judge_temperature`` (the study's 0.0; the reference grader uses 0.5) under the registry's
per-model settings where the model is in ``params/models.yaml`` (:func:`judge_config`: its
temperature rule and output cap, and a Gemini thinking budget, Gemini 2.5 Flash's 0 as
``reasoning_tokens=0``).

Score value per sample: ``healthbench_score`` (the panel score, unclipped; NaN when unscored,
the key filter-results reads) and one key per judge (its unclipped score). Metrics:
``panel_clipped_mean`` with ``panel_ci_low``/``panel_ci_high`` (seeded percentile bootstrap,
95%) and ``panel_bootstrap_std`` (HealthBench's statistic), ``n_panel_scored``, and per judge
``<judge>_clipped_mean``/``_ci_low``/``_ci_high``. Score metadata keeps every verdict (judge,
criterion, met, recovered, attempts) so a reader can recompute any of them.

Refusals. The reply graded is the model's answer text (:func:`graded_reply`); an explicit
refusal is graded as the empty reply it is, as the engine grades it (METHODS section 6: kept as
the model's answer, graded as returned, never re-sampled). Inspect itself puts an OpenAI
refusal's explanation (``message.refusal``) into ``output.completion``; it is left out here.
What the references do: simple-evals' HealthBench grader grades the text its sampler returns,
an empty one included (``assistant: `` and nothing after), and its samplers read the content
only, never ``message.refusal``: ``ResponsesSampler`` returns ``output_text``, which has no
refusal parts (so a refusal is graded as an empty reply, as here), ``ChatCompletionSampler``
retries a reply whose content is null (a Structured Outputs refusal) until it gets content,
and a refusal on a plain chat request is content text, graded as written (here too).
inspect_evals' ``healthbench`` scorer grades ``state.output.completion`` (so an OpenAI
refusal's explanation) and scores an empty completion 0 without asking the judge (here the
empty reply is graded). This task follows simple-evals and the engine.

From inspect_evals' ``healthbench`` task nothing is imported, because its grading departs from
the reference. Read in the inspect_evals 0.26.0 release (its ``healthbench`` task at version
3-B), against simple-evals' ``healthbench_eval.py``:

- its judge defaults to ``openai/gpt-4o-mini`` (``-T judge_model``): neither the study's panel
  nor the reference's GPT-4.1; one judge only;
- its judge runs at temperature 0.0 with no output cap by default (``judge_temperature``,
  ``judge_max_tokens``); the reference grades at 0.5 with 2,048 tokens;
- an empty reply is scored 0 without any judge call ("No model response"); the reference
  grades it like any other reply (here too: a refusal is graded as returned);
- it grades ``state.output.completion``, which holds an OpenAI refusal's explanation
  (``message.refusal``); the reference's samplers read the content only;
- a verdict it cannot parse after three attempts, or a judge call that raised on the third, is
  counted as not met; the reference re-asks until it gets one, the study excludes it;
- it strips a bare ``` fence the reference leaves (a reply the reference re-asks is parsed);
- it fetches the corpus from OpenAI's blob store, so offline it needs ``-T local_path=FILE``
  (``python -m hbpsych_utils export`` writes the subset's conversations);
- its grader template is pasted into its source; it equals the registry's byte for byte, and
  conversation and rubric item are rendered as the reference does (here the template is
  fetched and hash-checked).

Its sample layout is kept (id = ``prompt_id``, ``metadata.prompt_id`` and
``metadata.rubrics``), so logs of either task read the same way (its ``Score.value`` is a
mapping holding ``healthbench_score`` since the task's version 1.1.0), and its task runs on the
subset with ``--sample-id`` or ``local_path`` (``docs/publishing.md``).
"""

# No `from __future__ import annotations`: `inspect eval FILE@task` executes this file as a
# module missing from sys.modules, where dataclasses cannot resolve string annotations.
import asyncio
import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

try:
    from inspect_ai import Task, task
except ModuleNotFoundError as exc:  # the optional extra is not installed
    raise ModuleNotFoundError(
        f"{exc}: the Inspect task needs the inspect extra: pip install -e '.[inspect]'",
        name=exc.name) from exc
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ContentText,
    GenerateConfig,
    Model,
    ModelOutput,
    get_model,
    model_roles,
)
from inspect_ai.scorer import (
    Metric,
    SampleScore,
    Score,
    Scorer,
    Target,
    Value,
    metric,
    scorer,
)
from inspect_ai.solver import TaskState, generate

from hbpsych_utils import study
from hbpsych_utils.construction import corpus
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.core import sources
from hbpsych_utils.evaluation import grading, scoring
from hbpsych_utils.llm import ConfigError, Registry, load_registry
from hbpsych_utils.llm.models import resolve_decoding
from hbpsych_utils.reporting.interop import resolve_subset

log = logging.getLogger(__name__)

JUDGES_ROLE = "judges"
"""The Inspect model role that names the judges (a list binds a panel)."""
PANEL_KEY = "healthbench_score"
"""Score value key of the panel score: the key ``filter-results`` reads from Inspect logs."""
INSPECT_PROVIDER = {"openai": "openai", "anthropic": "anthropic", "google": "google"}
"""The Inspect provider for each registry provider kind that has a first-party one."""


# --------------------------------------------------------------------------------------------
# Samples


@dataclass(frozen=True)
class SubsetSamples:
    """The subset's conversations the corpus holds, and how many of its ids that is."""

    name: str
    sha256: str
    n_subset: int
    conversations: list[Conversation]
    corpus: str

    def metadata(self) -> dict[str, Any]:
        return {"subset": self.name, "subset_sha256": self.sha256, "n_subset": self.n_subset,
                "n_available": len(self.conversations), "corpus": self.corpus}


def subset_samples(subset: str, corpus_file: str | Path | None = None) -> SubsetSamples:
    """Resolve ``subset`` and take its conversations from the verified corpus (partial is fine:
    the count says what is missing)."""
    chosen = resolve_subset(subset)
    loaded = corpus.load_for_profile(allow_partial=True, corpus_file=corpus_file,
                                     fetch=sources.fetch)
    by_id = loaded.by_id()
    convs = [by_id[i] for i in chosen.ids if i in by_id]
    if not convs:
        raise ValueError(f"subset {subset!r}: none of its {len(chosen.ids)} conversations is in "
                         f"the corpus ({loaded.coverage.describe()})")
    if len(convs) < len(chosen.ids):
        log.warning("%s: %d of %d conversations available (%s)", chosen.name, len(convs),
                    len(chosen.ids), loaded.coverage.describe())
    return SubsetSamples(chosen.name, corpus.ids_hash(chosen.ids), len(chosen.ids), convs,
                         loaded.coverage.describe())


_MESSAGE_TYPES: dict[str, type[ChatMessage]] = {
    "system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant,
}


def to_sample(conv: Conversation) -> Sample:
    """A conversation as an Inspect sample (inspect_evals' layout: id and metadata.prompt_id)."""
    try:
        messages = [_MESSAGE_TYPES[m.role](content=m.content) for m in conv.prompt]
    except KeyError as exc:
        raise ValueError(f"prompt_id {conv.prompt_id}: message role {exc.args[0]!r} is not one "
                         f"of {sorted(_MESSAGE_TYPES)}") from None
    rubrics = [{"criterion": r.criterion, "points": r.points, "tags": list(r.tags)}
               for r in conv.rubrics]
    return Sample(id=conv.prompt_id, input=messages, metadata={
        "prompt_id": conv.prompt_id, "rubrics": rubrics, "example_tags": list(conv.example_tags)})


# --------------------------------------------------------------------------------------------
# Judges


@functools.cache
def _registry() -> Registry:
    """params/models.yaml, read once per process (the scorer asks for every sample)."""
    return load_registry()


def inspect_model_name(model_id: str) -> str:
    """``provider/api_model`` for a registry model reached by a first-party Inspect provider."""
    registry = _registry()
    spec = registry.model(model_id)
    kind = registry.provider_of(model_id).kind
    if kind not in INSPECT_PROVIDER:
        raise ConfigError(f"model {model_id!r}: provider kind {kind!r} has no first-party "
                          f"Inspect provider (have {sorted(INSPECT_PROVIDER)}); name it directly")
    return f"{INSPECT_PROVIDER[kind]}/{spec.api_model}"


def study_panel() -> list[str]:
    """The study's three judges as Inspect model names."""
    return [inspect_model_name(j) for j in study.JUDGE_PANEL]


def judge_names(judges: str | Sequence[str] | None) -> list[str] | None:
    """The ``judges`` task argument as a list (``-T judges=a,b`` arrives as one string)."""
    if judges is None:
        return None
    names = [j.strip() for j in judges.split(",")] if isinstance(judges, str) else list(judges)
    names = [n for n in names if n]
    if not names:
        raise ValueError("judges: empty; name at least one Inspect model")
    return names


def judge_config(name: str, temperature: float, max_tokens: int) -> GenerateConfig:
    """Decoding of one judge. For a model whose snapshot id (the name's last part) is in the
    registry, the study's temperature as the engine sends it (``llm.models.resolve_decoding``:
    none for a ``rejected`` temperature, the model's own for a fixed one), the cap lowered to
    its ``max_tokens_cap``, and Gemini's thinking budget as ``reasoning_tokens``; its other
    provider parameters (Anthropic's ``thinking``) have no one-to-one Inspect setting and are
    left to Inspect's defaults. Any other model gets the study's temperature and cap."""
    registry = _registry()
    snapshot = name.rsplit("/", 1)[-1]
    model_id = next((n for n, m in registry.models.items() if m.api_model == snapshot), None)
    if model_id is None:
        return GenerateConfig(temperature=temperature, max_tokens=max_tokens)
    spec = registry.model(model_id)
    sent = resolve_decoding(spec, registry.provider_of(model_id).kind, temperature, max_tokens,
                            seed=None)
    if spec.max_tokens_cap is not None:
        max_tokens = min(max_tokens, spec.max_tokens_cap)
    return GenerateConfig(temperature=sent.get("temperature"), max_tokens=max_tokens,
                          reasoning_tokens=sent.get("thinking_config", {}).get("thinking_budget"))


def judge_key(model: Model, taken: set[str]) -> str:
    """A judge's key in score values and metric names: the model name (provider prefix dropped),
    or the full name when two judges share it."""
    key = model.name.rsplit("/", 1)[-1]
    return str(model) if key in taken else key


def _bound_judges() -> list[Model]:
    bound = model_roles().get(JUDGES_ROLE)
    if bound is None:
        return [get_model(n) for n in study_panel()]
    return list(bound) if isinstance(bound, list) else [bound]


# --------------------------------------------------------------------------------------------
# Grading one conversation


def graded_reply(output: ModelOutput) -> str:
    """The reply the judges grade: the model's answer text, without the refusal explanation
    Inspect adds to it (its OpenAI provider turns ``message.refusal`` into a text part marked
    ``refusal``, which ``output.completion`` includes). An explicit refusal is therefore graded
    as the empty reply it is, as the engine stores and grades it (see the module docstring)."""
    content = output.message.content if output.choices else None
    if not isinstance(content, list) or not any(
            isinstance(c, ContentText) and c.refusal for c in content):
        return output.completion or ""
    return "\n".join(c.text for c in content if isinstance(c, ContentText) and not c.refusal)


@dataclass(frozen=True)
class CriterionVerdict:
    judge: str
    criterion_index: int
    criteria_met: bool | None
    recovered: bool
    attempts: int


async def _verdict(judge: Model, request: grading.GraderRequest, config: GenerateConfig,
                   max_reasks: int) -> grading.Verdict:
    """First reply, then re-asks while nothing parses (``grading.needs_reask``)."""
    messages = [_MESSAGE_TYPES[m["role"]](content=m["content"]) for m in request.messages()]
    attempt = 0
    while True:
        attempt += 1
        out = await judge.generate(messages, config=config)
        verdict = grading.parse_verdict(out.completion, attempt=attempt)
        if not grading.needs_reask(verdict, max_reasks=max_reasks):
            return verdict


def panel_value(conv: Conversation, verdicts: Mapping[str, Sequence[grading.Verdict]]
                ) -> dict[str, float]:
    """Per-judge scores and the panel score of one conversation (NaN = unscored)."""
    rows = []
    for key, vs in verdicts.items():
        s = grading.score_conversation(conv, vs).score
        rows.append({"judge": key, "candidate": "", "prompt_id": conv.prompt_id,
                     "score": math.nan if s is None else s})
    table = pd.DataFrame(rows)
    panel = scoring.panel_conversation_scores(table, "", list(verdicts))
    value = {PANEL_KEY: float(panel.iloc[0]) if len(panel) else math.nan}
    value.update({r["judge"]: r["score"] for r in rows})
    return value


# --------------------------------------------------------------------------------------------
# Metrics


def panel_statistics(values: Sequence[Mapping[str, Any]], *, n_resamples: int, seed: int,
                     level: float) -> dict[str, float]:
    """Clipped means with seeded bootstrap intervals: the panel over the conversations every
    judge scored, each judge over the conversations it scored."""
    out: dict[str, float] = {}
    keys = [PANEL_KEY, *sorted({k for v in values for k in v} - {PANEL_KEY})]
    for key in keys:
        name = "panel" if key == PANEL_KEY else key
        xs = [float(v[key]) for v in values if key in v and math.isfinite(float(v[key]))]
        if not xs:
            out[f"{name}_clipped_mean"] = math.nan
            continue
        ci = scoring.bootstrap_ci(xs, n_resamples=n_resamples, seed=seed, level=level)
        out[f"{name}_clipped_mean"] = ci.estimate
        out[f"{name}_ci_low"], out[f"{name}_ci_high"] = ci.low, ci.high
        if key == PANEL_KEY:
            out["panel_bootstrap_std"] = scoring.reference_bootstrap_std(
                xs, n_resamples=n_resamples, seed=seed)
            out["n_panel_scored"] = float(len(xs))
    return out


@metric
def psych_panel_metrics(*, n_resamples: int, seed: int, level: float) -> Metric:
    """Panel and per-judge clipped means with a seeded bootstrap (``panel_statistics``)."""

    def compute(scores: list[SampleScore]) -> Value:
        values = [s.score.value for s in scores if isinstance(s.score.value, Mapping)]
        return panel_statistics(values, n_resamples=n_resamples, seed=seed, level=level)

    return compute


# --------------------------------------------------------------------------------------------
# Scorer and task


@scorer(metrics=[psych_panel_metrics(n_resamples=study.N_RESAMPLES, seed=study.SEED,
                                     level=study.CI_LEVEL)])
def psych_panel_scorer(
    conversations: Mapping[str, Conversation],
    template: str,
    temperature: float = study.STUDY_TEMPERATURE,
    max_tokens: int = grading.MAX_TOKENS,
    max_reasks: int = grading.DEFAULT_MAX_REASKS,
) -> Scorer:
    """Every criterion by every judge (concurrently), then per-judge and panel scores."""

    async def score(state: TaskState, target: Target) -> Score:
        conv = conversations[str(state.sample_id)]
        reply = graded_reply(state.output)  # an empty reply is graded as returned
        requests = grading.build_requests(conv, reply, template, temperature=temperature,
                                          max_tokens=max_tokens)
        judges, taken = {}, set()
        for model in _bound_judges():
            key = judge_key(model, taken)
            taken.add(key)
            judges[key] = model
        configs = {k: judge_config(str(m), temperature, max_tokens) for k, m in judges.items()}
        jobs = [(k, r) for k in judges for r in requests]
        got = await asyncio.gather(*(_verdict(judges[k], r, configs[k], max_reasks)
                                     for k, r in jobs))
        verdicts: dict[str, list[grading.Verdict]] = {k: [] for k in judges}
        for (k, _), v in zip(jobs, got, strict=True):
            verdicts[k].append(v)
        value = panel_value(conv, verdicts)
        rows = [asdict(CriterionVerdict(k, r.criterion_index, v.criteria_met, v.recovered,
                                        v.attempts))
                for (k, r), v in zip(jobs, got, strict=True)]
        panel = value[PANEL_KEY]
        return Score(
            value=value, answer=reply,
            explanation=("unscored: a judge has no verdict for some criterion"
                         if math.isnan(panel) else f"panel score {panel:.4f}"),
            metadata={"judges": {k: str(m) for k, m in judges.items()}, "verdicts": rows},
        )

    return score


@task
def healthbench_psych(
    subset: str = "v1",
    judges: str | list[str] | None = None,
    judge_temperature: float = study.STUDY_TEMPERATURE,
    judge_max_tokens: int = grading.MAX_TOKENS,
    max_reasks: int = grading.DEFAULT_MAX_REASKS,
    bootstrap_samples: int = study.N_RESAMPLES,
    seed: int = study.SEED,
    ci_level: float = study.CI_LEVEL,
    corpus_file: str | None = None,
) -> Task:
    """HealthBench-Psych ``subset`` (v1, v2, hard or a subset JSON), graded by ``judges`` (the
    ``judges`` model role wins; default: the study's panel). See the module docstring."""
    chosen = subset_samples(subset, corpus_file)
    names = judge_names(judges)
    return Task(
        dataset=MemoryDataset([to_sample(c) for c in chosen.conversations],
                              name=chosen.name),
        solver=generate(),
        scorer=psych_panel_scorer(
            {c.prompt_id: c for c in chosen.conversations}, grading.load_template(),
            temperature=judge_temperature, max_tokens=judge_max_tokens, max_reasks=max_reasks),
        metrics=[psych_panel_metrics(n_resamples=bootstrap_samples, seed=seed,
                                     level=ci_level)],
        model_roles={JUDGES_ROLE: names} if names else None,
        metadata=chosen.metadata(),
    )
