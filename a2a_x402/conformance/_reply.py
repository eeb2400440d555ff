"""An A2A answer as the checks read it: a result or an error, the headers, the events, the evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._http import Exchange

__all__ = ["ErrorAnswer", "Reply"]

JSON = Any


@dataclass(frozen=True, slots=True)
class ErrorAnswer:
    """An A2A error as the binding wrote it."""

    code: int | None = None
    """The JSON-RPC code (JSON-RPC bindings)."""
    http_status: int | None = None
    grpc_status: str | None = None
    reason: str = ""
    """The ``google.rpc.ErrorInfo`` reason, when the answer carried one."""
    message: str = ""
    info: dict[str, str] = field(default_factory=dict)
    """The ``ErrorInfo`` metadata (a string map), when the answer carried one: where an AP2 refusal names
    its ``ap2Error`` and error receipts (§20.6)."""


@dataclass
class Reply:
    """One answer: ``result`` or ``error``, the headers (gRPC: initial metadata), the exchange."""

    result: JSON = None
    error: ErrorAnswer | None = None
    headers: dict[str, str] = field(default_factory=dict)
    exchange: Exchange = field(default_factory=lambda: Exchange("(none)"))
    events: list[JSON] = field(default_factory=list)
    """The stream's events (streaming calls), results only."""

    @property
    def task(self) -> JSON:
        """The task of the result (``{"task": …}`` on 1.0, the bare task on 0.3, a task event), or None."""
        result = self.result
        if isinstance(result, dict) and isinstance(result.get("task"), dict):
            return result["task"]
        if isinstance(result, dict) and "status" in result and "id" in result:
            return result
        return None
