"""`x402-merchant callers create|list|revoke`, run as an operator runs it (a real subprocess)."""

from __future__ import annotations

from pathlib import Path

from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.storage import create_engine
from tests.fixtures.commands import assert_mistake, assert_no_secret, run_command


async def authenticates(database_url: str, token: str) -> str | None:
    """The principal `token` authenticates, if any."""
    engine = create_engine(database_url)
    try:
        caller = await CallerKeys(engine).authenticate(token)
        return caller.principal if caller is not None else None
    finally:
        await engine.dispose()


async def test_a_key_is_shown_once_listed_without_it_and_revoked_for_good(
    sqlite_url: str, tmp_path: Path
) -> None:
    env = {"X402_DATABASE_URL": sqlite_url}

    async def callers(*args: str) -> tuple[int, str, str]:
        answer = await run_command(["x402-merchant", "callers", *args], cwd=tmp_path, env=env)
        return answer.returncode, answer.stdout, answer.stderr

    code, out, _ = await callers("create", "alice")
    assert code == 0, out
    token = out.splitlines()[-1]
    assert token.startswith("x402k_") and len(token) >= 48
    assert await authenticates(sqlite_url, token) == "key:alice"

    code, listed, _ = await callers("list")
    assert code == 0 and "alice" in listed and "active" in listed
    assert_no_secret([listed], {"key": token})

    taken = await run_command(["x402-merchant", "callers", "create", "alice"], cwd=tmp_path, env=env)
    assert_mistake(taken, "alice", "exists already")
    badly_named = await run_command(["x402-merchant", "callers", "create", "a b"], cwd=tmp_path, env=env)
    assert_mistake(badly_named, "caller name")
    elsewhere = await run_command(
        ["x402-merchant", "callers", "create", "bob", "--tenant", "acme"], cwd=tmp_path, env=env
    )
    assert_mistake(elsewhere, "acme")

    code, out, _ = await callers("revoke", "alice")
    assert code == 0, out
    assert await authenticates(sqlite_url, token) is None
    again = await run_command(["x402-merchant", "callers", "revoke", "alice"], cwd=tmp_path, env=env)
    assert_mistake(again, "no active caller")
    code, listed, _ = await callers("list")
    assert "alice" in listed and "revoked" in listed
    reissued = await run_command(["x402-merchant", "callers", "create", "alice"], cwd=tmp_path, env=env)
    assert_mistake(reissued, "not reissued")
