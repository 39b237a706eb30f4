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
scores as mindbench-results v1 artifacts, one per candidate (``publish --help``);
``shards PROFILE --stage 06_generation|07_grading [--size N]`` writes the calls a stage would
send next as OpenAI Batch JSONL shards, ``import-results PROFILE FILE_OR_DIR`` reads Batch output
(OpenAI's, ``vllm run-batch``'s, Ray's) into the run's store, and ``ray-shards PROFILE [EXPORT]``
runs shards with Ray Data (docs/scale.md); ``docs [--check]`` writes the docs' chapter lists
and the graph's table from the stage graph (docs/contributing.md).

Every command answers a bad argument in one line with exit code 2 (a profile name that is not a
plain name, an outputs root in the project's source tree, a seed or count out of range, an
output that cannot be written), and Ctrl-C at any point, its imports included, with one line and
exit code 130.
"""

from __future__ import annotations

import signal  # built into the interpreter, as sys: nothing to interrupt before main() runs
import sys

EXIT_USAGE, EXIT_INTERRUPTED = 2, 130

IRI_GRAMMAR = "rfc3987_syntax"
"""jsonschema's optional IRI format checker, which builds its grammar when jsonschema is first
imported: about 1.1 s of the 1.7 s of CPU that importing papermill (nbformat, jsonschema) takes.
``run`` and ``book`` validate notebooks only, whose schema has no ``iri`` format, so their
processes go without it (:func:`without_iri_grammar`); ``publish``, which validates a schema it
downloads, keeps every format checker."""


def without_iri_grammar() -> None:
    """Keep :data:`IRI_GRAMMAR` out of this process (its ``import`` raises ImportError, which
    jsonschema takes as the checker not being installed). For a process that ends with its
    command; a module already imported is left as it is."""
    sys.modules.setdefault(IRI_GRAMMAR, None)  # type: ignore[arg-type]


def without_exit_collections() -> None:
    """Freeze every object when the interpreter exits, so that its last garbage collections
    skip them: they walk all of a process's objects (0.4 s of a ``run`` command's exit, 0.4 s
    of a chapter's kernel, a second or more of a test worker's) and only run finalisers of
    objects nobody can use any more. For a process that ends with its command: what it writes
    is closed when the command returns, and the engine loses nothing when killed outright."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    """The command of ``argv`` (the process's arguments when ``None``: the process then ends
    next, and once a command has answered, Ctrl-C is ignored while it exits; called with
    ``argv``, as tests do, the caller's Ctrl-C handler is left as it was)."""
    ending = argv is None
    if ending:
        without_exit_collections()
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = signal.getsignal(signal.SIGINT)
    try:
        return _dispatch(argv, ending)
    except KeyboardInterrupt:  # before a command's own handling: its imports, its arguments
        return _interrupted(argv, restore=None if ending else previous)
    except SystemExit as exc:  # argparse's answer (one line, or help), as a return code
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1


_SHARD_COMMANDS = {"shards": "shards_main", "import-results": "import_main",
                   "ray-shards": "ray_main"}


def _interrupted(argv: list[str], restore: object) -> int:
    """The one line of a command stopped before it could say so itself; Ctrl-C is ignored
    while it is written, then ``restore`` (the caller's handler) comes back, if given."""
    _set_sigint(signal.SIG_IGN)  # nothing stops the one line now
    exec("None")  # clears CPython's note of an interrupted exec (runner.cli._quiet)
    import shlex

    command = shlex.join(["python", "-m", "hbpsych_utils", *argv])
    print(f"interrupted: {command} stopped by Ctrl-C before it finished; run it again",
          file=sys.stderr)
    if restore is not None:
        _set_sigint(restore)
    return EXIT_INTERRUPTED


def _set_sigint(handler: object) -> None:
    try:
        signal.signal(signal.SIGINT, handler)  # type: ignore[arg-type]
    except ValueError:  # not the main thread
        pass


def _dispatch(argv: list[str], ending: bool) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if ending and command in ("run", "book"):
        without_iri_grammar()
    if command == "run":
        from hbpsych_utils.runner import cli

        return cli.main(rest, restore_sigint=not ending)
    if command == "publish":
        from hbpsych_utils.runner import cli

        return cli.publish_main(rest)
    if command == "book":
        from hbpsych_utils.runner import cli

        return cli.book_main(rest, restore_sigint=not ending)
    if command in ("ids", "export"):
        from hbpsych_utils.reporting import export

        return export.main(command, rest)
    if command == "fetch":
        return _fetch(rest)
    if command == "filter-results":
        from hbpsych_utils.reporting import interop

        return interop.main(rest)
    if command == "profiles":
        return _profiles(rest)
    if command == "docs":
        from hbpsych_utils.pipeline import docs_blocks

        return docs_blocks.main(rest)
    if command in _SHARD_COMMANDS:  # a stage's calls made elsewhere (runner.shards)
        from hbpsych_utils.runner import shards

        return getattr(shards, _SHARD_COMMANDS[command])(rest)
    print(f"error: unknown command {command!r} (expected one of: run, book, publish, fetch, "
          "profiles, ids, export, filter-results, docs, shards, import-results, ray-shards; "
          "python -m hbpsych_utils --help)",
          file=sys.stderr)
    return EXIT_USAGE


def _fetch(names: list[str]) -> int:
    from hbpsych_utils.core import paths, sources

    try:
        registry = sources.registry()
    except sources.ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    unknown = [n for n in names if n not in registry]
    if unknown:
        print(f"error: fetch: unknown artifact {unknown[0]!r} (expected names of "
              f"{paths.registry_file()}: {', '.join(sorted(registry))})",
              file=sys.stderr)
        return EXIT_USAGE
    # online-only artifacts (the meta-evaluation file) are fetched when named
    names = names or sorted(n for n, a in registry.items() if not a.online_only)
    try:
        for name in names:
            print(f"{name}: {sources.fetch(name)}")
    except sources.ArtifactError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        from hbpsych_utils.core.writes import describe_os_error

        print(f"error: {describe_os_error(exc, paths.external_dir())}", file=sys.stderr)
        return 1
    return 0


def _profiles(rest: list[str]) -> int:
    """Each profile with its description; a profile that does not load says why in one line,
    and a file of ``params/`` whose name is not a plain name is named as no profile."""
    from hbpsych_utils.core import config, paths
    from hbpsych_utils.pipeline import profiles

    if rest:
        print(f"error: profiles takes no arguments (got {' '.join(rest)})", file=sys.stderr)
        return EXIT_USAGE
    for name in config.available_profiles():
        try:
            description = profiles.load_profile(name).description
        except config.ProfileError as exc:
            description = f"(does not load: {' '.join(str(exc).split())})"
        print(f"{name}: {description}")
    for path in sorted(paths.params_dir().glob("*.yaml")):
        if not paths.is_plain_name(path.stem):
            print(f"warning: {path}: not a profile (its name {path.stem!r} is not "
                  f"{paths.NAME_RULE})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
