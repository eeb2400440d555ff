"""What the merchant and the facilitator share to be operated: logs, metrics, readiness, the failure throttle.

`configure_logging` (text or JSON lines, `log_context` fields, every line through `redact`; the service's
secrets registered with `redact_values`) and `AccessLogMiddleware` for the CLIs;
`metrics_route` and `ScrapedGauges` for `GET /metrics` on a registry per app; `Check` and `CheckResult`, the
one model of a check, run by `run_checks` and rendered by `readiness_route` (`GET /readyz`) and
`render_checks` (the `check` commands' table); `FailureThrottle`, the count of wrong credentials per
client network (`client_network`) from which every credential surface of both services answers 429. It
imports no other package of the project, so both services may use it.
`render_checks` (the `check` commands' table); `unreachable_reason` and `failure_reason`, why something got
no answer or failed in words (never a class name or repr), for every surface a person reads. It imports no
other package of the project, so both services, the payer and the conformance kit may use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._access import AccessLogMiddleware
    from ._health import READYZ_PATH, Check, CheckResult, readiness_route, render_checks, run_checks
    from ._logs import LogSettings, LogSettingsError, configure_logging, configure_tool_logging, log_context
    from ._metrics import LATENCY_BUCKETS_S, METRICS_PATH, Reading, ScrapedGauges, gauge, metrics_route
    from ._quiet import drop_debug_lines
    from ._redact import REDACTED, redact, redact_values, settings_secrets
    from ._throttle import FailureThrottle, client_network
    from ._unreachable import failure_reason, unreachable_reason
    from ._version import service_version

__all__ = [
    "LATENCY_BUCKETS_S",
    "METRICS_PATH",
    "READYZ_PATH",
    "REDACTED",
    "AccessLogMiddleware",
    "Check",
    "CheckResult",
    "FailureThrottle",
    "LogSettings",
    "LogSettingsError",
    "Reading",
    "ScrapedGauges",
    "client_network",
    "configure_logging",
    "configure_tool_logging",
    "drop_debug_lines",
    "failure_reason",
    "gauge",
    "log_context",
    "metrics_route",
    "readiness_route",
    "redact",
    "redact_values",
    "render_checks",
    "run_checks",
    "service_version",
    "settings_secrets",
    "unreachable_reason",
]

_EXPORTS = {
    "_access": ("AccessLogMiddleware",),
    "_health": ("READYZ_PATH", "Check", "CheckResult", "readiness_route", "render_checks", "run_checks"),
    "_logs": (
        "LogSettings",
        "LogSettingsError",
        "configure_logging",
        "configure_tool_logging",
        "log_context",
    ),
    "_quiet": ("drop_debug_lines",),
    "_metrics": ("LATENCY_BUCKETS_S", "METRICS_PATH", "Reading", "ScrapedGauges", "gauge", "metrics_route"),
    "_redact": ("REDACTED", "redact", "redact_values", "settings_secrets"),
    "_throttle": ("FailureThrottle", "client_network"),
    "_unreachable": ("failure_reason", "unreachable_reason"),
    "_version": ("service_version",),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
