"""Provider adapters, one per API family (see :mod:`.base` for the contract)."""

from __future__ import annotations

from hbpsych_utils.llm.models import ProviderSpec
from hbpsych_utils.llm.providers.base import Adapter, CallError, Reply


def make_adapter(provider: ProviderSpec, api_key: str, base_url: str | None,
                 timeout: float) -> Adapter:
    """The adapter for a provider kind; SDK imports happen here, on first use."""
    if provider.kind in ("openai", "openai_compatible"):
        from hbpsych_utils.llm.providers.openai_chat import OpenAIAdapter

        return OpenAIAdapter(provider, api_key, base_url, timeout)
    if provider.kind == "anthropic":
        from hbpsych_utils.llm.providers.anthropic_messages import AnthropicAdapter

        return AnthropicAdapter(provider, api_key, base_url, timeout)
    if provider.kind == "google":
        from hbpsych_utils.llm.providers.google_genai import GoogleAdapter

        return GoogleAdapter(provider, api_key, base_url, timeout)
    raise ValueError(f"unknown provider kind {provider.kind!r}")


__all__ = ["Adapter", "CallError", "Reply", "make_adapter"]
