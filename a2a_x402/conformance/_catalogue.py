"""The checks the kit runs: stable ids, the level the specification gives each, and the section it tests.

This table is the kit's contract with the specification. ``python -m spec.build`` renders it into
``spec/v0.3.md`` (section "Conformance"), so the list a reader sees is the list the kit runs. An id never
changes meaning; a check that is dropped keeps its id retired. The level is the key word of the sentence the
check tests (BCP 14): a failed MUST fails the run, a failed SHOULD or MAY is reported only.
"""

from __future__ import annotations

from ._catalogue_ap2 import AP2_CATALOGUE
from ._catalogue_kinds import PAYMENT_KIND_CHECKS
from ._check_spec import CheckSpec, Level, Scope
from ._check_spec import make_check as _c

__all__ = ["CHECKS", "CheckSpec", "Level", "Scope", "check_spec"]

_M, _S = Level.MUST, Level.SHOULD
_CARD, _V10, _V03 = Scope.CARD, Scope.A2A_1_0, Scope.A2A_0_3

CHECKS: tuple[CheckSpec, ...] = (
    _c(
        "card.served",
        _M,
        _CARD,
        "3",
        "The card is one JSON object within the size limit and lists an interface to test.",
    ),
    _c(
        "card.declares-extension",
        _M,
        _CARD,
        "3",
        "capabilities.extensions declares the URI of the card's version.",
    ),
    _c("card.required", _S, _CARD, "3", "The declaration has required: true when a skill is charged for."),
    _c("card.params-present", _S, _CARD, "3", "The declaration carries params."),
    _c("card.params-schema", _M, _CARD, "3", "params validates against schema/card-params.json."),
    _c(
        "card.params-consistent",
        _M,
        _CARD,
        "3",
        "Every asset and payTo of params is on one of its networks, with a checksummed address.",
    ),
    _c(
        "card.pay-to-per-tenant",
        _M,
        _CARD,
        "12",
        "params.payTo lists an address for every tenant of the interfaces.",
    ),
    _c("card.no-empty-tenant", _S, _CARD, "3", 'params.payTo does not write "tenant": "".'),
    _c(
        "card.vary",
        _S,
        _CARD,
        "13",
        "A merchant serving both versions sends Vary: A2A-Version with its card.",
    ),
    _c(
        "card.unversioned-lists-both",
        _M,
        _CARD,
        "13",
        "A single card for both versions lists both URIs in capabilities.extensions.",
    ),
    _c(
        "card.tenant-0-3-served",
        _S,
        _CARD,
        "12.1",
        "A named tenant with 0.3 interfaces has its own 0.3 card under a base URL of those interfaces.",
    ),
    _c(
        "card.tenant-0-3-declares",
        _S,
        _CARD,
        "12.1",
        "The tenant's 0.3 card declares the v0.2 URI with required: true.",
    ),
    _c(
        "card.tenant-0-3-interfaces",
        _S,
        _CARD,
        "12.1",
        "The tenant's 0.3 card lists the 0.3 interfaces the 1.0 card gives it, and no other tenant's.",
    ),
    _c(
        "card.tenant-0-3-pay-to",
        _S,
        _CARD,
        "12.1",
        "The tenant's 0.3 card's params.payTo lists only addresses the 1.0 card gives that tenant.",
    ),
    _c(
        "activation.refused",
        _M,
        _V10,
        "4.3",
        "A priced request without activation gets ExtensionSupportRequiredError and creates no task.",
    ),
    _c(
        "activation.other-version-uri",
        _M,
        _V10,
        "4.1",
        "The v0.2 URI on an A2A 1.0 request activates nothing: the priced request is refused.",
    ),
    _c(
        "activation.continue-refused",
        _M,
        _V10,
        "4.3",
        "Continuing a task that was offered terms, without activation, is refused and changes nothing.",
    ),
    _c("activation.echoed", _S, _V10, "4.1", "The answer lists the activated URI in A2A-Extensions."),
    _c(
        "terms.placement",
        _M,
        _V10,
        "5.1",
        "The terms are a payment-required object under metadata[URI] of the INPUT_REQUIRED status message.",
    ),
    _c(
        "terms.message-extensions",
        _M,
        _V10,
        "4.2",
        "The status message with the extension object lists the URI.",
    ),
    _c(
        "terms.x402-v2",
        _M,
        _V10,
        "6.1",
        "required is an x402 v2 PaymentRequired valid against schema/payment-required.json.",
    ),
    _c("terms.integers", _S, _V10, "5.3", "x402Version and maxTimeoutSeconds are written as JSON integers."),
    _c(
        "terms.listed-in-card",
        _M,
        _V10,
        "3",
        "Every offered entry uses a network, asset and (for the request's tenant) payTo the card lists.",
    ),
    _c("terms.offer-id", _S, _V10, "6.1", "Every offered entry names its offer in extra.offerId."),
    _c(
        "payment.completes",
        _M,
        _V10,
        "8.3",
        "A valid payment completes the task: the artifact, and payment-completed with a successful receipt.",
    ),
    _c(
        "payment.settled-on-chain",
        _M,
        _V10,
        "7.3",
        "At completion, the receipt's transaction has moved exactly the price to the offered payTo, once.",
    ),
    _c("payment.receipt-members", _S, _V10, "6.3", "The successful receipt names payer and amount."),
    _c(
        "payment.represented",
        _M,
        _V10,
        "11",
        "The same payment again after completion is refused (UnsupportedOperationError), not charged.",
    ),
    _c(
        "payment.represented-concurrently",
        _M,
        _V10,
        "11",
        "One payment sent twice at once on one task is charged once: one successful receipt, one delivery.",
    ),
    _c(
        "payment.replayed",
        _M,
        _V10,
        "11",
        "A payment already used presented for a new task is refused with InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.no-signature",
        _M,
        _V10,
        "11",
        "No answer carries the payment's signature: not the paid SendMessage, GetTask, nor ListTasks of its "
        "context.",
    ),
    _c(
        "payment.presented-elsewhere",
        _M,
        _V10,
        "11",
        "A payment refused at one task, presented for another with its terms, is refused with "
        "InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.wrong-amount",
        _M,
        _V10,
        "15.2",
        "An authorization for less than the amount is refused with InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.wrong-pay-to",
        _M,
        _V10,
        "15.2",
        "A payment to another payTo than the offered one is refused with InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.wrong-asset",
        _M,
        _V10,
        "9.3",
        "A payment whose accepted names another asset is refused with InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.wrong-network",
        _M,
        _V10,
        "9.3",
        "A payment whose accepted names another network is refused with InvalidParamsError; nothing moves.",
    ),
    _c(
        "payment.expired",
        _M,
        _V10,
        "7.5",
        "An expired authorization gets fresh terms with error EXPIRED_PAYMENT; no artifact, nothing moves.",
    ),
    _c(
        "payment.not-yet-valid",
        _M,
        _V10,
        "7.5",
        "A not-yet-valid authorization gets fresh terms with EXPIRED_PAYMENT; no artifact, nothing moves.",
    ),
    _c(
        "payment.bad-signature",
        _M,
        _V10,
        "9.1",
        "A tampered signature fails the task with INVALID_SIGNATURE; no artifact, nothing moves.",
    ),
    _c(
        "payment.unfunded",
        _M,
        _V10,
        "8.5",
        "A payer without funds gets fresh terms with error INSUFFICIENT_FUNDS; no artifact, nothing moves.",
    ),
    _c(
        "rejection.cancels",
        _M,
        _V10,
        "7.6",
        "payment-rejected cancels the task and is echoed in the CANCELED status message.",
    ),
    _c(
        "metadata.other-version-form",
        _M,
        _V10,
        "5.1",
        "x402.payment.* keys in a message with the extension active are refused with InvalidParamsError.",
    ),
    _c(
        "metadata.request-level",
        _M,
        _V10,
        "5.1",
        "Extension data in the request-level metadata is refused with InvalidParamsError.",
    ),
    _c(
        "tenant.isolation",
        _M,
        _V10,
        "12",
        "A task is answered as unknown (TaskNotFoundError) to any other tenant of the same binding.",
    ),
    _c(
        "streaming.terms",
        _M,
        _V10,
        "10",
        "SendStreamingMessage starts with a task event and ends on INPUT_REQUIRED with payment-required.",
    ),
    _c(
        "streaming.paid-turn",
        _M,
        _V10,
        "10",
        "The streamed paid turn: payment-verified, then the artifact, then COMPLETED with payment-completed.",
    ),
    _c(
        "streaming.no-signature",
        _M,
        _V10,
        "11",
        "No event of the paid stream, nor GetTask or ListTasks of its context after, carries the signature.",
    ),
    _c(
        "v02.stranger-cancel",
        _M,
        _V03,
        "12.2",
        "On A2A 0.3 too, another authenticated caller's tasks/cancel and tasks/get are TaskNotFound.",
    ),
    _c(
        "v02.activation-refused",
        _M,
        _V03,
        "13",
        "On A2A 0.3, a priced request without the v0.2 URI gets ExtensionSupportRequiredError.",
    ),
    _c(
        "v02.other-version-uri",
        _M,
        _V03,
        "13",
        "On A2A 0.3, the v0.3 URI alone activates nothing: the priced request is refused.",
    ),
    _c(
        "callers.anonymous-list-empty",
        _M,
        _V10,
        "12.2",
        "A caller without credentials that names no contextId lists no task, not even one it started.",
    ),
    _c(
        "callers.stranger-cancel",
        _M,
        _V10,
        "12.2",
        "Another authenticated caller's CancelTask and GetTask are TaskNotFound; the task is unchanged.",
    ),
    _c(
        "v02.activation-echoed", _S, _V03, "13", "The 0.3 answer lists the v0.2 URI in the extensions header."
    ),
    _c(
        "v02.terms",
        _M,
        _V03,
        "13",
        "The terms are flat x402.payment.* keys holding x402 v1 terms with every field v1 clients require.",
    ),
    _c(
        "v02.listed-in-card",
        _M,
        _V03,
        "3",
        "The offered v1 entries use an asset and payTo the card lists, on a network it lists.",
    ),
    _c(
        "v02.payment-completes",
        _M,
        _V03,
        "16",
        "An x402 v1 payment completes the 0.3 task with the artifact, settled on chain once for the price.",
    ),
    _c(
        "v02.no-signature",
        _M,
        _V03,
        "11",
        "On A2A 0.3 too, no answer carries the payment's signature: not the paid message/send nor tasks/get.",
    ),
    _c(
        "v02.other-version-form",
        _M,
        _V03,
        "13",
        "The URI-keyed v0.3 object on an A2A 0.3 request is refused with InvalidParamsError.",
    ),
    _c(
        "v02.streaming-terms",
        _M,
        _V03,
        "10",
        "The 0.3 streaming call starts with a task event and ends on input-required with payment-required.",
    ),
    _c(
        "v02.streaming-paid-turn",
        _M,
        _V03,
        "10",
        "The streamed 0.3 paid turn: payment-verified, the artifact, then completed with payment-completed.",
    ),
    *PAYMENT_KIND_CHECKS,
    *AP2_CATALOGUE,
)
"""Every check, in the order the kit reports them."""

_BY_ID = {spec.id: spec for spec in CHECKS}


def check_spec(check_id: str) -> CheckSpec:
    """The check with ``check_id``.

    Raises:
        KeyError: no check has that id.
    """
    return _BY_ID[check_id]
