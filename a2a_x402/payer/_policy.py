"""The payer's policy: which of the merchant's terms it agrees to sign.

An entry of ``accepts`` is signable when, in this order:

1. its scheme is ``exact`` (the only one signed here: EIP-3009 ``transferWithAuthorization``);
2. its network and asset are listed in the card, and its EIP-712 domain (``extra.name``/``extra.version``)
   is present and agrees with the card's entry for that asset;
3. the policy allows its network and asset;
4. its ``payTo`` is listed in the card for that network and the tenant in use (payTo pinning: terms that
   redirect the money elsewhere are refused even when everything else looks right);
5. its amount is at most the policy's maximum.

``choose`` takes the merchant's first signable entry (the merchant lists them in its order of preference).
When none is signable it raises the refusal of the entry that got furthest through the checks, so an offer
whose only entry pays the wrong address reports ``PayToNotPinnedError`` rather than a generic refusal.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements

from ._card import CardPaymentTerms
from ._errors import AmountOverLimitError, NoAcceptableTermsError, PaymentRefusedError, PayToNotPinnedError

__all__ = ["PaymentPolicy"]

_SCHEME = "exact"


@dataclass(frozen=True, slots=True, kw_only=True)
class PaymentPolicy:
    """What the payer agrees to pay.

    Attributes:
        max_amount_atomic: the most one payment may take, in the asset's atomic units; ``None``: no cap.
        networks: CAIP-2 networks the payer pays on; ``None``: any the card lists.
        assets: token contracts the payer pays with (kept checksummed); ``None``: any the card lists.
    """

    max_amount_atomic: int | None = None
    networks: frozenset[str] | None = None
    assets: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.max_amount_atomic is not None and (
            isinstance(self.max_amount_atomic, bool)
            or not isinstance(self.max_amount_atomic, int)
            or self.max_amount_atomic < 0
        ):
            raise ValueError(f"max_amount_atomic must be a non-negative int, got {self.max_amount_atomic!r}")
        if self.networks is not None:
            object.__setattr__(self, "networks", frozenset(self.networks))
        if self.assets is not None:
            object.__setattr__(self, "assets", _checksummed(self.assets))

    def choose(self, required: PaymentRequired, terms: CardPaymentTerms, tenant: str) -> PaymentRequirements:
        """The entry of ``required.accepts`` to sign, following the module's rules.

        Args:
            required: the merchant's payment terms.
            terms: the x402 terms the merchant's card pins.
            tenant: the tenant the payer talks to (``""`` for the default tenant).

        Returns:
            The first signable entry.

        Raises:
            PayToNotPinnedError: the furthest entry pays an address the card does not list.
            AmountOverLimitError: the furthest entry asks more than ``max_amount_atomic``.
            NoAcceptableTermsError: no entry uses a scheme, network and asset the payer can sign.
        """
        best: tuple[int, PaymentRefusedError] | None = None
        for requirements in required.accepts:
            refusal = self._refusal(requirements, terms, tenant)
            if refusal is None:
                return requirements
            if best is None or refusal[0] > best[0]:
                best = refusal
        if best is None:  # PaymentRequired guarantees at least one entry
            raise NoAcceptableTermsError("the merchant offered no terms")
        raise best[1]

    def _refusal(
        self, requirements: PaymentRequirements, terms: CardPaymentTerms, tenant: str
    ) -> tuple[int, PaymentRefusedError] | None:
        """``None`` when ``requirements`` may be signed, else how far it got and why it is refused."""
        where = f"{requirements.amount} of {requirements.asset} on {requirements.network}"
        if requirements.scheme != _SCHEME:
            return 0, NoAcceptableTermsError(f"scheme {requirements.scheme!r} is not supported (only exact)")
        problem = _card_problem(requirements, terms)
        if problem is not None:
            return 1, NoAcceptableTermsError(f"{where}: {problem}")
        if self.networks is not None and requirements.network not in self.networks:
            return 2, NoAcceptableTermsError(f"{where}: the policy does not pay on {requirements.network}")
        if self.assets is not None and requirements.asset not in self.assets:
            return 2, NoAcceptableTermsError(f"{where}: the policy does not pay with {requirements.asset}")
        if requirements.pay_to not in terms.payees(requirements.network, tenant):
            return 3, PayToNotPinnedError(
                f"{where}: payTo {requirements.pay_to} is not listed in the card for "
                f"{requirements.network} and tenant {tenant!r}"
            )
        if self.max_amount_atomic is not None and requirements.amount > self.max_amount_atomic:
            return 4, AmountOverLimitError(
                f"{where}: the amount is over the policy's maximum of {self.max_amount_atomic}"
            )
        return None


def _card_problem(requirements: PaymentRequirements, terms: CardPaymentTerms) -> str | None:
    if requirements.network not in terms.networks:
        return "the card does not list this network"
    asset = terms.asset(requirements.network, requirements.asset)
    if asset is None:
        return "the card does not list this asset"
    extra = requirements.extra or {}
    name, version = extra.get("name"), extra.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return "the terms do not name the token's EIP-712 domain (extra.name/version)"
    if (asset.name is not None and asset.name != name) or (
        asset.version is not None and asset.version != version
    ):
        return f"the token's EIP-712 domain {name!r}/{version!r} differs from the card's"
    return None


def _checksummed(addresses: Collection[str]) -> frozenset[str]:
    try:
        return frozenset(str(to_checksum_address(a)) for a in addresses)
    except ValueError as exc:
        raise ValueError(f"policy assets must be token addresses: {exc}") from exc
