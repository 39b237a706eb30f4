"""API keys are never written or printed: the variables that hold them, and the one scrubber.

Keys are read from the environment only. A server may still send a key back: a proxy or an
OpenAI-compatible server that answers 401 with the key it was given (the real OpenAI API masks
it). So text that can carry what a server said is scrubbed of every key set in this environment,
by value, before the project writes or prints it: provider errors where they enter the engine
(and the store rows made from them), every file written through :mod:`core.writes` (failure
records, manifests, tables), executed notebooks and the runner's terminal lines.
"""

from __future__ import annotations

import os
from collections.abc import Callable

SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "MOONSHOT_API_KEY",
    "MISTRAL_API_KEY",
    "DASHSCOPE_API_KEY",
    "HBPSYCH_API_KEY",
)
"""The variables that hold API keys: every ``api_key_env`` of ``params/models.yaml`` (a test
keeps them in step), Inspect's name for the Gemini key and the simulator's. Any other variable
named ``*_API_KEY`` counts too: a registry file of one's own may name one."""

MIN_LENGTH = 8
"""A shorter value is not a key (and scrubbing it would mangle ordinary words)."""

MIN_FRAGMENT = 4
"""A key cut short at the end of a message (messages are cut to a length) is scrubbed from this
many characters on."""


def secrets() -> dict[str, str]:
    """Each key set in this environment, by its variable's name."""
    return {name: value for name, value in os.environ.items()
            if (name in SECRET_ENV_VARS or name.endswith("_API_KEY"))
            and len(value) >= MIN_LENGTH}


def scrubber(*, cut: bool = False) -> Callable[[str], str]:
    """:func:`scrub` for the keys set now (read once, for scrubbing many texts)."""
    found = sorted(secrets().items(), key=lambda kv: -len(kv[1]))
    if not found:
        return lambda text: text

    def clean(text: str) -> str:
        for name, value in found:
            if value in text:
                text = text.replace(value, f"[{name} removed]")
        tail = text[-MIN_FRAGMENT:]
        for name, value in found if cut and len(tail) == MIN_FRAGMENT else ():
            if tail in value:
                for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                    if text.endswith(value[:n]):
                        return f"{text[:-n]}[{name} removed]"
        return text

    return clean


def scrub(text: str, *, cut: bool = False) -> str:
    """``text`` with every API key set in this environment replaced by ``[NAME removed]``;
    with ``cut`` (an error message, which may have been cut to a length through a key), a
    key's first characters at its very end too."""
    return scrubber(cut=cut)(text)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters for a message, scrubbed as cut: a key that the cut
    goes through is removed from its first characters on, wherever the clipped text is then
    embedded (a scrub of the whole message looks for a cut key only at its very end)."""
    return scrub(text[:limit], cut=len(text) > limit)
