"""The planned cost of a run: its calls counted from the conversations, priced under a routing.

A run's cost is calls × tokens × prices. The calls follow from the design (conversations ×
candidates for generation; conversations × candidates × rubric criteria × judges for grading).
The tokens are counted from the texts the calls will carry, the way the engine estimates them
before it sends anything: about 4 characters per token over every message's content
(``llm.cost.estimate_input_tokens``; the providers' own tokenizers are not used, so that the
plan needs no download and no optional package). A candidate's prompt is the conversation; a
judge's prompt is the system message and the grader template filled with the conversation, the
reply and one rubric item (``grading.render_grader_prompt``). Prices are the registry's
(``llm.cost.call_cost``), under a :class:`Routing`: which phases go through the providers'
batch APIs (where the provider has one) and whether the grader's shared prefix is cached.

The prefix a conversation's criteria share is everything before the rubric item: the system
message, the template's opening, the conversation and the reply. The template's instructions
come *after* the rubric item, so every judge call pays for them in full, cache or no cache; and
a prefix shorter than a model's ``cache_min_tokens`` is never cached.

What cannot be counted is assumed, and each assumption is a named value here:

- the reply a candidate writes (the study's replies are not released): as long as the
  conversation's HealthBench reference completions (model replies published with the
  conversation), else its ideal completion (physician-written), else the mean of the others;
  the same for every candidate unless a per-candidate scale is given
  (:func:`.cost_report.ledger_reply_scale` derives one from the study's generation ledger);
- a judge's reply: :data:`JUDGE_OUTPUT_TOKENS`;
- the share of a prefix group's later calls that find the prefix cached: :data:`CACHE_HIT_RATE`,
  per provider API and path (sync or batch);
- cached lengths follow the provider's granularity (:data:`CACHE_GRANULARITY`).

Totals measured on the conversations at hand are scaled to the design's size (72 of the 610
HealthBench-Psych v1 conversations are in the offline corpus): every sum is multiplied by
``n_conversations / len(conversations)``, so per-conversation means carry over.

A full re-run of the study planned beside what the study spent is :mod:`.cost_report`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hbpsych_utils import study
from hbpsych_utils.construction.corpus import Conversation
from hbpsych_utils.evaluation import grading
from hbpsych_utils.llm.cost import call_cost, estimate_input_tokens
from hbpsych_utils.llm.models import ConfigError, ModelSpec, ProviderSpec, Registry

JUDGE_OUTPUT_TOKENS = 80
"""Tokens a judge writes per criterion: the template asks for a JSON object with a one- or
two-sentence ``explanation`` (about 50 words, 65 tokens) and ``criteria_met``, in a markdown
fence (about 15 tokens). An assumption: the study's verdict texts are not released."""

CACHE_HIT_RATE: Mapping[tuple[str, bool], float] = {
    ("openai", False): 0.9, ("openai", True): 0.5,
    ("anthropic", False): 1.0, ("anthropic", True): 0.5,
    ("google", False): 0.9, ("google", True): 0.5,
}
"""(provider API kind, batch?) -> share of a prefix group's calls after the first that read the
cache (assumptions). Sync: the engine sends a group's first call alone and the others once it
has returned, with OpenAI's ``prompt_cache_key`` routing hint; Anthropic's breakpoint is
explicit (a hit unless the 5-minute cache expired), OpenAI's and Gemini's implicit caches are
best effort. Batch: the provider runs a batch's requests in any order, so a hit needs an
earlier request of the same group to have finished first (Anthropic documents 30–98 % hit rates
for batches); half is assumed. APIs not listed never hit."""

CACHE_GRANULARITY: Mapping[str, int] = {"openai": 128}
"""Provider API kind -> step in which an implicit cache counts cached tokens above the
minimum (OpenAI: 1,024 tokens, then increments of 128). Kinds not listed cache the whole
prefix."""

PHASES = ("generation", "grading")


class PlanError(ValueError):
    """A design that cannot be planned (no conversations, an unknown model, a bad value)."""


# --------------------------------------------------------------------------------------------
# Counting


def tokens(chars: int | float) -> int:
    """Tokens of a text of ``chars`` characters, as the engine estimates them."""
    return estimate_input_tokens(int(chars))


@dataclass(frozen=True)
class ConversationTokens:
    """What one conversation puts into a run's calls, in characters (counted from its text)."""

    prompt_id: str
    prompt_chars: int
    """A candidate's request: the conversation's messages (no system message)."""
    prefix_chars: int
    """A judge's request up to the rubric item, with an empty reply: the system message, the
    template's opening and the rendered conversation."""
    criterion_chars: tuple[int, ...]
    """Each criterion's whole judge request (system + filled template), with an empty reply."""
    reply_chars: int
    """The reply assumed for this conversation (characters)."""
    reply_source: str
    """Where ``reply_chars`` comes from: ``reference``, ``ideal`` or ``mean``."""

    @property
    def n_criteria(self) -> int:
        return len(self.criterion_chars)


def reference_reply_chars(conversation: Conversation) -> tuple[int, str] | None:
    """The reply length HealthBench itself shows for a conversation: the mean length of its
    reference completions (model replies), else of its ideal completion; ``None`` if neither."""
    data = conversation.ideal_completions_data or {}
    refs = [r for r in data.get("ideal_completions_ref_completions") or []
            if isinstance(r, str) and r]
    if refs:
        return round(statistics.fmean(len(r) for r in refs)), "reference"
    ideal = data.get("ideal_completion")
    if isinstance(ideal, str) and ideal:
        return len(ideal), "ideal"
    return None


def measure(conversations: Iterable[Conversation], template: str,
            system: str = grading.SYSTEM_MESSAGE) -> list[ConversationTokens]:
    """Count what each conversation puts into a run's calls (see :class:`ConversationTokens`);
    a conversation with no reference or ideal completion gets the mean reply of the others."""
    convs = list(conversations)
    if not convs:
        raise PlanError("no conversations to measure (a plan needs at least one)")
    replies = {c.prompt_id: reference_reply_chars(c) for c in convs}
    known = [r[0] for r in replies.values() if r is not None]
    mean_reply = round(statistics.fmean(known)) if known else 0
    out = []
    for c in convs:
        reply = replies[c.prompt_id] or (mean_reply, "mean")
        out.append(ConversationTokens(
            prompt_id=c.prompt_id,
            prompt_chars=sum(len(m.content) for m in c.prompt),
            prefix_chars=len(system) + grading.shared_prefix_chars(template, c.prompt, ""),
            criterion_chars=tuple(
                len(system) + len(grading.render_grader_prompt(template, c.prompt, "", item))
                for item in c.rubrics),
            reply_chars=reply[0],
            reply_source=reply[1],
        ))
    return out


# --------------------------------------------------------------------------------------------
# Design and routing


@dataclass(frozen=True)
class Design:
    """What a run does: its conversations (measured), how many it stands for, its models."""

    conversations: tuple[ConversationTokens, ...]
    n_conversations: int
    """How many conversations the plan is for; sums over ``conversations`` are scaled to it."""
    candidates: tuple[str, ...]
    judges: tuple[str, ...]
    judge_output_tokens: int = JUDGE_OUTPUT_TOKENS
    reply_scale: Mapping[str, float] = field(default_factory=dict)
    """Candidate -> factor on every assumed reply length (1 when absent)."""
    samples: int = 1
    """Replies per (candidate, conversation) (``generation.samples``): generation and grading
    are made that many times."""

    def __post_init__(self) -> None:
        if not self.conversations:
            raise PlanError("Design.conversations is empty (a plan needs measured conversations)")
        if self.n_conversations < 1:
            raise PlanError(f"Design.n_conversations must be >= 1, got {self.n_conversations}")
        if self.samples < 1:
            raise PlanError(f"Design.samples must be >= 1, got {self.samples}")
        if self.judge_output_tokens < 0:
            raise PlanError("Design.judge_output_tokens must be >= 0, got "
                            f"{self.judge_output_tokens}")
        bad = {c: s for c, s in self.reply_scale.items() if not s >= 0}
        if bad:
            raise PlanError(f"Design.reply_scale: factors must be >= 0, got {bad}")

    @property
    def scale(self) -> float:
        """Each measured sum's factor: ``n_conversations`` / conversations measured, times the
        replies per conversation (``samples``)."""
        return self.n_conversations / len(self.conversations) * self.samples

    def reply_chars(self, candidate: str, conv: ConversationTokens) -> float:
        return conv.reply_chars * self.reply_scale.get(candidate, 1.0)

    def prefix_tokens(self) -> list[int]:
        """Each measured conversation's shared grader prefix (tokens) with its assumed reply
        (before any per-candidate scale)."""
        return [tokens(c.prefix_chars + c.reply_chars) for c in self.conversations]

    def unshared_tokens(self) -> list[int]:
        """Each measured criterion's tokens after the shared prefix (its rubric item and the
        template's instructions): paid in full by every judge call, cache or none."""
        return [tokens(n - c.prefix_chars) for c in self.conversations
                for n in c.criterion_chars]

    def mean_reply_tokens(self) -> float:
        """The assumed reply length in tokens (before any per-candidate scale), over the
        measured conversations."""
        return statistics.fmean(tokens(c.reply_chars) for c in self.conversations)


@dataclass(frozen=True)
class Routing:
    """How a run sends its calls: which phases use batch APIs, and prompt caching."""

    name: str
    generation_batch: bool
    grading_batch: bool
    prompt_caching: bool


AS_STUDY_RAN = Routing("as the study ran it", generation_batch=False, grading_batch=True,
                       prompt_caching=False)
"""The study: judges on the providers' batch APIs, candidates sync, no caching (METHODS 6-7)."""
OPTIMISED = Routing("optimised", generation_batch=True, grading_batch=True, prompt_caching=True)
"""Everything the engine can do: batch wherever a provider has a batch API, candidates
included, and the grader's shared prefix cached at the registry's cached-token prices."""


def configured(mode: str, prompt_caching: bool) -> Routing:
    """The routing a profile asks for: ``llm.mode`` for both phases (the engine's one mode),
    ``llm.prompt_caching`` for grading."""
    if mode not in ("sync", "batch"):
        raise PlanError(f"llm.mode must be 'sync' or 'batch', got {mode!r}")
    return Routing("as configured", generation_batch=mode == "batch",
                   grading_batch=mode == "batch", prompt_caching=prompt_caching)


# --------------------------------------------------------------------------------------------
# Caching


def cached_length(prefix_tokens: int, spec: ModelSpec, kind: str) -> int:
    """Tokens of a shared prefix a provider can serve from its cache: 0 below the model's
    minimum (or when it has none); above it the whole prefix, or for an implicit cache with a
    granularity (OpenAI) the minimum plus whole steps."""
    if not spec.caches_prefix(prefix_tokens) or spec.cache_min_tokens is None:
        return 0
    step = CACHE_GRANULARITY.get(kind) if spec.cache_mode == "implicit" else None
    if not step:
        return prefix_tokens
    minimum = spec.cache_min_tokens
    return minimum + step * ((prefix_tokens - minimum) // step)


def group_cache_tokens(prefix_tokens: int, n_calls: int, spec: ModelSpec, kind: str,
                       hit_rate: float) -> tuple[float, float]:
    """Expected (cache-read, cache-write) tokens of one group of ``n_calls`` calls sharing a
    prefix. The first call finds nothing cached; each later one reads the cached prefix with
    probability ``hit_rate``. With a breakpoint (Anthropic) the first call writes the prefix,
    and so does every later call that misses; implicit caches bill no write."""
    cached = cached_length(prefix_tokens, spec, kind)
    if cached == 0 or n_calls < 1:
        return 0.0, 0.0
    later = n_calls - 1
    reads = later * hit_rate * cached
    writes = cached * (1 + later * (1 - hit_rate)) if spec.cache_mode == "breakpoint" else 0.0
    return reads, writes


def caching_ceiling(registry: Registry, models: Iterable[str]) -> Registry:
    """``registry`` with the prompt cache of ``models`` made as generous as any provider could
    be: a prefix of any length is cached whole (minimum 1 token, no granularity), writing it
    costs no premium, and the batch discount stacks with the cache price. Planned with every
    later call a hit, this bounds what caching can save on the reference grader prompt, whose
    rubric item and instructions follow the shared prefix and are never cached. The models'
    cache-read prices are kept."""
    models = set(models)
    relaxed = {}
    for name, spec in registry.models.items():
        if name in models:
            price = spec.price.model_copy(update={"cache_write": None,
                                                  "batch_cache_stacks": True})
            spec = spec.model_copy(update={"cache_mode": "breakpoint", "cache_min_tokens": 1,
                                           "price": price})
        relaxed[name] = spec
    return Registry(registry.providers, relaxed, source=f"{registry.source} (caching ceiling)")


# --------------------------------------------------------------------------------------------
# The plan


@dataclass(frozen=True)
class PlanRow:
    """One model's share of a phase under one routing (sums scaled to the design's size)."""

    phase: str
    model: str
    provider: str
    batch: bool
    calls: float
    input_tokens: float
    """Every prompt token, cached ones included."""
    cache_read_tokens: float
    cache_write_tokens: float
    output_tokens: float
    usd: float
    groups: int = 0
    """Grading: measured (candidate, conversation) groups; generation: 0."""
    groups_cached: int = 0
    """Grading: measured groups whose shared prefix reaches the model's cache minimum (when
    caching is on)."""


def model_spec(registry: Registry, model: str, role: str) -> tuple[ModelSpec, ProviderSpec]:
    """A model's spec and its provider's; an unknown model is a :class:`PlanError` naming
    ``role`` (candidate, judge, ...)."""
    try:
        return registry.model(model), registry.provider_of(model)
    except ConfigError as exc:
        raise PlanError(f"{role} {model!r}: {exc}") from None


def _row(phase: str, model: str, spec: ModelSpec, provider: ProviderSpec, batch: bool,
         scale: float, calls: float, inp: float, reads: float, writes: float, out: float,
         groups: int = 0, groups_cached: int = 0) -> PlanRow:
    inp, reads, writes, out = inp * scale, reads * scale, writes * scale, out * scale
    usd = call_cost(spec.price, inp, out, batch=batch, cache_read_tokens=reads,
                    cache_write_tokens=writes)
    return PlanRow(phase, model, provider.name, batch, calls * scale, inp, reads, writes, out,
                   usd, groups, groups_cached)


def plan(design: Design, registry: Registry, routing: Routing,
         hit_rates: Mapping[tuple[str, bool], float] = CACHE_HIT_RATE) -> list[PlanRow]:
    """One row per (phase, model): calls, tokens and USD of the design under ``routing``."""
    convs = design.conversations
    rows = []
    for cand in design.candidates:
        spec, prov = model_spec(registry, cand, "candidate")
        out = sum(tokens(design.reply_chars(cand, c)) for c in convs)
        rows.append(_row("generation", cand, spec, prov, routing.generation_batch and prov.batch,
                         design.scale, len(convs), sum(tokens(c.prompt_chars) for c in convs),
                         0.0, 0.0, out))
    for judge in design.judges:
        spec, prov = model_spec(registry, judge, "judge")
        batch = routing.grading_batch and prov.batch
        hit = hit_rates.get((prov.kind, batch), 0.0)
        calls = inp = reads = writes = 0.0
        groups = cached = 0
        for cand in design.candidates:
            for c in convs:
                reply = design.reply_chars(cand, c)
                calls += c.n_criteria
                inp += sum(tokens(n + reply) for n in c.criterion_chars)
                groups += 1
                if routing.prompt_caching and c.n_criteria:
                    prefix = tokens(c.prefix_chars + reply)
                    r, w = group_cache_tokens(prefix, c.n_criteria, spec, prov.kind, hit)
                    reads, writes = reads + r, writes + w
                    cached += cached_length(prefix, spec, prov.kind) > 0
        rows.append(_row("grading", judge, spec, prov, batch, design.scale, calls, inp, reads,
                         writes, calls * design.judge_output_tokens, groups, cached))
    return rows


def total_usd(rows: Iterable[PlanRow], phase: str | None = None) -> float:
    return sum(r.usd for r in rows if phase is None or r.phase == phase)


def compare(design: Design, registry: Registry, routings: Sequence[Routing],
            hit_rates: Mapping[tuple[str, bool], float] = CACHE_HIT_RATE) -> pd.DataFrame:
    """The design's plan under each routing, side by side: one row per (phase, model) with
    calls and tokens (those of the last routing, which is where caching shows) and one
    ``<routing> usd`` column per routing, then a total row per phase and an overall total
    (sums of the unrounded values; counts rounded to whole numbers, dollars to 4 places)."""
    plans = {r.name: plan(design, registry, r, hit_rates) for r in routings}
    counts = ["calls", "input_tokens", "cache_read_tokens", "output_tokens"]
    records = []
    for i, row in enumerate(plans[routings[-1].name]):
        rec: dict[str, object] = {"phase": row.phase, "model": row.model,
                                  "provider": row.provider}
        rec.update({c: getattr(row, c) for c in counts})
        rec.update({f"{name} usd": rows[i].usd for name, rows in plans.items()})
        records.append(rec)
    df = pd.DataFrame(records)
    if df.empty:
        return df
    totals = []
    for phase in (*PHASES, None):
        sel = df if phase is None else df[df["phase"] == phase]
        if not sel.empty:
            totals.append({"phase": phase or "all", "model": "total", "provider": "",
                           **sel.select_dtypes("number").sum().to_dict()})
    out = pd.concat([df, pd.DataFrame(totals)], ignore_index=True)
    out[counts] = out[counts].round().astype("int64")
    return out.round(4)


# --------------------------------------------------------------------------------------------
# The study's design

def study_design(subset: str = "v1", *, candidates: Sequence[str] = study.CANDIDATES,
                 judges: Sequence[str],
                 fetch: Callable[[str], Path] | None = None,
                 held: Sequence[Conversation] | None = None) -> Design:
    """The study's design on a released subset: its candidates and judge panel on every
    conversation of the subset, measured on those the corpus holds (``held``: a run's corpus;
    by default the registry's, verified as a profile's corpus is, ``corpus.load_for_profile``:
    72 of v1's 610 offline) and scaled to the subset's size. ``fetch`` is ``sources.fetch`` or
    a stage's recording version of it."""
    from hbpsych_utils.construction import corpus
    from hbpsych_utils.construction import subset as subsets
    from hbpsych_utils.core import sources

    fetch = fetch or sources.fetch
    ids = subsets.load_subset(fetch(study.SUBSET_ARTIFACTS[subset]))["prompt_ids"]
    if held is None:
        held = corpus.load_for_profile(allow_partial=True, fetch=fetch).conversations
    by_id = {c.prompt_id: c for c in held}
    convs = [by_id[i] for i in ids if i in by_id]
    if not convs:
        raise PlanError(f"none of the {len(ids)} conversations of subset {subset!r} is in the "
                        "corpus: nothing to measure")
    template = grading.load_template(fetch(grading.TEMPLATE_ARTIFACT))
    return Design(conversations=tuple(measure(convs, template)), n_conversations=len(ids),
                  candidates=tuple(candidates), judges=tuple(judges))
