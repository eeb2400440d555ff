"""The books' invariants, checked from the stored rows (tests run it after every ledger test).

1. Every entry has exactly two lines, one debit and one credit of the entry's amount, on accounts of the
   entry's tenant, network and asset: a settlement debits the payer's account and credits revenue, a
   reversal the opposite. So every entry balances.
2. Each account's cumulative totals equal the sums of its lines, and each line's `balance_after` is the
   running balance of its account in sequence order.
3. Hence, per network and asset, Σ debits == Σ credits over all accounts.
4. A reversal reverses a settlement of the same authorization and amount; a finalized entry is a settlement.
5. `ledger_unfinalized` lists exactly the settlements neither finalized nor reversed, with their sequence.

Reads every row, so it is O(size of the ledger): an audit and test tool, not a request-path check.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import snapshot

from ._errors import LedgerInvariantError
from ._models import LedgerAccount, LedgerEntry, LedgerFinalization, LedgerLine, LedgerUnfinalized

__all__ = ["check_invariants"]


async def check_invariants(engine: AsyncEngine) -> None:
    """Check every invariant above over the whole database.

    Raises:
        LedgerInvariantError: listing every violation found.
    """
    async with snapshot(engine) as connection:
        entries = {row.id: row for row in await connection.execute(sa.select(LedgerEntry.__table__))}
        accounts = {row.id: row for row in await connection.execute(sa.select(LedgerAccount.__table__))}
        lines = (await connection.execute(sa.select(LedgerLine.__table__))).all()
        finalized = (
            (await connection.execute(sa.select(LedgerFinalization.__table__.c.entry_id))).scalars().all()
        )
        watched = {
            row.entry_id: row.sequence
            for row in await connection.execute(sa.select(LedgerUnfinalized.__table__))
        }
    problems: list[str] = []
    by_entry: dict[str, list[Any]] = defaultdict(list)
    for line in lines:
        by_entry[line.entry_id].append(line)
    for entry in entries.values():
        problems += _entry_problems(entry, by_entry.get(entry.id, []), accounts, entries)
    problems += _account_problems(accounts, lines, entries)
    problems += _global_problems(accounts)
    problems += [
        f"finalization of {entry_id}: not a settlement entry"
        for entry_id in finalized
        if entry_id not in entries or entries[entry_id].kind != "settlement"
    ]
    problems += _watch_problems(entries, set(finalized), watched)
    if problems:
        raise LedgerInvariantError(problems)


def _entry_problems(
    entry: Any, lines: list[Any], accounts: dict[str, Any], entries: dict[str, Any]
) -> list[str]:
    where = f"entry {entry.id}"
    debits = [line for line in lines if line.direction == "debit"]
    credits = [line for line in lines if line.direction == "credit"]
    if len(lines) != 2 or len(debits) != 1 or len(credits) != 1:
        return [f"{where}: has {len(debits)} debit and {len(credits)} credit lines (want one of each)"]
    problems: list[str] = []
    if sum(line.amount for line in debits) != sum(line.amount for line in credits):
        problems.append(f"{where}: debits and credits differ")
    if debits[0].amount != entry.amount:
        problems.append(f"{where}: lines move {debits[0].amount}, the entry says {entry.amount}")
    debit, credit = accounts[debits[0].account_id], accounts[credits[0].account_id]
    for account in (debit, credit):
        if (account.tenant, account.network, account.asset) != (entry.tenant, entry.network, entry.asset):
            problems.append(f"{where}: line on account {account.id} of another tenant, network or asset")
    expected = ("payer", "revenue") if entry.kind == "settlement" else ("revenue", "payer")
    if (debit.kind, credit.kind) != expected or entry.payer not in (debit.holder, credit.holder):
        problems.append(
            f"{where}: a {entry.kind} must debit {expected[0]} and credit {expected[1]} of its payer"
        )
    if entry.kind == "reversal":
        original = entries.get(entry.reverses_entry_id)
        same = ("chain_id", "asset", "payer", "nonce", "amount", "tenant")
        if original is None or original.kind != "settlement":
            problems.append(f"{where}: reverses {entry.reverses_entry_id}, which is not a settlement")
        elif any(getattr(original, name) != getattr(entry, name) for name in same):
            problems.append(f"{where}: does not match the settlement it reverses")
    return problems


def _account_problems(accounts: dict[str, Any], lines: Sequence[Any], entries: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    by_account: dict[str, list[Any]] = defaultdict(list)
    for line in lines:
        by_account[line.account_id].append(line)
    for account in accounts.values():
        own = sorted(by_account.get(account.id, []), key=lambda line: entries[line.entry_id].sequence)
        debits = credits = 0
        for line in own:
            debits += line.amount if line.direction == "debit" else 0
            credits += line.amount if line.direction == "credit" else 0
            running = credits - debits if account.normal_side == "credit" else debits - credits
            if line.balance_after != running:
                problems.append(
                    f"line {line.id}: balance_after {line.balance_after}, running balance {running}"
                )
        if (account.debits_posted, account.credits_posted) != (debits, credits):
            problems.append(
                f"account {account.id}: totals {account.debits_posted}/{account.credits_posted}, "
                f"lines sum to {debits}/{credits}"
            )
    return problems


def _watch_problems(entries: dict[str, Any], finalized: set[str], watched: dict[str, int]) -> list[str]:
    reversed_ = {entry.reverses_entry_id for entry in entries.values() if entry.kind == "reversal"}
    open_ = {
        entry.id: entry.sequence
        for entry in entries.values()
        if entry.kind == "settlement" and entry.id not in finalized and entry.id not in reversed_
    }
    if watched == open_:
        return []
    return [
        f"unfinalized list: {sorted(watched.items() - open_.items())} listed, "
        f"{sorted(open_.items() - watched.items())} missing"
    ]


def _global_problems(accounts: dict[str, Any]) -> list[str]:
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for account in accounts.values():
        totals[(account.network, account.asset)][0] += account.debits_posted
        totals[(account.network, account.asset)][1] += account.credits_posted
    return [
        f"{network} {asset}: Σ debits {debits} != Σ credits {credits}"
        for (network, asset), (debits, credits) in totals.items()
        if debits != credits
    ]
