"""What a tenant charges for a skill, as x402 v2 payment terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements, ResourceInfo

from ..tenants import TenantRegistry
from ._sponsoring import GasSponsoring
from ._transfer_method import TransferMethod
from ._upto import SupportedSource, UptoFacilitator

__all__ = ["Asset", "Pricing"]


@dataclass(frozen=True, slots=True)
class Asset:
    """The token payments are made in, on one chain, and how its payments move it (`transfer_method`)."""

    network: str
    address: str
    name: str
    version: str
    decimals: int = 6
    symbol: str = "USDC"
    transfer_method: TransferMethod = TransferMethod.EIP3009

    def __post_init__(self) -> None:
        object.__setattr__(self, "address", to_checksum_address(self.address))

    def format(self, amount_atomic: int) -> str:
        """`amount_atomic` in whole units for people, e.g. 1500000 → '1.50 USDC'."""
        whole, fraction = divmod(amount_atomic, 10**self.decimals)
        digits = str(fraction).rjust(self.decimals, "0").rstrip("0").ljust(2, "0")
        return f"{whole}.{digits} {self.symbol}"


class Pricing:
    """Prices per tenant and skill, and the x402 terms that ask for them.

    `mime_types` names the media type of what each skill delivers (its artifact), for the `mimeType` that
    x402 v1 terms must carry; a skill not listed has an empty one. `supported` is the facilitator's
    `/supported` answer, where metered skills' terms find the address their `upto` payments settle from;
    `sponsoring` says whether terms paid by Permit2 declare the `eip2612GasSponsoring` extension.
    """

    def __init__(
        self,
        tenants: TenantRegistry,
        asset: Asset,
        *,
        resource_url: str,
        max_timeout_seconds: int = 300,
        mime_types: Mapping[str, str] | None = None,
        supported: SupportedSource | None = None,
        sponsoring: GasSponsoring | None = None,
    ):
        self.tenants = tenants
        self.asset = asset
        self._resource_url = resource_url.rstrip("/")
        self._max_timeout_seconds = max_timeout_seconds
        self._mime_types = dict(mime_types or {})
        self._upto = UptoFacilitator(supported, asset.network)
        self._sponsoring = sponsoring

    @property
    def max_timeout_seconds(self) -> int:
        """The terms' `maxTimeoutSeconds`: how long an offer can be paid."""
        return self._max_timeout_seconds

    def price(self, tenant_id: str, skill: str) -> int:
        """The price in atomic units of `skill` for `tenant_id`; 0 means free.

        Raises:
            merchant.tenants.UnknownTenantError: no such tenant.
        """
        return self.tenants.require(tenant_id).price_for(skill)

    def is_metered(self, tenant_id: str, skill: str) -> bool:
        """Whether `skill` is charged by what its work used, up to its `price` (x402 `upto`)."""
        return self.tenants.require(tenant_id).is_metered(skill)

    def amount_text(self, tenant_id: str, skill: str) -> str:
        """What `skill` costs, for people: '0.50 USDC', or 'up to 0.50 USDC' for a metered skill."""
        amount = self.asset.format(self.price(tenant_id, skill))
        return f"up to {amount}" if self.is_metered(tenant_id, skill) else amount

    async def facilitator_address(self, tenant_id: str, skill: str) -> str | None:
        """Where a metered skill's `upto` payments settle from (the facilitator's `/supported`, asked once);
        None for a fixed-price skill.

        Raises:
            MeteringUnavailableError: the skill is metered and the facilitator settles no `upto` payments on
                the network, or cannot be asked now.
        """
        return await self._upto.address() if self.is_metered(tenant_id, skill) else None

    async def extensions(self, tenant_id: str, skill: str) -> dict[str, Any] | None:
        """The top-level `extensions` of the skill's terms: for terms paid by Permit2 (a metered skill, or a
        token paid through Permit2), the `eip2612GasSponsoring` declaration where the token and the
        facilitator support it (`_sponsoring`); else None."""
        by_permit2 = self.is_metered(tenant_id, skill) or self.asset.transfer_method is TransferMethod.PERMIT2
        if not by_permit2 or self._sponsoring is None:
            return None
        return await self._sponsoring.extensions(self.asset.address)

    def pay_to(self, tenant_id: str) -> str:
        """Where the tenant's payments go."""
        return self.tenants.require(tenant_id).pay_to

    def mime_type(self, skill: str) -> str:
        """The media type of what `skill` delivers, or "" when it was not configured."""
        return self._mime_types.get(skill, "")

    def terms(
        self,
        tenant_id: str,
        skill: str,
        *,
        description: str,
        offer_id: str,
        facilitator_address: str | None = None,
        extensions: dict[str, Any] | None = None,
    ) -> PaymentRequired:
        """The x402 v2 `PaymentRequired` asking for this skill's price, as the offer `offer_id`.

        Every offer gets its own id, carried in `extra.offerId` next to the token's EIP-712 name and
        version. A v2 payload returns the terms it pays verbatim in `accepted`, so the id tells a payment
        made for these terms from one signed for another task's (or an earlier round's) identical terms.
        A token paid through Permit2 says so (`extra.assetTransferMethod: "permit2"`); its EIP-712 name and
        version stay, for a payer that signs an EIP-2612 permit of Permit2 with its payment. A metered
        skill's terms are x402 `upto` (always paid through Permit2) for its maximum, settled from
        `facilitator_address` (the facilitator's `/supported` names it; the payer's witness names it too).
        `extensions` (`extensions()`) are the terms' top-level x402 extensions.

        Raises:
            ValueError: the skill is metered and no `facilitator_address` is given.
        """
        extra: dict[str, object] = {"name": self.asset.name, "version": self.asset.version}
        scheme = "exact"
        if self.is_metered(tenant_id, skill):
            if facilitator_address is None:
                raise ValueError("metered terms name the facilitator that settles them")
            scheme, extra["facilitatorAddress"] = "upto", facilitator_address
        elif self.asset.transfer_method is TransferMethod.PERMIT2:
            extra["assetTransferMethod"] = TransferMethod.PERMIT2.value
        extra["offerId"] = offer_id
        requirements = PaymentRequirements(
            scheme=scheme,
            network=self.asset.network,
            asset=self.asset.address,
            amount=self.price(tenant_id, skill),
            pay_to=self.pay_to(tenant_id),
            max_timeout_seconds=self._max_timeout_seconds,
            extra=extra,
        )
        tenant_part = f"/{tenant_id}" if tenant_id else ""
        resource = ResourceInfo(
            url=f"{self._resource_url}{tenant_part}/skills/{skill}", description=description
        )
        return PaymentRequired(
            x402_version=2, resource=resource, accepts=(requirements,), extensions=extensions
        )
