"""The model registry (``params/models.yaml``): providers, snapshot ids, decoding quirks, prices.

Stages name a model; the registry says how to reach it and which decoding parameters its API
accepts. :func:`resolve_decoding` turns a request's wishes (temperature, token cap) into the
parameters actually sent, so that quirks (temperature rejected or fixed, another name for the
token cap, a smaller cap, thinking settings) live in data, and the config sent is recorded
with every result.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from hbpsych_utils.core import paths, yaml_loader

ProviderKind = Literal["openai", "openai_compatible", "anthropic", "google"]

DEFAULT_MAX_TOKENS = 8192


class ConfigError(ValueError):
    """A registry, model name or engine setting that cannot be used (raised before any call)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Price(_Strict):
    """USD per million tokens; ``batch_discount`` is the share of the sync price batches cost.

    Cached prompt tokens are priced as fractions of ``input``: ``cache_read`` for a token read
    from the provider's prompt cache (None: no discount, the full input price), ``cache_write``
    for a token written to it (Anthropic's 5-minute write: 1.25; None: the input price).
    ``batch_cache_stacks`` says whether the batch discount also applies to those cached and
    cache-write tokens (:func:`hbpsych_utils.llm.cost.call_cost`)."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    batch_discount: float = Field(default=1.0, gt=0, le=1)
    estimate: bool = True
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    batch_cache_stacks: bool = False


class ProviderSpec(_Strict):
    name: str = ""
    kind: ProviderKind
    api_key_env: str | None
    base_url: str | None = None
    batch: bool = False
    concurrency: int = Field(default=8, ge=1)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)


class ModelSpec(_Strict):
    name: str = ""
    provider: str
    api_model: str
    roles: tuple[str, ...] = ()
    temperature: Literal["free", "rejected"] | float = "free"
    max_tokens_param: str | None = None
    max_tokens_cap: int | None = Field(default=None, ge=1)
    default_max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, ge=1)
    params: dict[str, Any] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    schema_mode: Literal["json_schema", "json_object", "json_object_schema", "none"] = (
        "json_schema"
    )
    price: Price
    cache_mode: Literal["implicit", "breakpoint", "none"] = "none"
    """How the provider caches a repeated prompt prefix: ``implicit`` (on its own, above
    ``cache_min_tokens``: OpenAI, Gemini), ``breakpoint`` (what a ``cache_control`` block marks:
    Anthropic) or ``none`` (the engine never arranges requests for it)."""
    cache_min_tokens: int | None = Field(default=None, ge=1)
    """The shortest prefix the provider caches; None: no caching."""
    cache_key_param: str | None = None
    """Body field of the provider's cache-routing hint, sent with a hash of the shared prefix
    (OpenAI: ``prompt_cache_key``); None: no hint."""
    seed_param: str | None = None
    """Body field that carries a request's sampling seed; None: the API family's own
    (``seed`` for OpenAI-compatible APIs and Gemini; Anthropic takes none, so none is sent)."""

    @model_validator(mode="after")
    def _cache(self) -> ModelSpec:
        if self.cache_mode != "none" and self.cache_min_tokens is None:
            raise ValueError(f"cache_mode {self.cache_mode!r} needs cache_min_tokens (the "
                             "shortest prefix the provider caches)")
        return self

    def caches_prefix(self, tokens: int) -> bool:
        """Whether a shared prefix of ``tokens`` tokens is long enough for this model's cache."""
        return (self.cache_mode != "none" and self.cache_min_tokens is not None
                and tokens >= self.cache_min_tokens)

    @field_validator("roles")
    @classmethod
    def _roles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [r for r in v if r not in {"candidate", "judge", "added", "local"}]
        if bad:
            raise ValueError(f"unknown role(s) {bad}; use candidate, judge, added or local")
        return v


_DEFAULT_SEED_PARAM: dict[str, str | None] = {
    "openai": "seed",
    "openai_compatible": "seed",
    "anthropic": None,
    "google": "seed",
}
"""The sampling-seed field of each API family (Anthropic's Messages API has none)."""

_DEFAULT_CAP_PARAM = {
    "openai": "max_tokens",
    "openai_compatible": "max_tokens",
    "anthropic": "max_tokens",
    "google": "max_output_tokens",
}


class Registry:
    """Providers and models by name, validated as a whole when loaded."""

    def __init__(self, providers: Mapping[str, ProviderSpec], models: Mapping[str, ModelSpec],
                 source: str = "<memory>") -> None:
        self.providers = dict(providers)
        self.models = dict(models)
        self.source = source
        for m in self.models.values():
            if m.provider not in self.providers:
                raise ConfigError(
                    f"{source}: model {m.name!r}: provider {m.provider!r} is not defined "
                    f"(known: {sorted(self.providers)})"
                )

    def model(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(
                f"unknown model {name!r}: not in the registry {self.source} "
                f"(known: {', '.join(sorted(self.models))})"
            ) from None

    def provider_of(self, model: str) -> ProviderSpec:
        return self.providers[self.model(model).provider]

    def with_role(self, role: str) -> list[str]:
        return [n for n, m in self.models.items() if role in m.roles]


def default_registry_path() -> Path:
    return paths.params_dir() / "models.yaml"


def profile_registry(registry_file: str | None) -> Registry:
    """The model registry a profile's ``llm.registry_file`` names (relative to the project
    root), or params/models.yaml when it is null: one reading for the profile check, the
    engine and the cost plan, so they never price or check against different registries."""
    return load_registry(paths.resolve_path(registry_file) if registry_file else None)


def load_registry(path: str | Path | None = None) -> Registry:
    """Read and validate a registry file; errors name the file, the entry and the field.

    The YAML is read strictly (``core.yaml_loader``: UTF-8, a key written twice is an error
    naming both lines), so a model entry repeated by mistake cannot silently replace another."""
    p = Path(path) if path is not None else default_registry_path()
    try:
        raw = yaml_loader.load_file(p)
    except FileNotFoundError:
        raise ConfigError(f"model registry {p} does not exist") from None
    except yaml_loader.YAMLFileError as exc:
        raise ConfigError(f"model registry {exc}") from None
    if raw is None:
        raise ConfigError(f"model registry {p} is empty (expected 'providers:' and 'models:')")
    return registry_from_dict(raw, source=str(p))


def registry_from_dict(raw: Mapping[str, Any], source: str = "<memory>") -> Registry:
    """A registry from its decoded mapping; every section of the wrong type is an error naming
    ``source`` and the key (never an ``AttributeError``)."""
    top = _mapping(raw, source, "<top level>", "a mapping with 'providers' and 'models'")
    unknown = set(top) - {"providers", "models"}
    if unknown:
        raise ConfigError(f"{source}: unknown top-level key(s) {sorted(map(str, unknown))} "
                          "(expected: providers, models)")
    providers: dict[str, ProviderSpec] = {}
    for name, body in _entries(top, "providers", source).items():
        providers[name] = _validate(ProviderSpec, {**body, "name": name}, source,
                                    f"providers.{name}")
    models: dict[str, ModelSpec] = {}
    for name, body in _entries(top, "models", source).items():
        models[name] = _validate(ModelSpec, {**body, "name": name}, source, f"models.{name}")
    return Registry(providers, models, source)


def _mapping(value: Any, source: str, key: str, expected: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{source}: {key}: expected {expected}, got {type(value).__name__} "
                          f"{value!r:.80}")
    return value


def _entries(top: Mapping[str, Any], section: str, source: str) -> dict[str, dict[str, Any]]:
    """``providers`` or ``models``: a mapping of name -> settings (each settings a mapping)."""
    entries = _mapping(top.get(section) or {}, source, section,
                       f"a mapping of {section[:-1]} name -> settings (not a list)")
    out: dict[str, dict[str, Any]] = {}
    for name, body in entries.items():
        if not isinstance(name, str):
            raise ConfigError(f"{source}: {section}: name {name!r} is not a string")
        out[name] = dict(_mapping(body or {}, source, f"{section}.{name}",
                                  "a mapping of settings"))
    return out


def _validate(cls: type[BaseModel], body: dict[str, Any], source: str, where: str) -> Any:
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(
            f"{where}.{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{source}: {problems}") from None


def resolve_decoding(spec: ModelSpec, kind: ProviderKind, temperature: float | None,
                     max_tokens: int | None, seed: int | None) -> dict[str, Any]:
    """The decoding parameters actually sent for one request to one model.

    Temperature: ``rejected`` models never get one (provider default), fixed ones always get
    their own value, others get the request's (omitted when the request gives none). The cap
    is lowered to the model's ``max_tokens_cap``; APIs that require a cap get
    ``default_max_tokens`` when the request gives none. A ``seed`` is sent in the model's
    ``seed_param`` (or its API family's) when it has one, and dropped otherwise (Anthropic).
    """
    out: dict[str, Any] = {}
    sent_temperature = _temperature(spec, temperature)
    if sent_temperature is not None:
        out["temperature"] = sent_temperature
    cap = _token_cap(spec, kind, max_tokens)
    if cap is not None:
        out[spec.max_tokens_param or _DEFAULT_CAP_PARAM[kind]] = cap
    seed_param = spec.seed_param or _DEFAULT_SEED_PARAM[kind]
    if seed is not None and seed_param is not None:
        out[seed_param] = int(seed)
    out.update(spec.params)
    if kind == "anthropic":
        _room_beyond_thinking(out, spec)
    return out


def _temperature(spec: ModelSpec, requested: float | None) -> float | None:
    """The temperature sent: the model's fixed one, else the request's where the model takes
    one (``free``), else none."""
    if isinstance(spec.temperature, float | int) and not isinstance(spec.temperature, bool):
        return float(spec.temperature)
    if spec.temperature == "free" and requested is not None:
        return float(requested)
    return None


def _token_cap(spec: ModelSpec, kind: ProviderKind, requested: int | None) -> int | None:
    """The output cap sent: the request's (Anthropic's required default without one), lowered
    to the model's ``max_tokens_cap``."""
    cap = requested
    if cap is None and kind == "anthropic":
        cap = spec.default_max_tokens
    if cap is not None and spec.max_tokens_cap is not None:
        cap = min(cap, spec.max_tokens_cap)
    return None if cap is None else int(cap)


def _room_beyond_thinking(out: dict[str, Any], spec: ModelSpec) -> None:
    """Anthropic requires ``max_tokens`` above the thinking budget: raise it by the answer's
    room so that thinking does not eat the answer."""
    thinking = out.get("thinking")
    if isinstance(thinking, dict) and thinking.get("budget_tokens"):
        budget = int(thinking["budget_tokens"])
        if out.get("max_tokens", 0) <= budget:
            out["max_tokens"] = budget + int(out.get("max_tokens") or spec.default_max_tokens)
