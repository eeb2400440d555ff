"""`metering`, the check `x402-merchant check` (so `serve`) and `/readyz` share: with a tenant metering a
skill, the facilitator must settle `upto` payments on the network, else it says so before the first metered
request, naming the skills. Caused for real: the dev chain with its x402 upto proxy's code removed (the
in-process facilitator then lists no `upto`), a facilitator on 127.0.0.1 whose `/supported` lists only
`exact`, and a port where nothing answers."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from a2a_x402.devchain import UPTO_PERMIT2_PROXY_ADDRESS, DevChain
from a2a_x402.merchant._metering import metering_check, remote_lists_upto
from a2a_x402.merchant.cli import main
from tests.fixtures.checks import chain_env, problems, run_check, serve_refused
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, RunningMerchant
from tests.fixtures.servers import free_port

from .payments.test_metered_terms import facilitator_without_upto

_SKILLS = "2 metered skill(s) (default.text-stats, acme.text-stats)"
_LACKS = "the chain lacks Permit2 or the x402 upto proxy"


def _metered_tenants(tmp_path: Path) -> Path:
    """Two tenants metering text-stats, and one pricing it fixed."""
    path = tmp_path / "tenants.toml"
    path.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1000\n'
        "[default.metered_skills]\ntext-stats = 500000\n\n"
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 7000\n'
        "[tenants.acme.metered_skills]\ntext-stats = 90000\n\n"
        f'[tenants.globex]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 3000\n'
    )
    return path


def _env(chain: DevChain, database_url: str, tenants: Path | None, **overrides: str) -> dict[str, str]:
    merchant = {
        "X402_ASSET": chain.asset,
        "X402_ASSET_NAME": chain.asset_name,
        "X402_ASSET_VERSION": chain.asset_version,
        "X402_PAY_TO": DEFAULT_PAY_TO,
        **({"X402_TENANTS_FILE": str(tenants)} if tenants is not None else {}),
    }
    return chain_env(chain, database_url, **{**merchant, **overrides})


def _remove_upto_proxy(chain: DevChain) -> None:
    """The chain as one without x402's upto proxy (the `chain` fixture's snapshot restores it)."""
    chain.rpc.call("anvil_setCode", [UPTO_PERMIT2_PROXY_ADDRESS, "0x"])


async def _readiness(merchant: RunningMerchant) -> tuple[int, list[str], dict[str, dict[str, object]]]:
    async with httpx.AsyncClient(base_url=merchant.base_url, timeout=HANG_S) as client:
        body = (response := await client.get("/readyz")).json()
    return response.status_code, body["failing"], body["checks"]


@pytest.mark.usefixtures("clean_env")
def test_metered_skills_on_a_chain_with_the_upto_proxy_pass(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    code, rows = run_check(main, _env(chain, sqlite_url, _metered_tenants(tmp_path)))

    assert (code, problems(rows)) == (0, {})
    assert rows["metering"] == (
        "ok",
        f"the in-process facilitator settles upto on {chain.network} for {_SKILLS}",
    )


@pytest.mark.usefixtures("clean_env")
def test_without_metered_skills_there_is_no_metering_check(chain: DevChain, sqlite_url: str) -> None:
    _remove_upto_proxy(chain)

    code, rows = run_check(main, _env(chain, sqlite_url, None))

    assert (code, "metering" in rows) == (0, False)


@pytest.mark.usefixtures("clean_env")
def test_a_chain_without_the_upto_proxy_is_a_fatal_problem_naming_the_metered_skills(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    _remove_upto_proxy(chain)
    env = _env(chain, sqlite_url, _metered_tenants(tmp_path), X402_PORT=str(free_port()))

    code, rows = run_check(main, env)
    served = serve_refused("x402-merchant", env, tmp_path)

    detail = (
        f"the in-process facilitator settles no upto payments on {chain.network} ({_LACKS}): "
        f"{_SKILLS} cannot be offered"
    )
    assert (code, problems(rows)) == (1, {"metering": detail})
    assert (served.returncode, served.stdout) == (2, "")
    assert served.stderr.splitlines() == [f"x402-merchant: not starting: metering: {detail}"]


@pytest.mark.usefixtures("clean_env")
def test_a_remote_facilitator_listing_no_upto_is_a_fatal_problem(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    with facilitator_without_upto(chain) as url:
        env = _env(chain, sqlite_url, _metered_tenants(tmp_path), X402_FACILITATOR_URL=url)
        code, rows = run_check(main, env)

    assert (code, problems(rows)) == (
        1,
        {"metering": f"{url} settles no upto payments on {chain.network}: {_SKILLS} cannot be offered"},
    )
    assert rows["facilitator"][0] == "ok"  # it settles exact on the network: only metering is refused


async def test_a_remote_facilitator_that_cannot_be_asked_is_a_problem_but_not_fatal() -> None:
    absent = f"http://127.0.0.1:{free_port()}"
    check = metering_check(
        ["default.text-stats"],
        remote_lists_upto(absent, "eip155:84532", None),
        where="the facilitator",
        network="eip155:84532",
    )
    assert check is not None

    result = await check.probe()

    assert (result.name, result.ok, result.fatal) == ("metering", False, False)
    assert result.detail == (
        "the facilitator could not be asked whether it settles upto (connection refused): "
        "1 metered skill(s) (default.text-stats) cannot be offered now"
    )


async def test_readiness_fails_while_the_in_process_facilitator_settles_no_upto(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    tenants = _metered_tenants(tmp_path)
    first = start_merchant(sqlite_url, tenants_file=tenants)
    ready = await _readiness(first)
    first.stop()  # its relayer key's lease is given back for the next one
    _remove_upto_proxy(chain)  # the facilitator reads the chain's contracts at its start

    status, failing, checks = await _readiness(start_merchant(sqlite_url, tenants_file=tenants))

    assert ready[:2] == (200, [])
    assert ready[2]["metering"]["detail"] == (
        f"the in-process facilitator settles upto on {chain.network} for {_SKILLS}"
    )
    assert (status, failing) == (503, ["metering"])
    assert checks["metering"]["detail"] == (
        f"the in-process facilitator settles no upto payments on {chain.network} ({_LACKS}): "
        f"{_SKILLS} cannot be offered"
    )


async def test_readiness_fails_while_the_remote_facilitator_lists_no_upto(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    with facilitator_without_upto(chain) as url:
        merchant = start_merchant(sqlite_url, tenants_file=_metered_tenants(tmp_path), facilitator_url=url)
        status, failing, checks = await _readiness(merchant)

    assert (status, failing) == (503, ["metering"])
    assert checks["metering"]["detail"] == (
        f"the facilitator at X402_FACILITATOR_URL settles no upto payments on {chain.network}: "
        f"{_SKILLS} cannot be offered"
    )
    assert url not in str(checks)  # /readyz answers without authentication: the URL is not shown
