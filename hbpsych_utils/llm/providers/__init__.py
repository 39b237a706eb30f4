"""Provider adapters, one per API family (see :mod:`.base` for the contract).

The one registry of adapters: :func:`adapter_class` maps a provider kind to its adapter class
and imports that adapter's SDK on first use, so importing the engine imports no SDK and a run
that only calls OpenAI never loads ``anthropic`` or ``google.genai``. The engine uses it both
for the static side of a request (wire body, API name in the key) and to build clients
(:func:`make_adapter`).
"""

from __future__ import annotations

from functools import cache

from hbpsych_utils.llm.models import ProviderKind, ProviderSpec
from hbpsych_utils.llm.providers.base import Adapter, CallError, Reply

OPENAI_WIRE_KINDS = ("openai", "openai_compatible")
"""Provider kinds whose wire body is an OpenAI Chat Completions request: a Batch line as it is,
for OpenAI's Batch API, ``vllm run-batch`` and any OpenAI-compatible server."""


@cache
def adapter_class(kind: ProviderKind) -> type[Adapter]:
    """The adapter class for a provider kind; its SDK is imported here, on first use."""
    if kind in ("openai", "openai_compatible"):
        from hbpsych_utils.llm.providers.openai_chat import OpenAIAdapter

        return OpenAIAdapter
    if kind == "anthropic":
        from hbpsych_utils.llm.providers.anthropic_messages import AnthropicAdapter

        return AnthropicAdapter
    if kind == "google":
        from hbpsych_utils.llm.providers.google_genai import GoogleAdapter

        return GoogleAdapter
    raise ValueError(f"unknown provider kind {kind!r}")


def make_adapter(provider: ProviderSpec, api_key: str, base_url: str | None,
                 timeout: float) -> Adapter:
    """A connected adapter (SDK client) for one provider."""
    return adapter_class(provider.kind)(provider, api_key, base_url, timeout)


__all__ = ["OPENAI_WIRE_KINDS", "Adapter", "CallError", "Reply", "adapter_class",
           "make_adapter"]
