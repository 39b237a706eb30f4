"""External artifacts: the registry in ``data/registry.yaml``, fetching and sha256 checks.

``fetch(name)`` returns a verified local copy under ``data/external/``. It downloads with pooch
on first use, or copies from ``$HBPSYCH_MIRROR`` (an offline folder laid out by upstream
owner/repository/path) when that is set. Either way the bytes are checked against the
registry's sha256 before they are used, and a cached copy that no longer matches is fetched
again. Derived artifacts (the grader template, the harness scores) are produced from their
upstream download by the recipe the registry names, then checked the same way.

The HealthBench corpus has no hash known in advance; it is verified by content in
:mod:`hbpsych_utils.construction.corpus` (its ids must be the 5,000 ids of the released screen).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from hbpsych_utils.core import jsonl, paths, yaml_loader

MIRROR_ENV = "HBPSYCH_MIRROR"


class ArtifactError(RuntimeError):
    """An artifact could not be fetched or failed its check; the message says what to do."""


@dataclass(frozen=True)
class Artifact:
    name: str
    url: str
    page: str
    mirror_path: str
    licence: str
    sha256: str | None
    """Hash of the bytes the compendium uses; ``None`` when only content checks are possible."""
    mirror_sha256: str | None = None
    """Hash of the mirror's copy when it differs from upstream (the partial corpus)."""
    derive: str | None = None
    """Recipe that turns the upstream download into the artifact (see ``_DERIVERS``)."""
    derive_how: str = ""
    note: str = ""
    online_only: bool = False
    """Not in the offline mirror (``derive.kind: online_only``): always downloaded, and verified
    by content by its reader (the meta-evaluation file)."""

    @property
    def filename(self) -> str:
        return Path(self.mirror_path).name

    def expected_sha256(self, from_mirror: bool) -> str | None:
        return self.mirror_sha256 if (from_mirror and self.mirror_sha256) else self.sha256


_REQUIRED = ("url", "mirror_path", "licence")
_NOT_RECIPES = ("partial_corpus", "online_only")
"""``derive.kind`` values that say how an artifact is obtained, not a recipe to apply."""


@cache
def _registry(path: Path) -> dict[str, Artifact]:
    """``data/registry.yaml`` read strictly (``core.yaml_loader``: a name written twice is an
    error naming both lines); an entry of the wrong shape names the file and the entry."""
    try:
        raw = yaml_loader.load_file(path)
    except yaml_loader.YAMLFileError as exc:
        raise ArtifactError(f"artifact registry {exc}") from None
    if not isinstance(raw, dict):
        raise ArtifactError(f"artifact registry {path}: expected a mapping of artifact name -> "
                            f"entry, got {type(raw).__name__}")
    out = {}
    for name, e in raw.items():
        if not (isinstance(e, dict) and all(k in e for k in _REQUIRED)
                and isinstance(e.get("derive") or {}, dict)):
            raise ArtifactError(
                f"artifact registry {path}: entry {name!r}: expected a mapping with "
                f"{', '.join(_REQUIRED)} (and optionally page, sha256, mirror_sha256, derive: "
                f"{{kind, how}}, note), got {e!r:.120}"
            )
        derive = e.get("derive") or {}
        out[name] = Artifact(
            name=name,
            url=e["url"],
            page=e["page"] if "page" in e else e["url"],
            mirror_path=e["mirror_path"],
            licence=e["licence"],
            sha256=e.get("sha256"),
            mirror_sha256=e.get("mirror_sha256"),
            derive=(derive.get("kind") if derive.get("kind") not in _NOT_RECIPES else None),
            derive_how=derive.get("how", ""),
            note=e.get("note", ""),
            online_only=derive.get("kind") == "online_only",
        )
    return out


def registry() -> dict[str, Artifact]:
    """All registered artifacts by name."""
    return _registry(paths.registry_file())


def artifact(name: str) -> Artifact:
    reg = registry()
    if name not in reg:
        raise ArtifactError(
            f"unknown artifact {name!r}: not in {paths.registry_file()} "
            f"(known: {', '.join(sorted(reg))})"
        )
    return reg[name]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mirror_dir() -> Path | None:
    env = os.environ.get(MIRROR_ENV)
    return Path(env).resolve() if env else None


def local_path(name: str) -> Path:
    """Where ``fetch`` keeps the artifact (whether or not it is there yet)."""
    return paths.external_dir() / artifact(name).mirror_path


def fetch(name: str) -> Path:
    """A verified local copy of artifact ``name``: cached, mirrored or downloaded."""
    art = artifact(name)
    mirror = mirror_dir()
    dest = local_path(name)
    expected = art.expected_sha256(from_mirror=mirror is not None)
    if dest.is_file() and (expected is None or sha256_file(dest) == expected):
        return dest  # a hash-less artifact (the corpus) is verified by content when loaded
    dest.parent.mkdir(parents=True, exist_ok=True)
    if mirror is not None and not art.online_only:  # the mirror never holds an online-only one
        _copy_from_mirror(art, mirror, dest)
    else:
        _download(art, dest)
    return dest


def _copy_from_mirror(art: Artifact, mirror: Path, dest: Path) -> None:
    src = mirror / art.mirror_path
    if not src.is_file():
        raise ArtifactError(
            f"artifact {art.name!r}: {src} is missing from the mirror {MIRROR_ENV}={mirror}. "
            f"Point {MIRROR_ENV} at a complete copy of the offline mirror, or unset it to "
            f"download from {art.url}"
        )
    expected = art.expected_sha256(from_mirror=True)
    if expected is not None:
        got = sha256_file(src)
        if got != expected:
            raise ArtifactError(
                f"artifact {art.name!r}: sha256 mismatch for the mirror copy {src}: "
                f"expected {expected}, got {got}. The mirror file is corrupted or a different "
                f"version; restore it from the mirror's source or unset {MIRROR_ENV} to download "
                f"from {art.url}"
            )
    _atomic_copy(src, dest)


def _atomic_copy(src: Path, dest: Path) -> None:
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _download(art: Artifact, dest: Path) -> None:
    import pooch  # imported here: only online fetches need it

    raw_dir = paths.external_dir() / ".upstream"
    known_hash = None if art.derive or art.sha256 is None else f"sha256:{art.sha256}"
    try:
        got = Path(
            pooch.retrieve(
                art.url,
                known_hash=known_hash,
                fname=f"{art.name}{Path(art.url).suffix}",
                path=raw_dir,
                progressbar=False,
            )
        )
    except ValueError as exc:  # pooch's hash mismatch
        raise ArtifactError(
            f"artifact {art.name!r}: sha256 mismatch for the download from {art.url}: {exc}. "
            "The upstream file changed or the download was damaged; delete "
            f"{raw_dir} and try again, or report it if it persists"
        ) from exc
    except Exception as exc:  # network errors of every kind
        if art.online_only:
            raise ArtifactError(
                f"artifact {art.name!r}: could not download {art.url} ({type(exc).__name__}: "
                f"{exc}). It is online only (the offline mirror does not hold it): run this on "
                "a machine that can reach it"
            ) from exc
        raise ArtifactError(
            f"artifact {art.name!r}: could not download {art.url} ({type(exc).__name__}: {exc}). "
            f"This machine has no network access to it and no mirror is set: set {MIRROR_ENV} "
            "to a folder holding the offline mirror (see docs/running.md, 'Data')"
        ) from exc
    data = _DERIVERS[art.derive](got.read_bytes()) if art.derive else got.read_bytes()
    if art.sha256 is not None:
        digest = hashlib.sha256(data).hexdigest()
        if digest != art.sha256:
            raise ArtifactError(
                f"artifact {art.name!r}: sha256 mismatch after deriving it from {art.url}: "
                f"expected {art.sha256}, got {digest}. The upstream file differs from the pinned "
                "commit or the derivation recipe no longer applies"
            )
    tmp = dest.with_name(f".{dest.name}.part")
    tmp.write_bytes(data)
    os.replace(tmp, dest)


def derive_python_string_constant(source: bytes, constant: str = "GRADER_TEMPLATE") -> bytes:
    """The value a module-level ``NAME = "..."`` (or ``"...".strip()``) holds at run time."""
    tree = ast.parse(source.decode("utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == constant for t in node.targets
        ):
            value = node.value
            strip = None
            if (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Attribute)
                and value.func.attr in ("strip", "lstrip", "rstrip")
                and not value.args
            ):
                strip = value.func.attr
                value = value.func.value
            text = ast.literal_eval(value)
            if strip:
                text = getattr(text, strip)()
            return text.encode("utf-8")
    raise ArtifactError(f"no module-level constant {constant} in the downloaded source")


def derive_harness_scores(results_jsonl: bytes) -> bytes:
    """Keep ``prompt_id``, ``score`` and the ``criteria_met`` booleans of each result line."""
    out = []
    for line in jsonl.lines(results_jsonl.decode("utf-8")):
        rec = json.loads(line)
        grades = [g["criteria_met"] if isinstance(g, dict) else g for g in rec["grades"]]
        row = {"prompt_id": rec["prompt_id"], "score": rec["score"], "grades": grades}
        out.append(json.dumps(row) + "\n")
    return "".join(out).encode("utf-8")


_DERIVERS: dict[str, Callable[[bytes], bytes]] = {
    "python_string_constant": derive_python_string_constant,
    "harness_scores": derive_harness_scores,
}


def describe(name: str, path: Path | None = None) -> dict[str, str | None]:
    """What a manifest records about an artifact that was used."""
    art = artifact(name)
    p = path or local_path(name)
    return {
        "name": name,
        "url": art.url,
        "licence": art.licence,
        "sha256": sha256_file(p) if p.is_file() else None,
        "registry_sha256": art.sha256,
        "source": "mirror" if mirror_dir() else "download",
    }
