"""A subset in the forms other tools take: its prompt ids, and its conversations as HealthBench.

``python -m hbpsych_utils ids --subset v1|v2|hard|PATH [--format lines|csv|json|inspect]``
prints the subset's prompt ids (``inspect``: the comma-separated value of Inspect's
``--sample-id``) and its content hash on stderr. ``python -m hbpsych_utils export --subset ...
--output FILE.jsonl`` writes the subset's conversations in HealthBench's own JSONL layout: the
lines of the verified corpus, byte for byte, in corpus order, so any HealthBench harness reads
them as it reads the original file. An offline machine has a partial corpus; the export says
how many of the subset's conversations it held.

The export is the corpus's data, so nothing scrubs it: with an API key variable set to a
placeholder word (``OPENAI_API_KEY=therapist``) it is byte for byte the export without it (the
command says once that the variable holds a placeholder). Should the conversations hold the
value of a real key set in the environment, the export is refused, naming the variable, and
nothing is written (:class:`~hbpsych_utils.core.secrets.KeyInData`): a key is never written, and
data is never edited to hide one.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from hbpsych_utils.construction import corpus
from hbpsych_utils.core import arguments, records, secrets, sources
from hbpsych_utils.core.writes import describe_os_error, write_text
from hbpsych_utils.reporting.interop_records import InteropError
from hbpsych_utils.reporting.interop_report import Subset, resolve_subset, subset_argument

FORMATS = ("lines", "csv", "json", "inspect")


def format_ids(ids: Sequence[str], fmt: str) -> str:
    """The ids as text in one of ``FORMATS`` (sorted as the subset file holds them)."""
    if fmt == "lines":
        return "".join(f"{i}\n" for i in ids)
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerows([["prompt_id"], *([i] for i in ids)])
        return buf.getvalue()
    if fmt == "json":
        return json.dumps(list(ids)) + "\n"
    if fmt == "inspect":
        return ",".join(ids) + "\n"
    raise ValueError(f"unknown format {fmt!r} (expected one of: {', '.join(FORMATS)})")


def export_conversations(subset: Subset, corpus_path: Path, output: Path) -> int:
    """Write the corpus lines of ``subset``'s conversations to ``output``; return how many.

    ``corpus_path`` must already be verified (``corpus.load_for_profile``): here each line is
    only read for its ``prompt_id``. The lines are written exactly: ``KeyInData``, and
    nothing written, when they hold the value of an API key set in the environment."""
    wanted = set(subset.ids)
    kept = []
    for _, line in records.utf8_lines(corpus_path):
        if isinstance(line, records.NotUTF8):
            raise line  # names the file, line and column
        if line.strip() and json.loads(line)["prompt_id"] in wanted:
            kept.append(line if line.endswith("\n") else line + "\n")
    write_text(output, "".join(kept))
    return len(kept)


def verified_corpus() -> corpus.ProfileCorpus:
    """The registry's HealthBench corpus, verified by content; a partial one is accepted."""
    return corpus.load_for_profile(allow_partial=True, fetch=sources.fetch)


def _parser(command: str) -> argparse.ArgumentParser:
    ap = arguments.Parser(prog=f"python -m hbpsych_utils {command}",
                          description=__doc__.splitlines()[0],
                          epilog="exit codes: 0 done, 1 a subset or corpus that cannot be read "
                          "or a write that failed (one line naming the file), 2 bad arguments")
    ap.add_argument("--subset", required=True, type=subset_argument,
                    help="v1, v2, hard (the released subsets) or a subset JSON file")
    if command == "ids":
        ap.add_argument("--format", choices=FORMATS, default="lines")
    else:
        ap.add_argument("--output", type=arguments.output_file, required=True,
                        help="the JSONL file to write (a file in an existing folder; checked "
                        "before the corpus is read)")
    return ap


def main(command: str, argv: list[str]) -> int:
    """``ids`` or ``export`` (see the module docstring); a bad argument is one line and exit
    2 (before anything is read), other errors name what is wrong, exit 1."""
    try:
        args = _parser(command).parse_args(argv)
    except SystemExit as exc:  # argparse's own exit (a one-line usage error or --help)
        return int(exc.code or 0)
    notice = secrets.placeholder_notice()
    if command == "export" and notice:
        print(notice, file=sys.stderr)
    try:
        subset = resolve_subset(args.subset)
        sha256 = corpus.ids_hash(subset.ids)
        if command == "ids":
            sys.stdout.write(format_ids(subset.ids, args.format))
            print(f"{subset.name}: {len(subset.ids)} prompt ids, sha256 {sha256}",
                  file=sys.stderr)
            return 0
        loaded = verified_corpus()
        n = export_conversations(subset, loaded.report.path, args.output)
    except (InteropError, corpus.CorpusError, sources.ArtifactError, records.NotUTF8,
            secrets.KeyInData) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the output's folder filled up or changed since it was checked
        where = getattr(args, "output", None)
        print(f"error: {describe_os_error(exc, where)}", file=sys.stderr)
        return 1
    print(f"{args.output}: {n}/{len(subset.ids)} conversations of {subset.name} "
          f"(sha256 {sha256}) from the {loaded.coverage.describe()}")
    return 0
