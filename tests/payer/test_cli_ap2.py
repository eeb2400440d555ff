"""``x402-pay --ap2-mandates DIR --ap2-agent-key FILE`` as a subprocess against the real merchant: three
runs sharing one usage file pay within the open mandate's budget, the fourth is refused before anything is
signed; nothing of a mandate or of the agent key is printed, at DEBUG either; mistakes are one line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.payer import OpenMandates
from tests.fixtures._migrated import migrated_sqlite
from tests.fixtures.ap2 import issue_open_mandates, new_key
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.merchant import MerchantStarter, RunningMerchant

from .ap2_shop import BUDGET, PRICE, TEXT
from .test_cli import x402_pay

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)
pytestmark = pytest.mark.timeout(120)


def write_mandates(folder: Path, opened: OpenMandates) -> tuple[Path, Path]:
    mandates = folder / "mandates"
    mandates.mkdir()
    (mandates / "checkout.sdjwt").write_text(opened.checkout + "\n")
    (mandates / "payment.sdjwt").write_text(opened.payment + "\n")
    key = folder / "agent.jwk"
    key.write_text(json.dumps(dict(opened.agent_key)))
    return mandates, key


def secrets_of(opened: OpenMandates) -> dict[str, str]:
    """What no output may show a piece of: the agent key, and each mandate's signature and disclosures."""
    found = {"agent key": opened.agent_key["d"]}
    for name, token in (("checkout", opened.checkout), ("payment", opened.payment)):
        jwt, *disclosures = [part for part in token.split("~") if part]
        found[f"open {name} mandate signature"] = jwt.rsplit(".", 1)[1]
        found.update({f"open {name} mandate disclosure {i}": d for i, d in enumerate(disclosures)})
    return found


async def test_x402_pay_pays_within_the_budget_and_refuses_past_it_printing_no_mandate(
    shop: RunningMerchant, chain: DevChain, user_key: Any, tmp_path: Path
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    mandates, agent_key = write_mandates(tmp_path, opened)
    key_file = tmp_path / "payer.key"
    key_file.write_text(chain.new_payer() + "\n")
    args = [
        "--card-url",
        shop.base_url,
        "--tenant",
        "acme",
        "--key-file",
        str(key_file),
        "--max-amount",
        str(PRICE),
        "--allow-insecure-jku",
        "--ap2-mandates",
        str(mandates),
        "--ap2-agent-key",
        str(agent_key),
        "--ap2-usage-file",
        str(tmp_path / "uses.db"),
        TEXT,
    ]
    outputs = []
    for run in range(3):
        env = {"X402_LOG_LEVEL": "DEBUG"} if run == 0 else {}
        status, out, err = await x402_pay(*args, env=env)
        assert status == 0, err
        assert "ap2: paid under the user's open mandates" in out
        assert "artifact: text-stats" in out and "AP2 checkout" not in out
        outputs += [out, err]
    assert "HTTP Request: POST" in outputs[1]  # the DEBUG run wrote its lines

    status, out, err = await x402_pay(*args, env={})
    assert status == 1
    assert "Error: mandate_constraint: payment.budget:" in err and "nothing was signed" in err
    assert "signed:" not in out
    assert_no_secret([*outputs, out, err], secrets_of(opened))


@pytest.mark.parametrize(
    ("files", "says"),
    [
        ({"mandates"}, "give --ap2-mandates and --ap2-agent-key together"),
        ({"key"}, "give --ap2-mandates and --ap2-agent-key together"),
        ({"mandates", "bad-key"}, "is not an EC P-256 private key as a JWK"),
        ({"bad-mandates", "key"}, "is not an open mandate as issued"),
    ],
)
async def test_x402_pay_refuses_ap2_mistakes_in_one_line_before_any_request(
    chain: DevChain, user_key: Any, tmp_path: Path, files: set[str], says: str
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    mandates, agent_key = write_mandates(tmp_path, opened)
    if "bad-key" in files:
        agent_key.write_text(json.dumps({**opened.agent_key, "crv": "P-384"}))
    if "bad-mandates" in files:
        (mandates / "payment.sdjwt").write_text("not a mandate " + opened.payment[:40])
    args = ["--card-url", "http://127.0.0.1:9", "--key", "0x" + "11" * 32]
    if files & {"mandates", "bad-mandates"}:
        args += ["--ap2-mandates", str(mandates)]
    if files & {"key", "bad-key"}:
        args += ["--ap2-agent-key", str(agent_key)]
    status, out, err = await x402_pay(*args, TEXT, env={})
    assert status == 2, err
    assert says in err and len(err.strip().splitlines()) == 1
    assert_no_secret([out, err], secrets_of(opened))


async def test_x402_pay_ap2_issue_open_issues_test_mandates_a_merchant_trusting_them_takes(
    shop: RunningMerchant, start_merchant: MerchantStarter, chain: DevChain, tmp_path: Path
) -> None:
    issued = tmp_path / "issued"
    status, out, err = await x402_pay(
        "ap2",
        "issue-open",
        "--card-url",
        shop.base_url,
        "--tenant",
        "acme",
        "--budget",
        "0.20",
        "--max",
        "0.10",
        "--out",
        str(issued),
        "--allow-insecure-jku",
        env={},
    )
    assert status == 0, err
    assert "issued TEST open mandates: for trying things out only" in out
    assert "at most 10 cents a payment, 20 cents in all" in out
    assert (issued / "agent.jwk").stat().st_mode & 0o777 == 0o600
    agent_key = json.loads((issued / "agent.jwk").read_text())
    tokens = {n: (issued / f"{n}.sdjwt").read_text().strip() for n in ("checkout", "payment")}
    opened = OpenMandates(checkout=tokens["checkout"], payment=tokens["payment"], agent_key=agent_key)
    assert_no_secret([out, err], secrets_of(opened))
    again, _, says = await x402_pay(
        *["ap2", "issue-open", "--card-url", shop.base_url, "--tenant", "acme"],
        *["--budget", "1", "--max", "1", "--out", str(issued), "--allow-insecure-jku"],
        env={},
    )
    assert again == 2 and "exists" in says  # a folder is never written over

    # The same tenant, trusting the issued key set: it takes them.
    tenants = (
        (tmp_path / "tenants.toml").read_text().replace("surface.jwks.json", str(issued / "issuer.jwks.json"))
    )
    (tmp_path / "trusting.toml").write_text(tenants)
    trusting = start_merchant(
        await migrated_sqlite(tmp_path / "trusting.db"), tenants_file=tmp_path / "trusting.toml"
    )
    key_file = tmp_path / "payer.key"
    key_file.write_text(chain.new_payer() + "\n")
    status, out, err = await x402_pay(
        *["--card-url", trusting.base_url, "--tenant", "acme", "--key-file", str(key_file)],
        *[
            "--allow-insecure-jku",
            "--ap2-mandates",
            str(issued),
            "--ap2-agent-key",
            str(issued / "agent.jwk"),
        ],
        TEXT,
        env={},
    )
    assert status == 0, err
    assert "ap2: paid under the user's open mandates" in out
