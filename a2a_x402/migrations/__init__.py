"""Alembic migrations: the only way this project's tables are made.

Two branches share one version table: `facilitator` (settlement claims) and `merchant` (tasks, ledger,
webhook outbox). A standalone facilitator upgrades its branch only; a merchant upgrades both.
"""
