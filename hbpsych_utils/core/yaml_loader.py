"""Every YAML file the package reads (profiles, the model registry, the artifact registry) goes
through here: safe loading, UTF-8 only, and duplicate keys rejected.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, so a profile with a
second ``corpus:`` section silently loses the first one's settings. :class:`StrictLoader`
refuses that, naming the file, the key and the lines of both occurrences. YAML merge keys
(``<<: *defaults``) still work: a key written beside a merge overrides the merged one, as YAML
says.

A text is parsed once per process: the same text from the same source gives a copy of the
document parsed the first time (PyYAML's pure-Python parser takes 25 ms for the model registry,
which a profile check, the engine, the cost plan and the book each read again).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode

from hbpsych_utils.core.records import read_text

MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLFileError(ValueError):
    """A YAML file (or text) that cannot be read: not UTF-8, not YAML, or a key written twice.
    The message names the file and the line."""


class DuplicateKeyError(YAMLFileError):
    """The same key twice in one mapping; names the file, the key and both lines."""

    def __init__(self, source: str, key: object, first_line: int, line: int) -> None:
        self.source, self.key, self.first_line, self.line = source, key, first_line, line
        super().__init__(
            f"{source}:{line}: key {key!r} appears twice in the same mapping (lines "
            f"{first_line} and {line}); remove or merge one of them"
        )


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose mappings reject a key that appears twice."""

    source = "<string>"

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it below
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise DuplicateKeyError(self.source, key, first, line)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


PARSED_KEPT = 64
"""Documents kept parsed (the least recently read dropped first)."""


def load_text(text: str, source: str = "<string>") -> Any:
    """The YAML document in ``text``; ``source`` (a file name, ``--set key=value``) heads any
    error. Each call returns its own copy (the caller may change it); a text that does not
    parse is parsed again, and raises again, each time (``lru_cache`` keeps no exception)."""
    return copy.deepcopy(_parse(text, source))  # aliases (``*anchor``) stay shared, as parsed


@functools.lru_cache(maxsize=PARSED_KEPT)
def _parse(text: str, source: str) -> Any:
    loader = StrictLoader(text)
    loader.source = loader.name = source  # ``name`` is what PyYAML's own messages cite
    try:
        return loader.get_single_data()
    except DuplicateKeyError:
        raise
    except yaml.YAMLError as exc:
        raise YAMLFileError(f"{source}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def load_file(path: Path | str) -> Any:
    """The YAML document of the file at ``path`` (UTF-8). ``FileNotFoundError`` passes through
    for the caller to word; everything else is a :class:`YAMLFileError` naming file and line."""
    path = Path(path)
    return load_text(read_text(path, error=YAMLFileError), str(path))
