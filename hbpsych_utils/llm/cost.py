"""Prices, the pre-run plan and the spending cap.

Prices come from the registry (USD per million tokens, estimates). Before anything runs,
:class:`Plan` says how many calls will be made, how many are already in the store, the
estimated tokens (about 4 characters per token for the prompt; the expected reply length per
call for the output) and the estimated cost. :class:`Budget` enforces ``max_cost`` during a
run: no new call starts once actual spend plus the estimate of the calls in flight reaches the
cap, and the run says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hbpsych_utils.core.wording import count
from hbpsych_utils.llm.models import Price

CHARS_PER_TOKEN = 4
DEFAULT_EXPECTED_OUTPUT = 400
"""Expected reply length (tokens) for estimates when a request's cap is larger."""


def estimate_input_tokens(chars: int) -> int:
    return max(1, (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def estimate_output_tokens(max_tokens: int | None) -> int:
    if max_tokens is None:
        return DEFAULT_EXPECTED_OUTPUT
    return min(int(max_tokens), DEFAULT_EXPECTED_OUTPUT)


def call_cost(price: Price, input_tokens: float, output_tokens: float, batch: bool = False,
              cache_read_tokens: float = 0, cache_write_tokens: float = 0) -> float:
    """USD for one call; batch calls are charged ``batch_discount`` of the sync price (token
    counts may be expected ones, fractional: ``evaluation.cost_plan``).

    ``input_tokens`` is every prompt token as the provider counts them (OpenAI's and Gemini's
    prompt counts include cached tokens; the Anthropic adapter adds cache reads and writes to
    its ``input_tokens``). Of those, ``cache_read_tokens`` cost ``cache_read`` of the input
    price and ``cache_write_tokens`` ``cache_write`` of it (None: the input price). The batch
    discount applies to the uncached input and the output, and to the cached and cache-write
    tokens only where the provider stacks it (``batch_cache_stacks``).
    """
    cached = cache_read_tokens + cache_write_tokens
    if cache_read_tokens < 0 or cache_write_tokens < 0 or cached > input_tokens:
        raise ValueError(f"cache tokens (read {cache_read_tokens}, write {cache_write_tokens}) "
                         f"must be >= 0 and within the {input_tokens} prompt tokens")
    discount = price.batch_discount if batch else 1.0
    usd = ((input_tokens - cached) * price.input + output_tokens * price.output) / 1_000_000
    usd *= discount
    if cached:
        read = 1.0 if price.cache_read is None else price.cache_read
        write = 1.0 if price.cache_write is None else price.cache_write
        cache = (cache_read_tokens * read + cache_write_tokens * write) * price.input / 1_000_000
        usd += cache * (discount if price.batch_cache_stacks else 1.0)
    return usd


@dataclass
class Plan:
    """What a run will do, computed before the first call."""

    requests: int = 0
    unique: int = 0
    """Distinct requests: the same question asked twice is paid once."""
    cached: int = 0
    calls: int = 0
    est_input_tokens: int = 0
    est_output_tokens: int = 0
    est_cost: float = 0.0
    mode: str = "sync"
    by_model: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, model: str, provider: str, in_tok: int, out_tok: int, cost: float) -> None:
        row = self.by_model.setdefault(model, {"provider": provider, "calls": 0,
                                               "est_input_tokens": 0, "est_output_tokens": 0,
                                               "est_cost": 0.0})
        row["calls"] += 1
        row["est_input_tokens"] += in_tok
        row["est_output_tokens"] += out_tok
        row["est_cost"] += cost
        self.calls += 1
        self.est_input_tokens += in_tok
        self.est_output_tokens += out_tok
        self.est_cost += cost

    def as_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "unique": self.unique, "cached": self.cached,
                "calls": self.calls, "est_input_tokens": self.est_input_tokens,
                "est_output_tokens": self.est_output_tokens,
                "est_cost": round(self.est_cost, 4), "mode": self.mode,
                "by_model": {k: {**v, "est_cost": round(v["est_cost"], 4)}
                             for k, v in self.by_model.items()}}

    def __str__(self) -> str:
        lines = [f"{count(self.requests, 'request')} ({self.unique:,} unique): {self.cached:,} in "
                 f"the store, {count(self.calls, 'call')} to make ({self.mode}); est. "
                 f"{self.est_input_tokens:,} in + "
                 f"{self.est_output_tokens:,} out tokens, est. ${self.est_cost:,.2f} "
                 "(prices are estimates)"]
        for model, row in sorted(self.by_model.items()):
            calls = count(row["calls"], "call")
            lines.append(f"  {model:<28} {calls:>14}  ${row['est_cost']:>10,.2f}")
        return "\n".join(lines)


class BudgetExceeded(RuntimeError):
    """Raised only by callers that want an exception; the engine itself returns not_run rows."""


class Budget:
    """Actual spend of this run against ``max_cost`` (None: no cap)."""

    def __init__(self, max_cost: float | None) -> None:
        self.max_cost = max_cost
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped = False

    def try_start(self, est_cost: float) -> bool:
        """Reserve the estimate of one call; False once the cap is reached (then sticky)."""
        if self.max_cost is None:
            self.reserved += est_cost
            return True
        if self.stopped or self.spent + self.reserved >= self.max_cost:
            self.stopped = True
            return False
        self.reserved += est_cost
        return True

    def try_reserve(self, est_cost: float) -> bool:
        """Reserve a whole batch chunk: only if it fits under the cap with what is spent."""
        if self.max_cost is None:
            self.reserved += est_cost
            return True
        if self.stopped or self.spent + self.reserved + est_cost > self.max_cost:
            self.stopped = True
            return False
        self.reserved += est_cost
        return True

    def finish(self, est_cost: float, actual: float) -> None:
        self.reserved = max(0.0, self.reserved - est_cost)
        self.spent += actual

    def message(self) -> str:
        return (f"max_cost ${self.max_cost:,.4f} reached: spent ${self.spent:,.4f} this run; "
                "no new calls were started")
