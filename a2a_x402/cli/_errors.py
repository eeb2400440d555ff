"""The typed mistake of a command's user."""

from __future__ import annotations

__all__ = ["MISTAKE_EXIT_CODE", "ConfigError"]

MISTAKE_EXIT_CODE = 2
"""The exit status of a command refusing a mistake of its user (as for click's usage errors)."""


class ConfigError(ValueError):
    """A setting, or a file or service a setting names, is missing or wrong.

    The message is one line saying what is wrong and what to do; `variable` names the setting
    (`X402_PAY_TO`) or the file it concerns and, when given, is the subject of the message's sentence
    (`ConfigError("is not set: ...", variable="X402_PAY_TO")`). The message never holds a secret's value.
    """

    code = "config_invalid"

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        self.variable = variable
        super().__init__(f"{variable} {message}" if variable else message)
