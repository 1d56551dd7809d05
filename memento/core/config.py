"""Settings: LM roles, budgets, web, memory and run options.

Precedence, highest first: CLI flag > environment (``MEMENTO_`` prefix) > TOML file (``--config FILE``, else
``./memento.toml`` when present) > defaults. :func:`load_settings` returns the effective settings together with
where each value came from, which ``memento config show`` prints.

Environment names: ``MEMENTO_LM`` is the agent's model string and ``MEMENTO_LM_<FIELD>`` its other fields
(``MEMENTO_LM_API_BASE``, ``MEMENTO_LM_API_KEY``, ``MEMENTO_LM_TEMPERATURE`` ...); the same holds for the roles
``JUDGE_LM``, ``REFLECTION_LM``, ``CURATOR_LM`` and
``PLANNER_LM`` (the CBR planner). Other sections use ``MEMENTO_<SECTION>_<FIELD>``
(``MEMENTO_WEB_CORPUS``, ``MEMENTO_RUN_THREADS``, ``MEMENTO_BUDGETS_TOTAL_QUESTIONS``).

API keys are read from the environment only (``MEMENTO_<ROLE>_API_KEY``, a variable named by ``api_key_env``,
or the provider's usual variable such as ``OPENAI_API_KEY``, which DSPy reads itself). They are ``SecretStr``,
excluded from every dump, and refused in TOML files.

Example:
    >>> from memento.core.config import load_settings
    >>> settings = load_settings(flags={"lm": {"model": "openai/gpt-4o-mini"}})
    >>> settings.role("judge_lm").model
    'openai/gpt-4o-mini'
    >>> load_settings(flags={"lm": "openai/x", "api_base": "http://127.0.0.1:8000/v1"}).lm.api_base
    'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import contextvars
import logging
import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memento.core.config_sections import (
    _INHERITED,
    COMPARE_PRESETS,
    ROLES,
    SECTIONS,
    BaselineSettings,
    BudgetPreset,
    Budgets,
    CBRSettings,
    CompareBudget,
    JitMemSettings,
    LMRole,
    LocalSettings,
    MemorySettings,
    ObserveSettings,
    RunSettings,
    TrainerSettings,
    WebSettings,
)
from memento.core.errors import ConfigError
from memento.llm.lm_deadline import DEFAULT_DEADLINE
from memento.utils.scrub import scrub

__all__ = [
    "ROLES",
    "LMRole",
    "Budgets",
    "WebSettings",
    "MemorySettings",
    "CBRSettings",
    "JitMemSettings",
    "TrainerSettings",
    "BaselineSettings",
    "BudgetPreset",
    "CompareBudget",
    "COMPARE_PRESETS",
    "ROLE_FIELD_DEFAULTS",
    "RunSettings",
    "LocalSettings",
    "Settings",
    "load_settings",
]

logger = logging.getLogger(__name__)

_SECTIONS: tuple[str, ...] = tuple(SECTIONS)
DEFAULT_CONFIG_FILE = "memento.toml"
_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar("memento_config_file", default=None)


class _EnvSource(PydanticBaseSettingsSource):
    """``MEMENTO_*`` environment variables, with the role shorthand ``MEMENTO_LM=model``."""

    def __init__(self, settings_cls: type[BaseSettings], *, warn: bool = True) -> None:
        super().__init__(settings_cls)
        self.warn = warn

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        roles = sorted(ROLES, key=len, reverse=True)
        for key, value in os.environ.items():
            if not key.startswith("MEMENTO_") or key == "MEMENTO_CONFIG":
                continue
            rest = key[len("MEMENTO_") :].lower()
            placed = False
            for role in roles:
                if rest == role:
                    out.setdefault(role, {})["model"] = value
                    placed = True
                elif rest.startswith(role + "_") and rest[len(role) + 1 :] in LMRole.model_fields:
                    out.setdefault(role, {})[rest[len(role) + 1 :]] = value
                    placed = True
                if placed:
                    break
            if placed:
                continue
            for section in _SECTIONS:
                field = rest[len(section) + 1 :]
                model = Settings.model_fields[section].annotation
                if rest.startswith(section + "_") and field in model.model_fields:  # type: ignore[union-attr]
                    out.setdefault(section, {})[field] = value
                    placed = True
                    break
            if not placed and self.warn:
                logger.warning("ignoring unknown environment variable %s", key)
        return out


class _TomlSource(PydanticBaseSettingsSource):
    """The TOML file given by ``--config`` (else ``./memento.toml``)."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover - unused
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _config_file.get()
        if path is None:
            return {}
        return read_toml(path)


def read_toml(path: Path) -> dict[str, Any]:
    """Read a settings TOML file; a role may be given as a plain model string (``lm = "openai/x"``)."""
    from memento.core.paths import read_text

    try:
        data = tomllib.loads(read_text(path, what="config file", error=ConfigError))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from exc
    for role in ROLES:
        if isinstance(data.get(role), str):
            data[role] = {"model": data[role]}
        if isinstance(data.get(role), dict) and "api_key" in data[role]:
            raise ConfigError(
                f"{path}: [{role}] api_key is not allowed in a file; set MEMENTO_{role.upper()}_API_KEY "
                "or name a variable with api_key_env"
            )
    return data


class Settings(BaseSettings):
    """The effective settings of a command or a Python session.

    Build it with :func:`load_settings` to get CLI > env > TOML > defaults precedence and source tracking;
    ``Settings()`` alone reads the environment and ``./memento.toml``.
    """

    model_config = SettingsConfigDict(extra="forbid", validate_assignment=True)

    lm: LMRole = Field(default_factory=LMRole)
    judge_lm: LMRole = Field(default_factory=LMRole)
    reflection_lm: LMRole = Field(default_factory=LMRole)
    curator_lm: LMRole = Field(default_factory=LMRole)
    planner_lm: LMRole = Field(default_factory=LMRole)  # the CBR planner (Memento runs planner and executor apart)
    budgets: Budgets = Field(default_factory=Budgets)
    web: WebSettings = Field(default_factory=WebSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    cbr: CBRSettings = Field(default_factory=CBRSettings)
    jitmem: JitMemSettings = Field(default_factory=JitMemSettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    baselines: BaselineSettings = Field(default_factory=BaselineSettings)
    compare: CompareBudget = Field(default_factory=CompareBudget)
    run: RunSettings = Field(default_factory=RunSettings)
    observe: ObserveSettings = Field(default_factory=ObserveSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, _EnvSource(settings_cls), _TomlSource(settings_cls))

    def role(self, name: str) -> LMRole:
        """The resolved settings of an LM role: a role without its own model is ``lm``; unset fields inherit."""
        if name not in ROLES:
            raise ConfigError(f"unknown LM role {name!r}; expected one of {', '.join(ROLES)}")
        base = self.lm
        own: LMRole = getattr(self, name)
        if name == "lm" or own.model is None:
            merged = base.model_copy()
            for field in _INHERITED:
                if getattr(own, field) is not None:
                    setattr(merged, field, getattr(own, field))
            return merged
        merged = own.model_copy()
        for field in _INHERITED:
            if getattr(merged, field) is None:
                setattr(merged, field, getattr(base, field))
        if merged.api_base is None and base.api_base and _provider(merged.model) == _provider(base.model):
            # same provider, no endpoint of its own: the role is served where `lm` is (e.g. a judge model on the
            # same local OpenAI-compatible server), with the same credentials
            merged.api_base = base.api_base
            if merged.api_key is None and merged.api_key_env is None:
                merged.api_key, merged.api_key_env = base.api_key, base.api_key_env
        return merged

    def source_of(self, dotted: str) -> str:
        """Where a value came from: ``default``, ``file``, ``env`` or ``flag``."""
        return self._sources.get(dotted, "default")

    def effective(self) -> list[tuple[str, Any, str]]:
        """``(dotted key, display value, source)`` for every setting; secrets masked."""
        rows: list[tuple[str, Any, str]] = []
        for section in (*ROLES, *_SECTIONS):
            model: BaseModel = getattr(self, section)
            for field in type(model).model_fields:
                key = f"{section}.{field}"
                value = getattr(model, field)
                if isinstance(value, SecretStr):
                    value = "****" if value.get_secret_value() else ""
                elif isinstance(value, str):
                    value = scrub(value)  # a password in a URL (api_base, searxng_url) is masked too
                if section in ROLES and section != "lm" and field != "api_key" and value is None:
                    inherited = getattr(self.role(section), field)
                    value = scrub(f"{inherited} (from lm)") if inherited is not None else None
                source = self.source_of(key)
                if section == "compare" and source == "default" and field != "preset":
                    source = f"preset {self.compare.preset}"  # every budget not set explicitly comes from the preset
                rows.append((key, value, source))
        return rows


#: What an LM role's unset field means when its LM is built (:func:`memento.llm.lm.build_lm`), as ``config show`` says
# it.
ROLE_FIELD_DEFAULTS: dict[str, Any] = {
    "api_base": "the provider's endpoint",
    "temperature": "the model's default (not sent)",
    "max_tokens": "the model's default (not sent)",
    "num_retries": 3,
    "cache": True,
    "max_concurrency": "no limit",
    "requests_per_minute": "no limit",
    "structured_outputs": "auto",
    "deadline": DEFAULT_DEADLINE,  # seconds one LM call may take, retries included
}


def _provider(model: str | None) -> str:
    """The provider prefix of a model string (``openai`` for ``openai/gpt-4o-mini``)."""
    return (model or "").split("/", 1)[0]


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            inner = _drop_none(value)
            if inner:
                out[key] = inner
        elif value is not None:
            out[key] = value
    return out


def _nested_flags(flags: dict[str, Any]) -> dict[str, Any]:
    """``flags`` with every key in the nested form: a section or role stays as it is; ``"web.corpus"`` (a dotted
    setting), ``"api_base"`` (a field of the ``lm`` role: its flat CLI form) and a CLI flag's name (``"corpus"``,
    ``"total_questions"``, as :mod:`memento.cli.commands._options` names them) go where they set.

    Raises:
        ConfigError: a key that is none of these (one line listing the forms).
    """
    out: dict[str, Any] = {}

    def put(section: str, field: str, value: Any) -> None:
        target = out.setdefault(section, {})
        if isinstance(target, str):  # {"lm": "openai/x", "api_base": ...}: the role's shorthand, then its fields
            target = out[section] = {"model": target}
        target[field] = value

    flat: list[tuple[str, Any]] = []
    for key, value in flags.items():
        if key in ROLES or key in _SECTIONS:
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = {**out[key], **value}
            elif isinstance(value, str) and isinstance(out.get(key), dict):
                out[key] = {**out[key], "model": value}
            else:
                out[key] = value
        else:
            flat.append((key, value))
    cli: dict[str, Any] | None = None
    for key, value in flat:
        section, dot, field = key.partition(".")
        if dot and (section in ROLES or section in _SECTIONS):
            put(section, field, value)
        elif key in LMRole.model_fields:
            put("lm", key, value)
        else:
            if cli is None:
                from memento.cli.flags import FLAGS

                cli = {name: flag for name, flag in FLAGS.items() if flag.target is not None}
            flag = cli.get(key)
            if flag is None or flag.target is None:
                raise ConfigError(
                    f"unknown setting {key!r}: give a section as a dict ({{'web': {{'corpus': ...}}}}), a dotted "
                    "setting ('web.corpus'), a field of the lm role ('api_base') or a CLI flag's name ('corpus')"
                )
            section, _, field = flag.target.partition(".")
            put(section, field, flag.convert(value) if flag.convert is not None and value is not None else value)
    return out


def load_settings(config_file: str | Path | None = None, *, flags: dict[str, Any] | None = None) -> Settings:
    """Build the effective settings: flags > environment > TOML file > defaults.

    Args:
        config_file: a TOML file; when ``None``, ``$MEMENTO_CONFIG`` or ``./memento.toml`` is used if present.
        flags: values that take precedence over every other layer, as the command line's flags do; ``None`` values
            are ignored so that unset flags do not shadow lower layers. Nested by section
            (``{"lm": {"model": "openai/x", "api_base": URL}, "web": {"corpus": "c.jsonl"}}``), with a role given
            as its model string (``{"lm": "openai/x"}``); or flat, as on the command line: a field of the ``lm``
            role (``{"lm": "openai/x", "api_base": URL}``), a dotted setting (``{"web.corpus": "c.jsonl"}``) or a
            CLI flag's name (``{"corpus": "c.jsonl", "total_questions": 3}``).

    Raises:
        ConfigError: the file is missing or invalid, or a value fails validation.
    """
    if config_file is None:
        env_file = os.environ.get("MEMENTO_CONFIG")
        if env_file:
            config_file = env_file
        elif Path(DEFAULT_CONFIG_FILE).is_file():
            config_file = DEFAULT_CONFIG_FILE
    path = Path(config_file) if config_file is not None else None
    flags = _drop_none(_nested_flags(flags or {}))
    for role in ROLES:
        if isinstance(flags.get(role), str):
            flags[role] = {"model": flags[role]}
    token = _config_file.set(path)
    try:
        file_layer = read_toml(path) if path is not None else {}
        env_layer = _EnvSource(Settings, warn=False)()  # provenance only: Settings() below warns once
        try:
            settings = Settings(**flags)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"invalid setting {where}: {first['msg']}") from None
    finally:
        _config_file.reset(token)
    sources: dict[str, str] = {}
    for layer, name in ((file_layer, "file"), (env_layer, "env"), (flags, "flag")):
        for key in _flatten(layer):
            sources[key] = name
    settings._sources = sources
    return settings
