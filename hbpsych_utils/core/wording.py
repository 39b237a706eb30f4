"""How numbers are said in prose: a count with its noun, in the singular or the plural.

Chapters and messages say "1 item" and "3 items", never "3 item(s)"."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None, *, thousands: bool = True) -> str:
    """``n`` and its noun: ``count(1, "reply", "replies")`` is "1 reply", ``count(2, "judge")``
    "2 judges" (the plural is the noun plus "s" unless given)."""
    word = noun if n == 1 else (plural or f"{noun}s")
    return f"{n:,} {word}" if thousands else f"{n} {word}"


def were(n: int) -> str:
    """The verb that agrees with a count: "was" for one, "were" otherwise."""
    return "was" if n == 1 else "were"
