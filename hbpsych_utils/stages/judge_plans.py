"""What a chapter's judge calls will cost, shown before anything is sent (chapters 15 and 16).

Both grade filled grader prompts with the run's judges outside 07; the plan is the engine's
token estimate of the prompts, the cost plan's assumed verdict length and the registry's prices
(``judge_accuracy.cost_rows``), through the batch APIs when ``llm.mode`` is batch. A chapter
says in its own words which calls it counts and what the plan leaves out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from hbpsych_utils.core.config import LLMSettings
from hbpsych_utils.evaluation import cost_plan as plans
from hbpsych_utils.evaluation import judge_accuracy as ja
from hbpsych_utils.reporting.vocabulary import Table, Tables


@dataclass(frozen=True)
class JudgePlan:
    """Calls, tokens and USD per judge, before anything is sent."""

    table: pd.DataFrame
    batch: bool
    mean_input_tokens: float
    calls: str
    """Which calls are counted ("one call per row and judge")."""
    not_counted: str
    """What the plan leaves out ("re-asks and answers already in the store")."""

    @property
    def total_usd(self) -> float:
        return float(self.table["usd"].sum())

    def view(self) -> Tables:
        route = "through the batch APIs" if self.batch else "synchronously"
        note = (f"Planned before anything is sent: {self.calls}, {route}, about "
                f"{self.mean_input_tokens:,.0f} prompt tokens per call (4 characters a token) "
                f"and {plans.JUDGE_OUTPUT_TOKENS} written, at the model registry's prices: "
                f"${self.total_usd:,.4f} in all ({self.not_counted} not counted; llm.max_cost "
                "caps what a stage may spend).")
        return Tables([Table(self.table.set_index("judge"), caption="Cost plan")], note=note)


def judge_plan(prompt_chars: Sequence[int], n_calls: int, judges: Sequence[str], *,
               llm: LLMSettings, calls: str, not_counted: str) -> JudgePlan:
    """The plan of ``n_calls`` calls per judge whose prompts are about as long as
    ``prompt_chars`` (characters of each filled grader prompt), at the prices of the registry
    ``llm`` names."""
    from hbpsych_utils.llm.models import profile_registry

    mean_tokens = sum(plans.tokens(c) for c in prompt_chars) / max(len(prompt_chars), 1)
    batch = llm.mode == "batch"
    table = ja.cost_rows(n_calls, mean_tokens, judges, profile_registry(llm.registry_file),
                         batch=batch, output_tokens=plans.JUDGE_OUTPUT_TOKENS)
    return JudgePlan(table, batch, mean_tokens, calls, not_counted)
