"""What every x402 command shares: the typed mistake and the one place that answers it.

A mistake of the person running a command (a missing or wrong `X402_*` variable, a bad file it names, an
unreachable node or database, an unknown tenant, a wrong option) is answered with one line on stderr and
exit status 2, before anything is created or changed. `ConfigError` is that mistake; each command's entry
(`Group`, `Command`) also answers pydantic settings errors (naming the variable, never the field, never a
value) and the exception types it lists as `mistakes`. Anything else is a bug: its traceback goes to the
log, and the person gets one line saying so (exit status 1).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._entry import Command, Group, Mistakes, answer
    from ._errors import MISTAKE_EXIT_CODE, ConfigError
    from ._heap import YOUNG_THRESHOLD, settle_heap
    from ._listen import bind_listener, check_listenable
    from ._protocol import HeaderLimits, bounded_http_protocol
    from ._server import Server
    from ._settings import load_settings, settings_problems

__all__ = [
    "MISTAKE_EXIT_CODE",
    "YOUNG_THRESHOLD",
    "Command",
    "ConfigError",
    "Group",
    "HeaderLimits",
    "Mistakes",
    "Server",
    "answer",
    "bind_listener",
    "bounded_http_protocol",
    "check_listenable",
    "load_settings",
    "settings_problems",
    "settle_heap",
]

_EXPORTS = {
    "_entry": ("Command", "Group", "Mistakes", "answer"),
    "_errors": ("MISTAKE_EXIT_CODE", "ConfigError"),
    "_heap": ("YOUNG_THRESHOLD", "settle_heap"),
    "_listen": ("bind_listener", "check_listenable"),
    "_protocol": ("HeaderLimits", "bounded_http_protocol"),
    "_server": ("Server",),
    "_settings": ("load_settings", "settings_problems"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
