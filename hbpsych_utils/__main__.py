"""Command line: ``python -m hbpsych_utils <command>``.

Commands: ``run [PROFILE]`` executes a profile's notebooks; ``book [PROFILE] [--outputs DIR]``
renders an existing run folder ``outputs/PROFILE/`` into ``outputs/PROFILE/book/``, a static
site that opens offline; ``fetch [NAME ...]`` fetches and verifies external artifacts (all when
no name is given); ``profiles`` lists the profiles; ``ids --subset v1|v2|hard|PATH
[--format lines|csv|json|inspect]`` prints a subset's prompt ids (its sha256 on stderr);
``export --subset ... --output FILE.jsonl`` writes its conversations in HealthBench's layout;
``filter-results INPUT ... [--format auto|simple-evals|inspect|hbpsych] [--subset v1|v2|hard|PATH]
[--seed N] [--resamples N] [--json]`` reports HealthBench-Psych and Psych-Hard from
per-conversation HealthBench results you already have (simple-evals, Inspect logs, or this
compendium's score export), with no new generation or grading (``filter-results --help``);
``publish [PROFILE] [--subset v1|v2] [--output DIR] [--outputs DIR]`` writes an existing run's
scores as mindbench-results v1 artifacts, one per candidate (``publish --help``).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command == "run":
        from hbpsych_utils.runner import cli

        return cli.main(rest, restore_sigint=False)  # the process ends next
    if command == "publish":
        from hbpsych_utils.runner import cli

        return cli.publish_main(rest)
    if command == "book":
        from hbpsych_utils.reporting import book

        return book.main(rest)
    if command in ("ids", "export"):
        from hbpsych_utils.reporting import export

        return export.main(command, rest)
    if command == "fetch":
        from hbpsych_utils.core import sources

        # online-only artifacts (the meta-evaluation file) are fetched when named
        names = rest or sorted(n for n, a in sources.registry().items() if not a.online_only)
        try:
            for name in names:
                print(f"{name}: {sources.fetch(name)}")
        except sources.ArtifactError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if command == "filter-results":
        from hbpsych_utils.reporting import interop

        return interop.main(rest)
    if command == "profiles":
        from hbpsych_utils.core import config

        for name in config.available_profiles():
            print(f"{name}: {config.load_profile(name).description}")
        return 0
    print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
