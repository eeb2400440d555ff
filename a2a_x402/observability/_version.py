"""The version of the installed distribution, for startup lines and `/metrics`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["DISTRIBUTION", "service_version"]

DISTRIBUTION = "a2a-x402-merchant"


def service_version() -> str:
    """The installed version of the project, or `unknown` when it runs from a source tree not installed."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
