"""pydantic-settings errors in the operator's words: the environment variable, never the field or a value.

A `ValidationError` of a settings class renders the raw input (for a model validator, every setting,
secrets in the clear); only each error's own message is kept here, introduced by the variable it concerns.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError
from pydantic_settings import BaseSettings

from ._errors import ConfigError

__all__ = ["load_settings", "settings_class", "settings_problems"]

_S = TypeVar("_S", bound=BaseSettings)
_VALUE_ERROR_PREFIX = "Value error, "


def settings_class(exc: ValidationError) -> type[BaseSettings] | None:
    """The settings class whose validation raised `exc`, or None when it came from another model."""
    pending: list[type[BaseSettings]] = [BaseSettings]
    while pending:
        cls = pending.pop()
        if cls.__name__ == exc.title and cls is not BaseSettings:
            return cls
        pending.extend(cls.__subclasses__())
    return None


def settings_problems(exc: ValidationError, cls: type[BaseSettings] | None = None) -> str:
    """One line naming each problem of `exc` by its environment variable, with the setting's description
    for a missing one; no input value appears."""
    cls = cls or settings_class(exc)
    prefix = str(cls.model_config.get("env_prefix", "")) if cls is not None else ""
    problems = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        message = str(error["msg"]).removeprefix(_VALUE_ERROR_PREFIX)
        if not error["loc"]:  # a model validator: its message names the variables itself
            problems.append(message)
            continue
        field = str(error["loc"][0])
        variable = (prefix + field).upper()
        info = cls.model_fields.get(field) if cls is not None else None
        if error["type"] == "missing":
            what = f" ({info.description})" if info is not None and info.description else ""
            problems.append(f"{variable} is not set{what}: set it in the environment or .env")
        else:
            problems.append(f"{variable}: {message}")
    return "; ".join(problems)


def load_settings(cls: type[_S], /, **overrides: Any) -> _S:
    """`cls(**overrides)` from the environment and `.env`.

    Raises:
        ConfigError: a setting is missing or invalid (all problems in one line, by variable name).
    """
    try:
        return cls(**overrides)
    except ValidationError as exc:
        raise ConfigError(settings_problems(exc, cls)) from exc
