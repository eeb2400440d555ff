"""`x402-merchant ap2-keys rotate|retire`, run as an operator runs it (a real subprocess) beside a merchant
served for real: a rotated-in key signs the new checkouts once the merchant restarts, while an offer the old
key signed stays payable; a key is retired only once nothing it signed can still be paid; each mistake is
one line that changes nothing, and no key material is ever printed."""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.merchant._ap2_rotation import payable_offers, retire_key
from a2a_x402.payer import present_mandates, sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.ap2 import MERCHANT, OpenTerms, issue_open_mandates, new_key, public_jwks
from tests.fixtures.commands import Answer, Secrets, Snapshot, assert_mistake, assert_no_secret, run_command
from tests.fixtures.merchant import (
    MerchantStarter,
    MerchantWire,
    offered_terms,
    payment_message,
    user_message,
)
from tests.merchant.ap2.shop import with_mandates
from tests.merchant.ap2.support import claims_of, header_of, write_key
from tests.merchant.ap2.test_offer import checkout_of

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

ACME = ("0x976EA74026E726554dB657fA54763abd0C3a0aa9", 100_000)
GLOBEX = ("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955", 100_000)
JWKS_PATH = "/.well-known/ap2/acme/jwks.json"


def write_tenants(directory: Path, user_key: Any) -> Path:
    """acme in the embedded flow with `acme.pem`, trusting `user_key`'s surface; globex not in it."""
    (directory / "surface.jwks.json").write_text(json.dumps(public_jwks(user_key)))
    write_key(directory / "acme.pem")
    path = directory / "tenants.toml"
    path.write_text(
        "# the operator's comments stay\n"
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = {ACME[1]}\n\n'
        "[tenants.acme.ap2]  # the embedded flow\n"
        f'merchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}" }}\n'
        'checkout_keys = [\n  "acme.pem",  # the first key\n]\nissuers = ["surface.jwks.json"]\n\n'
        f'[tenants.globex]\npay_to = "{GLOBEX[0]}"\nprice = {GLOBEX[1]}\n'
    )
    return path


async def refused(
    workdir: Path, env: dict[str, str], files: Path, secrets_: Secrets, argv: list[str], *fragments: str
) -> str:
    """`x402-merchant ap2-keys argv` is refused in one line holding `fragments`, and nothing under `files`
    (the tenants and key files; not the database a merchant may be writing) was created or changed."""
    before = Snapshot(files)
    line = assert_mistake(await ap2_keys(workdir, env, *argv), *fragments, secrets_=secrets_)
    before.assert_unchanged()
    return line


async def ap2_keys(workdir: Path, env: dict[str, str], *args: str) -> Answer:
    return await run_command(["x402-merchant", "ap2-keys", *args], cwd=workdir, env=env)


def rotated_in(answer: Answer) -> tuple[Path, str]:
    """The key file a successful `rotate` wrote, and its kid, from its output."""
    assert answer.returncode == 0, answer.stderr
    found = re.search(r"new checkout key (\S+) \(kid ([A-Za-z0-9_-]+)\)", answer.stdout)
    assert found is not None, answer.stdout
    return Path(found[1]), found[2]


def new_key_files(directory: Path) -> set[Path]:
    """The key files `rotate` wrote in `directory`."""
    return set(directory.glob("acme-checkout-*"))


def key_material(directory: Path) -> dict[str, str]:
    """Every PEM key body under `directory`, which no output may hold any piece of."""
    return {
        path.name: "".join(line for line in path.read_text().splitlines() if "-----" not in line)
        for path in directory.glob("*.pem")
    }


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_rotate_keeps_old_offers_payable_and_retire_waits_for_them(
    start_merchant: MerchantStarter,
    database_url: str,
    tmp_path: Path,
    workdir: Path,
    chain: DevChain,
    known_secrets: Secrets,
) -> None:
    user_key = new_key("trusted-surface")
    files = tmp_path / "conf"
    files.mkdir()
    tenants = write_tenants(files, user_key)
    env = {"X402_TENANTS_FILE": str(tenants), "X402_DATABASE_URL": database_url}
    before = start_merchant(database_url, tenants_file=tenants)
    async with before.http() as http:
        old_task = (await MerchantWire(http, "jsonrpc", "acme").send(user_message()))["task"]
        [old_kid] = [key["kid"] for key in (await http.get(JWKS_PATH)).json()["keys"]]
    old_checkout = checkout_of(old_task)
    assert old_checkout is not None and header_of(old_checkout)["kid"] == old_kid

    # Two rotations: the newest key signs, and the one between signs nothing.
    rotated = await ap2_keys(workdir, env, "rotate", "--tenant", "acme")
    middle_file, _ = rotated_in(rotated)
    unused = await ap2_keys(workdir, env, "rotate", "--tenant", "acme")
    newest_file, newest_kid = rotated_in(unused)
    assert {middle_file, newest_file} == new_key_files(files)
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 for path in (middle_file, newest_file))
    assert_no_secret([rotated.stdout, rotated.stderr, unused.stdout, unused.stderr], key_material(files))
    assert f'  + ["{newest_file.name}", "{middle_file.name}", "acme.pem"]' in unused.stdout
    text = tenants.read_text()
    assert text.startswith("# the operator's comments stay\n") and "# the embedded flow" in text

    # The merchant restarts on the edited file: new checkouts are the newest key's, all keys are published.
    before.stop()
    after = start_merchant(database_url, tenants_file=tenants)
    now = int(time.time())
    payer_key = chain.new_payer()
    async with after.http() as http:
        published = [key["kid"] for key in (await http.get(JWKS_PATH)).json()["keys"]]
        assert published[0] == newest_kid and published[-1] == old_kid and len(published) == 3
        wire = MerchantWire(http, "jsonrpc", "acme")
        new_task = (await wire.send(user_message()))["task"]
        new_checkout = checkout_of(new_task)
        assert new_checkout is not None and header_of(new_checkout)["kid"] == newest_kid

        # The key that signed nothing goes at once; the old one, whose offer can still be paid, stays.
        dropped = await ap2_keys(workdir, env, "retire", "--tenant", "acme", "--key", str(middle_file))
        assert dropped.returncode == 0, dropped.stderr
        assert "retired checkout key" in dropped.stdout
        await refused(
            workdir,
            env,
            files,
            known_secrets,
            ["retire", "--tenant", "acme", "--key", "acme.pem"],
            f"(kid {old_kid}) signed 1 offer(s) of tenant acme that can still be paid",
        )

        # The offer the old key signed is paid with mandates naming its checkout, after the rotation.
        [entry] = offered_terms(old_task).accepts
        assert entry.extra is not None
        opened = issue_open_mandates(user_key, new_key(), OpenTerms(), now=now)
        paid = sign_payment(payer_key, entry).to_json_dict()
        mandates = present_mandates(opened, old_checkout, paid, MERCHANT.id, entry.extra["offerId"], now=now)
        done = (await wire.send(with_mandates(payment_message(old_task["id"], paid), mandates)))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"

    # Paid, but its checkout has not expired yet: still refused. Once it has, the key may go.
    retire_old = ["retire", "--tenant", "acme", "--key", str(files / "acme.pem")]
    await refused(workdir, env, files, known_secrets, retire_old, "can still be paid")
    engine = create_engine(database_url)
    try:
        expired = claims_of(old_checkout)["exp"] + 1
        gone = await payable_offers(engine, "acme", old_kid, now=expired)
        assert (gone.count, gone.last_exp) == (0, None)
        # A payment still being taken under an expired checkout keeps its key: its round has not ended.
        async with engine.begin() as connection:
            await connection.execute(
                sa.text("UPDATE payment_offers SET state = 'settling' WHERE task_id = :id"),
                {"id": new_task["id"]},
            )
        later = claims_of(new_checkout)["exp"] + 1
        taking = await payable_offers(engine, "acme", newest_kid, now=later)
        assert (taking.count, taking.last_exp) == (1, None)
    finally:
        await engine.dispose()
    change = retire_key(tenants, "acme", "acme.pem", lambda kid: gone)
    assert (change.kid, change.after) == (old_kid, (newest_file.name,))
    assert f'checkout_keys = ["{newest_file.name}"]' in tenants.read_text()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_each_mistake_is_one_line_and_changes_nothing(
    database_url: str, tmp_path: Path, workdir: Path, known_secrets: Secrets
) -> None:
    files = tmp_path / "conf"
    files.mkdir()
    tenants = write_tenants(files, new_key("surface"))
    env = {"X402_TENANTS_FILE": str(tenants), "X402_DATABASE_URL": database_url}
    secrets_ = known_secrets
    cases: list[tuple[list[str], dict[str, str], tuple[str, ...]]] = [
        (["rotate", "--tenant", "nobody"], env, ("unknown tenant 'nobody'",)),
        (["rotate", "--tenant", "globex"], env, ("tenant globex has no [tenants.globex.ap2] table",)),
        (["rotate", "--tenant", "acme"], {"X402_DATABASE_URL": database_url}, ("X402_TENANTS_FILE",)),
        (["rotate"], env, ("--tenant",)),
        (["retire", "--tenant", "acme", "--key", "acme.pem"], env, ("is the key that signs", "rotate first")),
        (["retire", "--tenant", "acme", "--key", "nope.pem"], env, ("nope.pem is not a checkout key",)),
        (["retire", "--tenant", "acme"], env, ("--key",)),
    ]
    for argv, settings, fragments in cases:
        await refused(workdir, settings, files, secrets_, argv, *fragments)

    # A file the merchant would refuse, and one whose keys are not an array under the table: no key is left.
    tenants.write_text(
        tenants.read_text().replace(
            f"price = {ACME[1]}\n\n[tenants.acme.ap2]", 'price = "x"\n\n[tenants.acme.ap2]'
        )
    )
    rotate = ["rotate", "--tenant", "acme"]
    await refused(workdir, env, files, secrets_, rotate, "tenants.acme.price")
    inline = files / "inline.toml"
    inline.write_text(
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = 1\n'
        f'ap2 = {{ merchant = {{ id = "a.example", name = "A" }}, checkout_keys = ["acme.pem"] }}\n'
    )
    await refused(
        workdir,
        {**env, "X402_TENANTS_FILE": str(inline)},
        files,
        secrets_,
        rotate,
        "cannot find `checkout_keys = [...]` under [tenants.acme.ap2]",
    )
    assert not new_key_files(files)
