"""What can be wrong with the database a setting names, each message safe to show (no password)."""

from __future__ import annotations

__all__ = ["DatabaseUnavailableError", "DatabaseUrlError", "MissingDatabaseError", "SchemaOutdatedError"]


class DatabaseUrlError(ValueError):
    """The database URL cannot be parsed or names an unsupported database."""


class DatabaseUnavailableError(RuntimeError):
    """The database cannot be opened: the server is unreachable, refuses the login, lacks the database, or the
    file is not a database."""


class SchemaOutdatedError(RuntimeError):
    """The database schema is behind the code (or the database does not exist yet): run `db upgrade` first."""


class MissingDatabaseError(SchemaOutdatedError):
    """The SQLite file a URL names does not exist: `db upgrade` creates it."""

    def __init__(self, path: str) -> None:
        super().__init__(f"there is no database at {path}: run `db upgrade` first to create it")
        self.path = path
