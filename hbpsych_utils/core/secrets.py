"""API keys are never written or printed, and no data is edited to hide one.

Keys are read from the environment only. A server may still send a key back: a proxy or an
OpenAI-compatible server that answers 401 with the key it was given (the real OpenAI API masks
it), or a model reply that quotes it. So the text a server sent is scrubbed of every key set in
this environment, by value, where it enters: provider errors where they enter the engine, and
model replies when the store writes them (the engine hands back the reply as stored, so the
store and every table made from it hold the same text; the store counts what it replaced).
Records the project composes — failure records, build records, manifests, executed notebooks,
the runner's terminal lines — are scrubbed again when written (:func:`core.writes.write_record`)
and say what they replaced. Data files (tables, responses, exports, copies of the corpus) are
never scrubbed: one that would hold a key is refused (:class:`KeyInData`), never edited.

Only a value shaped like a provider key counts (:func:`looks_like_key`). Local servers tell
their users to set a placeholder (``lm-studio``, ``not-needed``, ``EMPTY``); scrubbing such a
word would silently change every conversation that uses it, so a placeholder is left alone and
the run says so once (:func:`placeholder_notice`).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping

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

MIN_KEY_CHARS = 20
"""A key has at least this many ASCII letters and digits. Every provider's keys have 32 or more
(OpenAI ``sk-`` + 48 or ``sk-proj-`` + ~150, Anthropic ``sk-ant-api03-`` + 95, Google ``AIza`` +
35, DeepSeek and DashScope ``sk-`` + 32 hex, Mistral 32, xAI ``xai-`` + 80); the placeholders
local servers suggest have fewer (``sk-no-key-required``: 15)."""

MIN_BITS_PER_CHAR = 2.5
"""A key's letters and digits are random: their Shannon entropy, from the characters'
frequencies, is at least this many bits per character (``sk-`` and 32 random hex digits: 3.8 on
average, 2.9 the lowest of a million drawn; a repeated pattern such as ``ZZZZ…``, ``abab…`` or
``abcdabcd…``: 2 or less)."""

MIN_FRAGMENT = 4
"""A key cut short at the end of a message (messages are cut to a length) is scrubbed from this
many characters on."""


def is_key_variable(name: str) -> bool:
    """Whether the environment variable ``name`` holds an API key."""
    return name in SECRET_ENV_VARS or name.endswith("_API_KEY")


def _mixes_classes(run: str) -> bool:
    """Whether ``run`` holds characters of two of: lower-case letters, upper-case, digits."""
    return sum((any(c.islower() for c in run), any(c.isupper() for c in run),
                any(c.isdigit() for c in run))) >= 2


def _bits_per_char(chars: str) -> float:
    n = len(chars)
    return -sum(k / n * math.log2(k / n) for k in Counter(chars).values())


def looks_like_key(value: str) -> bool:
    """Whether ``value`` (leading and trailing white space aside) could be a provider's API key,
    rather than a placeholder word. It is one when all of these hold:

    - it holds no white space (a key is one token);
    - it has at least :data:`MIN_KEY_CHARS` ASCII letters and digits (separators such as ``-``
      and ``_`` aside);
    - one of its runs of ASCII letters and digits (between separators) mixes two classes of
      lower-case, upper-case and digits: a key is not made of words and numbers
      (``placeholder_api_key_123``, ``my-local-server-key-2024`` are not keys);
    - its letters and digits carry at least :data:`MIN_BITS_PER_CHAR` bits of entropy per
      character.

    A random key of any provider's shape passes (a test draws thousands of each; of 200,000
    drawn per shape, none failed). The one known miss: a hex key whose 32 digits hold no letter
    (one in three million) is taken for a placeholder, and the run's placeholder notice then
    names its variable. A word with digits run together (``mykey2024placeholder``) still
    counts as a key: it is then scrubbed, and counted."""
    value = value.strip()
    if not value or any(c.isspace() for c in value):
        return False
    runs = "".join(c if c.isascii() and c.isalnum() else " " for c in value).split()
    chars = "".join(runs)
    return (len(chars) >= MIN_KEY_CHARS and any(_mixes_classes(r) for r in runs)
            and _bits_per_char(chars) >= MIN_BITS_PER_CHAR)


def _key_values() -> dict[str, str]:
    """Each key variable set to something, by name, with its value stripped of white space at
    its ends (what a server sends back)."""
    return {name: value.strip() for name, value in os.environ.items()
            if is_key_variable(name) and value.strip()}


def secrets() -> dict[str, str]:
    """Each key set in this environment (shaped like a key: :func:`looks_like_key`), by its
    variable's name."""
    return {name: value for name, value in _key_values().items() if looks_like_key(value)}


def placeholders() -> list[str]:
    """The key variables set to a value that is not shaped like a key (a placeholder a local
    server accepts, or a mistake), sorted: nothing is scrubbed of them."""
    return sorted(name for name, value in _key_values().items() if not looks_like_key(value))


def placeholder_notice() -> str | None:
    """One line saying which key variables hold placeholders and that they are not scrubbed
    (their values are not shown), or ``None`` when there are none."""
    names = placeholders()
    if not names:
        return None
    which = ", ".join(names)
    verb = "holds a value" if len(names) == 1 else "hold values"
    return (f"note: {which} {verb} that looks like a placeholder, not a provider key (a key is a "
            f"long random string): not treated as a secret, so no text is scrubbed of it")


class Scrubber:
    """Replaces every key of ``keys`` (variable name -> value) by ``[NAME removed]``, longest
    first. Made once for many texts: the environment is read when it is made, not per text."""

    def __init__(self, keys: Mapping[str, str], *, cut: bool = False) -> None:
        self._keys = tuple(sorted(keys.items(), key=lambda kv: -len(kv[1])))
        self._cut = cut

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __call__(self, text: str) -> str:
        """``text`` without the keys; the same object when it holds none."""
        if not self._keys:
            return text
        return self._apply(text, None)

    def count(self, text: str) -> dict[str, int]:
        """How many occurrences of each key (a cut key at the end counts once) scrubbing
        ``text`` replaces, by variable name; empty when it replaces nothing."""
        counts: Counter[str] = Counter()
        if self._keys:
            self._apply(text, counts)
        return dict(counts)

    def _apply(self, text: str, counts: Counter[str] | None) -> str:
        for name, value in self._keys:
            if value in text:
                if counts is not None:
                    counts[name] += text.count(value)
                text = text.replace(value, f"[{name} removed]")
        tail = text[-MIN_FRAGMENT:]
        for name, value in self._keys if self._cut and len(tail) == MIN_FRAGMENT else ():
            if tail in value:
                for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                    if text.endswith(value[:n]):
                        if counts is not None:
                            counts[name] += 1
                        return f"{text[:-n]}[{name} removed]"
        return text


def scrubber(*, cut: bool = False) -> Scrubber:
    """A :class:`Scrubber` for the keys set now (read once, for scrubbing many texts)."""
    return Scrubber(secrets(), cut=cut)


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


def describe_counts(counts: Mapping[str, int]) -> str:
    """``the value of OPENAI_API_KEY 3 times`` (several variables joined by ``and``)."""
    return " and ".join(f"the value of {name} {n} time{'s' if n != 1 else ''}"
                        for name, n in sorted(counts.items()))


class KeyInData(ValueError):
    """A data file (a table, responses, an export, a copy of the corpus) would hold the value of
    an API key set in this environment. Data is never edited to hide a key and a key is never
    written, so the file is not written; the message names the file and the variables, never
    the value."""

    def __init__(self, path: object, counts: Mapping[str, int]) -> None:
        self.path, self.counts = path, dict(counts)
        names = ", ".join(sorted(counts))
        super().__init__(
            f"{path}: not written: its data holds {describe_counts(counts)} (the data itself "
            "holds it, the corpus or a file of yours, not a model's reply, which is scrubbed "
            "where it enters); data is never edited to hide a key and a key is never written. "
            f"A key found in data is no longer secret: revoke it, or unset {names}")
