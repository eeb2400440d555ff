"""A merchant serving the embedded flow for real, and what its tests read of its answers: the tenants
file (acme takes mandates, strict requires them, the default tenant has no `ap2`), the mandates part of a
payment message, the receipts a status or a refusal carries, verified with the tenant's published JWK
Set, and the rows a refusal must not leave behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from joserfc import jwt
from joserfc.jwk import KeySet

from a2a_x402.extension import (
    AP2_CHECKOUT_RECEIPT_KEY,
    AP2_PAYMENT_RECEIPT_KEY,
    Ap2Mandates,
)
from a2a_x402.merchant.ap2 import mandate_reference
from a2a_x402.storage import create_engine
from tests.fixtures.ap2 import MERCHANT, public_jwks
from tests.fixtures.merchant import DEFAULT_PAY_TO
from tests.merchant.ap2.support import write_key

ACME = ("0x976EA74026E726554dB657fA54763abd0C3a0aa9", 100_000)  # 10 cents
STRICT = ("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955", 100_000)
JSON = dict[str, Any]


def write_tenants(directory: Path, user_key: Any) -> Path:
    """The tenants file: acme takes mandates its trusted surface (`user_key`) issued, strict requires
    mandates, the default tenant offers no embedded flow."""
    (directory / "surface.jwks.json").write_text(json.dumps(public_jwks(user_key)))
    write_key(directory / "acme.pem")
    write_key(directory / "strict.pem")
    website = f', website = "{MERCHANT.website}"' if MERCHANT.website else ""
    path = directory / "tenants.toml"
    path.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 250000\n\n'
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = {ACME[1]}\n\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}"{website} }}\n'
        'checkout_keys = ["acme.pem"]\nissuers = ["surface.jwks.json"]\n\n'
        f'[tenants.strict]\npay_to = "{STRICT[0]}"\nprice = {STRICT[1]}\n\n'
        '[tenants.strict.ap2]\nmerchant = { id = "strict.example", name = "Strict" }\n'
        'checkout_keys = ["strict.pem"]\nissuers = ["surface.jwks.json"]\nrequired = true\n'
    )
    return path


def with_mandates(message: JSON, mandates: Ap2Mandates) -> JSON:
    """`message` with the mandates data part of §20.4 beside its text."""
    message["parts"].append({"data": mandates.to_wire(), "mediaType": "application/json"})
    return message


async def rows(database_url: str, table: str) -> list[Any]:
    """Every row of `table`."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return list((await connection.execute(sa.text(f"SELECT * FROM {table}"))).all())  # noqa: S608
    finally:
        await engine.dispose()


async def verified_receipts(
    http: httpx.AsyncClient, tenant: str, checkout_receipt: str, payment_receipt: str, mandates: Ap2Mandates
) -> tuple[JSON, JSON]:
    """The claims of a round's receipts, each verified with a key of the tenant's published JWK Set, and
    each answering the mandate sent (its `reference`)."""
    served = await http.get(f"/.well-known/ap2/{tenant}/jwks.json")
    keys = KeySet.import_key_set(served.json())
    checkout = jwt.decode(checkout_receipt, keys, algorithms=["ES256"]).claims
    payment = jwt.decode(payment_receipt, keys, algorithms=["ES256"]).claims
    assert checkout["reference"] == mandate_reference(mandates.checkout_mandate)
    assert payment["reference"] == mandate_reference(mandates.payment_mandate)
    return checkout, payment


def status_receipts(task: JSON) -> tuple[str, str] | None:
    """The receipts part of a task's status message (§20.6), its exact shape checked; None without one."""
    parts = [
        part
        for part in task["status"]["message"]["parts"]
        if "data" in part and AP2_CHECKOUT_RECEIPT_KEY in part["data"]
    ]
    if not parts:
        return None
    [part] = parts
    assert part["mediaType"] == "application/json"
    assert sorted(part["data"]) == [AP2_CHECKOUT_RECEIPT_KEY, AP2_PAYMENT_RECEIPT_KEY]
    return part["data"][AP2_CHECKOUT_RECEIPT_KEY], part["data"][AP2_PAYMENT_RECEIPT_KEY]
