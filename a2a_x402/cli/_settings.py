"""pydantic-settings errors in the operator's words: the environment variable and what it must be.

A `ValidationError` of a settings class renders the raw input (for a model validator, every setting,
secrets in the clear) in pydantic's phrasing ("Input should be ..."). Here each error becomes a short
sentence introduced by the variable it concerns, saying what is expected; the value given is shown only
for a setting that is not a secret (not a `SecretStr`), and only when it is short and not shaped like a key.
"""

from __future__ import annotations

import re
import typing
from typing import Any, TypeVar

from pydantic import SecretStr, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings

from ._errors import ConfigError

__all__ = ["load_settings", "settings_class", "settings_problems"]

_S = TypeVar("_S", bound=BaseSettings)
_VALUE_ERROR_PREFIX = "Value error, "
_SHOWN_CHARS = 40
# A long run of hex or base64 may be a key pasted into the wrong variable: never shown.
_KEY_LIKE = re.compile(r"[0-9A-Za-z+/_=-]{32,}")

# What a value must be, by pydantic error type; `{name}` is filled from the error's context.
_EXPECTED = {
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "literal_error": "must be one of {expected}",
    "string_too_short": "must be at least {min_length} characters long",
    "string_too_long": "must be at most {max_length} characters long",
    "finite_number": "must be a finite number",
}


def settings_class(exc: ValidationError) -> type[BaseSettings] | None:
    """The settings class whose validation raised `exc`, or None when it came from another model."""
    pending: list[type[BaseSettings]] = [BaseSettings]
    while pending:
        cls = pending.pop()
        if cls.__name__ == exc.title and cls is not BaseSettings:
            return cls
        pending.extend(cls.__subclasses__())
    return None


def _is_secret(cls: type[BaseSettings] | None, field: str) -> bool:
    info = cls.model_fields.get(field) if cls is not None else None
    if info is None:
        return True  # unknown: shown as if it were one
    annotation = info.annotation
    return annotation is SecretStr or SecretStr in typing.get_args(annotation)


def _shown(value: Any) -> str | None:
    """`value` quoted for a message, or None when it is too long or shaped like a key."""
    if not isinstance(value, str | int | float | bool):
        return None
    text = str(value)
    if len(text) > _SHOWN_CHARS or _KEY_LIKE.search(text):
        return None
    return repr(text)


def _expected(error: ErrorDetails) -> str:
    """What the value must be, in a short sentence without pydantic's phrasing."""
    template = _EXPECTED.get(error["type"])
    if template is not None:
        try:
            return template.format(**error.get("ctx", {}))
        except (KeyError, IndexError):
            pass
    message = str(error["msg"]).removeprefix(_VALUE_ERROR_PREFIX)
    return re.sub(r"^Input should be ", "must be ", message)


def settings_problems(exc: ValidationError, cls: type[BaseSettings] | None = None) -> str:
    """One line naming each problem of `exc` by its environment variable and saying what it must be, with
    the setting's description for a missing one; a secret's value never appears."""
    cls = cls or settings_class(exc)
    prefix = str(cls.model_config.get("env_prefix", "")) if cls is not None else ""
    problems = []
    for error in exc.errors(include_url=False):
        if not error["loc"]:  # a model validator: its message names the variables itself
            problems.append(str(error["msg"]).removeprefix(_VALUE_ERROR_PREFIX))
            continue
        field = str(error["loc"][0])
        variable = (prefix + field).upper()
        info = cls.model_fields.get(field) if cls is not None else None
        if error["type"] == "missing":
            what = f" ({info.description})" if info is not None and info.description else ""
            problems.append(f"{variable} is not set{what}: set it in the environment or .env")
            continue
        problem = f"{variable}: {_expected(error)}"
        # A validator of ours words its own message; pydantic's own checks get the value beside them.
        shown = None if error["type"] == "value_error" or _is_secret(cls, field) else _shown(error["input"])
        problems.append(f"{problem}, got {shown}" if shown is not None else problem)
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
