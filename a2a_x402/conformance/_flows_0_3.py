"""The A2A 0.3 checks, in the extension v0.2 forms of spec §13 and §16: flat ``x402.payment.*`` keys and
x402 v1 terms, activated by the v0.2 URI (``X-A2A-Extensions``)."""

from __future__ import annotations

from typing import Any

from eth_utils.address import is_hex_address, to_checksum_address

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._context import NotApplicable, Probe, fail
from ._messages import extension_message, user_message
from ._permit2 import KIND_WORDS, payment_kind
from ._reading import artifacts_of, expect_error, metadata_of, state_of
from ._reply import Reply
from ._report import Outcome
from ._schema import schema_problems
from ._signer import Signed, payload_v1
from ._steps import carries_signature, expect_settled, outcome_of, successful_receipt
from ._wire import Wire

__all__ = [
    "V02_CHECKS",
    "V02_STANDALONE_CHECKS",
    "caip2",
    "check_terms_v1",
    "expect_paid_0_3",
    "flat_value",
    "sign_v1",
    "standalone_0_3_problem",
    "terms_v1",
    "v02_task",
]

JSON = Any
V02_CHECKS = (
    "v02.activation-refused",
    "v02.other-version-uri",
    "v02.activation-echoed",
    "v02.terms",
    "v02.listed-in-card",
    "v02.payment-completes",
    "v02.other-version-form",
    "v02.no-signature",
)
V02_STANDALONE_CHECKS = V02_CHECKS[3:]
"""The checks of ``V02_CHECKS`` that read the standalone flow's terms (the activation checks come first)."""
_V1_TERMS = ("x402Version", "accepts", "error")
_V1_ENTRY = (
    "scheme",
    "network",
    "maxAmountRequired",
    "resource",
    "description",
    "mimeType",
    "payTo",
    "maxTimeoutSeconds",
    "asset",
    "extra",
)
_V1_NETWORKS = {
    "base": "eip155:8453",
    "base-sepolia": "eip155:84532",
    "avalanche": "eip155:43114",
    "avalanche-fuji": "eip155:43113",
}


def caip2(network: str) -> str:
    """The CAIP-2 id of an x402 v1 network name (a CAIP-2 id as it is)."""
    return network if network.startswith("eip155:") else _V1_NETWORKS.get(network, network)


def flat_value(task: JSON, name: str) -> JSON:
    """The v0.2 flat key ``x402.payment.<name>`` of the task's (or status update's) status message."""
    return (metadata_of(task) or {}).get(f"x402.payment.{name}")


def standalone_0_3_problem(probe: Probe, tenant: str) -> str:
    """Why the standalone flow's 0.3 checks do not apply to ``tenant`` (``""``: they do): a 0.3 card's v0.2
    declaration lists it in ``params.ap2``, so it is offered the embedded flow's v0.2 form (§20.7), whose
    terms are in a cart, paid with a ``PaymentMandate`` only (the ``ap2.v02-*`` checks)."""
    if tenant not in probe.run.discovery.ap2_v02:
        return ""
    return (
        f"the 0.3 card's v0.2 declaration lists tenant {tenant or '(default)'} in params.ap2: it is offered "
        "the embedded flow's v0.2 form (§20.7), paid with an AP2 PaymentMandate only (the ap2.v02-* checks)"
    )


def terms_v1(reply: Reply) -> JSON:
    """The x402 terms of a 0.3 task waiting for payment (v1, or v2 checked against the schema); else fails."""
    task = reply.task
    if reply.error is not None or task is None:
        raise fail("the priced request got no task", reply.exchange)
    if (
        state_of(task, version="0.3") != "TASK_STATE_INPUT_REQUIRED"
        or flat_value(task, "status") != "payment-required"
    ):
        raise fail("the task is not input-required with x402.payment.status payment-required", reply.exchange)
    return check_terms_v1(flat_value(task, "required"), reply, "x402.payment.required")


def check_terms_v1(required: JSON, reply: Reply, where: str) -> JSON:
    """``required`` (found at ``where``) once it is x402 v1 terms with every field v1 clients require (or v2
    terms valid against the schema); else fails."""
    if not isinstance(required, dict):
        raise fail(f"{where} is not an object", reply.exchange)
    if required.get("x402Version") == 2:
        problems = schema_problems(
            "payment-required.json", {"status": "payment-required", "required": required}
        )
        if problems:
            raise fail("the x402 v2 terms do not validate: " + "; ".join(problems), reply.exchange)
        return required
    missing = [name for name in _V1_TERMS if name not in required]
    accepts = required.get("accepts")
    if required.get("x402Version") != 1 or missing or not isinstance(accepts, list) or not accepts:
        raise fail(
            f"the terms are not x402 v1 with x402Version, accepts and error (missing {missing})",
            reply.exchange,
        )
    for entry in accepts:
        lacking = [name for name in _V1_ENTRY if not isinstance(entry, dict) or name not in entry]
        if lacking:
            raise fail(f"an x402 v1 entry lacks {lacking}", reply.exchange)
    return required


def sign_v1(probe: Probe, tenant: str, required: JSON) -> tuple[Signed, JSON]:
    """The kit's signed payment for the first offered entry by EIP-3009 of 0.3 terms, and its x402 v1 payload.

    Raises:
        NotApplicable: the terms offer no such entry (a metered skill's, or a token taken by Permit2).
    """
    entry = next((e for e in required["accepts"] if payment_kind(e) == "eip3009"), None)
    if entry is None:
        raise NotApplicable(
            f"the terms of the request offer no {KIND_WORDS['eip3009']}, which these checks pay"
        )
    amount = str(entry.get("maxAmountRequired") if required.get("x402Version") == 1 else entry.get("amount"))
    network = str(entry.get("network"))
    signed = probe.run.signer.sign(
        entry,
        tenant=tenant,
        network=network,
        caip2=caip2(network),
        amount=int(amount) if amount.isdigit() else 0,
    )
    return signed, payload_v1(entry, signed)


async def v02_task(probe: Probe, wire: Wire) -> None:
    """Activation, terms, an x402 v1 payment, its signature kept, and the other version's form on one 0.3
    interface."""
    interface, run = wire.interface, probe.run
    text = run.discovery.request_text
    for check_id, activate in (("v02.activation-refused", None), ("v02.other-version-uri", EXTENSION_URI)):
        async with probe.check(check_id):
            refused = await wire.send(user_message(interface, text), activate=activate)
            problem = expect_error(refused, "EXTENSION_SUPPORT_REQUIRED", interface)
            if problem:
                raise fail(problem, refused.exchange)
    reply = await wire.send(user_message(interface, text))
    async with probe.check("v02.activation-echoed"):
        header = reply.headers.get("x-a2a-extensions", "") + "," + reply.headers.get("a2a-extensions", "")
        if EXTENSION_URI_V02 not in (item.strip() for item in header.split(",")):
            raise fail("the answer does not list the v0.2 URI in its extensions header", reply.exchange)
    embedded = standalone_0_3_problem(probe, interface.tenant)
    if embedded:
        for check_id in V02_STANDALONE_CHECKS:
            probe.record(check_id, Outcome.SKIPPED, embedded)
        return
    async with probe.check("v02.terms"):
        required = terms_v1(reply)
    if probe.failed:
        return
    entries = [e for e in required["accepts"] if isinstance(e, dict)]
    async with probe.check("v02.listed-in-card"):
        for entry in entries:
            refusal = run.discovery.allows(
                caip2(str(entry.get("network"))),
                str(entry.get("asset")),
                str(entry.get("payTo")),
                interface.tenant,
            )
            if refusal:
                raise fail(f"an offered entry is outside the card: {refusal}", reply.exchange)
            own = run.discovery.tenant_payees.get(interface.tenant)
            address = str(entry.get("payTo"))
            pay_to = (
                caip2(str(entry.get("network"))),
                to_checksum_address(address) if is_hex_address(address) else address,
            )
            if own is not None and pay_to not in own:
                raise fail(
                    f"the offered payTo {pay_to[1]} is not in tenant {interface.tenant}'s own 0.3 card",
                    reply.exchange,
                )
    task_id = str(reply.task.get("id"))
    async with probe.check("v02.other-version-form"):
        wrong = {EXTENSION_URI: {"status": "payment-rejected"}}
        refused = await wire.send(user_message(interface, "No, thank you.", task_id=task_id, metadata=wrong))
        problem = expect_error(refused, "INVALID_PARAMS", interface)
        if problem:
            raise fail(problem, refused.exchange)
        after = await wire.get_task(task_id)
        if state_of(after.task, version="0.3") != "TASK_STATE_INPUT_REQUIRED":
            raise fail("the task changed although the message was refused", refused.exchange, after.exchange)
    async with probe.check("v02.payment-completes"):
        signed, payload = sign_v1(probe, interface.tenant, required)
        paid = await wire.send(extension_message(interface, task_id, "payment-submitted", payload=payload))
        paid = await expect_paid_0_3(probe, wire, paid, signed)
    if probe.failed or probe.skip_rest("v02.payment-completes", ("v02.no-signature",)):
        return
    async with probe.check("v02.no-signature"):
        await _no_signature(wire, task_id, paid, signed)


async def expect_paid_0_3(probe: Probe, wire: Wire, answer: Reply, signed: Signed) -> Reply:
    """The outcome of ``answer`` to a 0.3 payment, once the task is completed with an artifact of work,
    ``payment-completed`` and a successful receipt in ``x402.payment.receipts``, settled on chain once.

    Raises:
        CheckFailed: any of these is not so.
    """
    paid = await outcome_of(probe, wire, answer)
    task = paid.task
    if paid.error is not None or task is None:
        raise fail("the payment got no task", paid.exchange)
    if state_of(task, version="0.3") != "TASK_STATE_COMPLETED" or not artifacts_of(task):
        raise fail(
            f"the paid task is {state_of(task, version='0.3')}, not completed with an artifact",
            paid.exchange,
        )
    if flat_value(task, "status") != "payment-completed":
        raise fail("x402.payment.status is not payment-completed", paid.exchange)
    receipt = successful_receipt(flat_value(task, "receipts"))
    if receipt is None:
        raise fail("x402.payment.receipts does not end with a successful receipt", paid.exchange)
    await expect_settled(probe.run.chain, probe, signed, receipt, paid)
    return paid


async def _no_signature(wire: Wire, task_id: str, paid: Reply, signed: Signed) -> None:
    """§11.7 on v0.2: neither the payment's answer nor tasks/get carries the signature (A2A 0.3 has no
    tasks/list; the history keeps ``x402.payment.payload`` without ``payload.signature``)."""
    got = await wire.get_task(task_id)
    for what, reply in (("the payment's answer", paid), ("tasks/get", got)):
        if carries_signature(reply.result, signed):
            raise fail(f"{what} carries the payment's signature", reply.exchange)
    if not isinstance(got.task, dict):
        raise fail("tasks/get of the paid task answers no task", got.exchange)
