"""`x402-merchant differences list|ack|book` as an operator runs them (real subprocesses, SQLite and
PostgreSQL, real anvil): an open difference is listed until it is acknowledged with a note or booked to
the tenant whose payTo was paid; a second close, a blank or overlong note, an unknown id or tenant, and a
difference that is no payment to book are refused in one line and change nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from a2a_x402.devchain import DevChain
from a2a_x402.merchant.differences import MAX_NOTE_CHARS, DifferenceState, Sighting
from a2a_x402.merchant.settings import MerchantSettings
from tests.fixtures.commands import Answer, assert_mistake, run_command
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, ledger_entries

from .helpers import Passes, unexplained_payment


def _env(settings: MerchantSettings) -> dict[str, str]:
    """The merchant's settings as an operator's environment (`book` needs the network and the tenants)."""
    return {
        "X402_DATABASE_URL": settings.database_url,
        "X402_RPC_URL": settings.rpc_url,
        "X402_NETWORK": settings.network,
        "X402_ASSET": settings.asset,
        "X402_ASSET_NAME": settings.asset_name,
        "X402_ASSET_VERSION": settings.asset_version,
        "X402_PAY_TO": DEFAULT_PAY_TO,
        "X402_PRICE": "250000",
    }


async def _run(tmp_path: Path, settings: MerchantSettings, *argv: str) -> Answer:
    return await run_command(["x402-merchant", "differences", *argv], cwd=tmp_path, env=_env(settings))


async def test_an_open_difference_is_listed_until_acknowledged_and_a_second_close_is_refused(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> None:
    settings, nonce = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        await passes.run()
        (difference,) = await passes.all()
        listed = await _run(tmp_path, settings, "list")
        blank = await _run(tmp_path, settings, "ack", str(difference.id), "--note", "  ")
        long = await _run(tmp_path, settings, "ack", str(difference.id), "--note", "x" * (MAX_NOTE_CHARS + 1))
        unknown = await _run(tmp_path, settings, "ack", "999999", "--note", "whatever")
        acked = await _run(
            tmp_path, settings, "ack", str(difference.id), "--note", "a test transfer", "--by", "ops"
        )
        again = await _run(tmp_path, settings, "ack", str(difference.id), "--note", "twice")
        booked = await _run(tmp_path, settings, "book", str(difference.id), "--note", "after all")
        empty = await _run(tmp_path, settings, "list")
        everything = await _run(tmp_path, settings, "list", "--all")
        await passes.run()  # seen again: it stays acknowledged
        (closed,) = await passes.all()
    finally:
        await passes.aclose()

    assert listed.returncode == 0 and listed.stdout.startswith(f"{difference.id}  open  unbooked_payment  ")
    assert nonce in listed.stdout
    assert_mistake(blank, "a note is required")
    assert_mistake(long, f"longer than {MAX_NOTE_CHARS} characters")
    assert_mistake(unknown, "difference 999999: no such open difference")
    assert (acked.returncode, acked.stdout) == (0, f"difference {difference.id} acknowledged\n")
    assert_mistake(again, f"difference {difference.id}: no such open difference")
    assert_mistake(booked, f"difference {difference.id}: no such open difference")
    assert empty.stdout == "no open differences: the records agree with the chain\n"
    assert (
        f"{difference.id}  acknowledged by ops at " in everything.stdout
        and "a test transfer" in everything.stdout
    )
    assert (closed.state, closed.note, closed.resolved_by) == (
        DifferenceState.ACKNOWLEDGED,
        "a test transfer",
        "ops",
    )
    assert closed.last_seen > difference.last_seen
    assert await ledger_entries(database_url) == []


async def test_a_payment_no_offer_explains_is_booked_to_the_tenant_once(
    database_url: str,
    chain: DevChain,
    start_merchant: MerchantStarter,
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> None:
    settings, _ = await unexplained_payment(database_url, chain, start_merchant, new_payer)
    passes = Passes(settings)
    try:
        await passes.run()
        (payment,) = await passes.all()
        # A difference that is no payment to the payee: never bookable.
        await passes.store.sighted([Sighting(kind="reorged_out", key="entry-x", detail="x", tenant="")])
        (other,) = [d for d in await passes.all() if d.kind == "reorged_out"]
        stranger = await _run(
            tmp_path, settings, "book", str(payment.id), "--tenant", "acme", "--note", "mine"
        )
        not_payment = await _run(tmp_path, settings, "book", str(other.id), "--note", "book it")
        booked = await _run(tmp_path, settings, "book", str(payment.id), "--note", "a customer paid by hand")
        replay = await _run(tmp_path, settings, "book", str(payment.id), "--note", "again")
        after = await passes.run()
        stored = await passes.store.get(payment.id)
    finally:
        await passes.aclose()

    assert_mistake(stranger, "unknown tenant 'acme'")
    assert_mistake(not_payment, "only a payment no offer explains can be booked")
    assert booked.returncode == 0, booked
    (entry,) = await ledger_entries(database_url)
    assert (entry.tenant, entry.pay_to, entry.amount, entry.task_id) == (
        "",
        DEFAULT_PAY_TO,
        250_000,
        f"difference-{payment.id}",
    )
    entry_id = booked.stdout.removeprefix(f"difference {payment.id} booked to tenant default as ").strip()
    assert entry_id and "\n" not in entry_id, booked.stdout
    assert_mistake(replay, f"difference {payment.id}: no such open difference")
    assert after.differences == [] and len(await ledger_entries(database_url)) == 1
    assert stored is not None and stored.state is DifferenceState.BOOKED
    assert stored.note == f"a customer paid by hand (booked as {entry_id})"
