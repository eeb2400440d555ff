"""Database plumbing shared by the facilitator and the merchant.

One engine factory for SQLite (the embedded default) and PostgreSQL, and the Alembic runner that is the
only way tables are made. Callers own their sessions and transactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._engine import DEFAULT_DATABASE_URL, create_engine, normalize_url, printable_url
    from ._errors import DatabaseUnavailableError, DatabaseUrlError, MissingDatabaseError, SchemaOutdatedError
    from ._schema import (
        BranchState,
        SchemaUpgrade,
        checking_engine,
        current_revisions,
        ensure_schema_current,
        schema_state,
        upgrade_schema,
    )
    from ._snapshot import snapshot
    from ._types import Uint256, UtcDateTime
    from ._writes import write, write_transaction

__all__ = [
    "BranchState",
    "DEFAULT_DATABASE_URL",
    "DatabaseUnavailableError",
    "DatabaseUrlError",
    "MissingDatabaseError",
    "SchemaOutdatedError",
    "SchemaUpgrade",
    "Uint256",
    "UtcDateTime",
    "checking_engine",
    "create_engine",
    "current_revisions",
    "ensure_schema_current",
    "normalize_url",
    "printable_url",
    "schema_state",
    "snapshot",
    "upgrade_schema",
    "write",
    "write_transaction",
]

_EXPORTS = {
    "_engine": ("DEFAULT_DATABASE_URL", "create_engine", "normalize_url", "printable_url"),
    "_errors": (
        "DatabaseUnavailableError",
        "DatabaseUrlError",
        "MissingDatabaseError",
        "SchemaOutdatedError",
    ),
    "_schema": (
        "BranchState",
        "SchemaUpgrade",
        "checking_engine",
        "current_revisions",
        "ensure_schema_current",
        "schema_state",
        "upgrade_schema",
    ),
    "_snapshot": ("snapshot",),
    "_types": ("Uint256", "UtcDateTime"),
    "_writes": ("write", "write_transaction"),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)
