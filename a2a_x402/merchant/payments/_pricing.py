"""What a tenant charges for a skill, as x402 v2 payment terms."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements, ResourceInfo

from ..tenants import TenantRegistry
from ._transfer_method import TransferMethod

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
    x402 v1 terms must carry; a skill not listed has an empty one.
    """

    def __init__(
        self,
        tenants: TenantRegistry,
        asset: Asset,
        *,
        resource_url: str,
        max_timeout_seconds: int = 300,
        mime_types: Mapping[str, str] | None = None,
    ):
        self.tenants = tenants
        self.asset = asset
        self._resource_url = resource_url.rstrip("/")
        self._max_timeout_seconds = max_timeout_seconds
        self._mime_types = dict(mime_types or {})

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

    def pay_to(self, tenant_id: str) -> str:
        """Where the tenant's payments go."""
        return self.tenants.require(tenant_id).pay_to

    def mime_type(self, skill: str) -> str:
        """The media type of what `skill` delivers, or "" when it was not configured."""
        return self._mime_types.get(skill, "")

    def terms(self, tenant_id: str, skill: str, *, description: str, offer_id: str) -> PaymentRequired:
        """The x402 v2 `PaymentRequired` asking for this skill's price, as the offer `offer_id`.

        Every offer gets its own id, carried in `extra.offerId` next to the token's EIP-712 name and
        version. A v2 payload returns the terms it pays verbatim in `accepted`, so the id tells a payment
        made for these terms from one signed for another task's (or an earlier round's) identical terms.
        A token paid through Permit2 says so (`extra.assetTransferMethod: "permit2"`); its EIP-712 name and
        version stay, for a payer that signs an EIP-2612 permit of Permit2 with its payment.
        """
        extra: dict[str, object] = {"name": self.asset.name, "version": self.asset.version}
        if self.asset.transfer_method is TransferMethod.PERMIT2:
            extra["assetTransferMethod"] = TransferMethod.PERMIT2.value
        extra["offerId"] = offer_id
        requirements = PaymentRequirements(
            scheme="exact",
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
        return PaymentRequired(x402_version=2, resource=resource, accepts=(requirements,))
