"""What every x402 command shares: the typed mistake and the one place that answers it.

A mistake of the person running a command (a missing or wrong `X402_*` variable, a bad file it names, an
unreachable node or database, an unknown tenant, a wrong option) is answered with one line on stderr and
exit status 2, before anything is created or changed. `ConfigError` is that mistake; each command's entry
(`Group`, `Command`) also answers pydantic settings errors (naming the variable, never the field, never a
value) and the exception types it lists as `mistakes`. Anything else is a bug: its traceback goes to the
log, and the person gets one line saying so (exit status 1).
"""

from __future__ import annotations

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
