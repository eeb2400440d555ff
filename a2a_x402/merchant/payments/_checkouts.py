"""The embedded flow's offer (specification §20.3): a round's checkout JWT and its `ap2-checkout` artifact.

A round whose tenant declares `ap2` in the tenants file, offered in extension v0.3 (A2A 1.0), gets a
checkout: its terms signed with the tenant's current checkout key (`merchant.ap2.sign_checkout`), stored
with the offer and sent as the task's `ap2-checkout` artifact before the `payment-required` status. Fresh
terms get a new checkout that replaces it (`append` false, the same artifact id). The v0.2 form of §20.7
(A2A 0.3) is `_mandates_v02`'s. Terms the price rule keeps out of the embedded flow (a sub-cent price) go out
without a checkout, which the log says once per tenant and skill: the rule gives every round of them the
same answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from a2a.types import Artifact, Part, TaskArtifactUpdateEvent
from google.protobuf.struct_pb2 import Value

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_ARTIFACT_NAME,
    AP2_CHECKOUT_JWT_KEY,
    EXTENSION_URI,
    Dialect,
)
from a2a_x402.facilitator.wire import PaymentRequired

from ..ap2 import CheckoutItem, CheckoutNotOffered, ParAsset, sign_checkout
from ..tenants import tenant_name
from ._pricing import Pricing

__all__ = ["Checkouts", "checkout_artifact"]

logger = logging.getLogger(__name__)

_JSON = "application/json"


class Checkouts:
    """Signs the checkout of a round's terms for the tenants that offer the embedded flow.

    `titles` are the skills' names by id, the checkout's item titles (a skill not named is titled by its
    id). The merchant's token is taken at par with each tenant's checkout currency: a tenant declares `ap2`
    only when it is (a USD stablecoin for USD).
    """

    def __init__(self, pricing: Pricing, titles: Mapping[str, str] | None = None) -> None:
        self._pricing = pricing
        self._titles = dict(titles or {})
        self._said: set[tuple[str, str]] = set()

    def sign(self, tenant_id: str, skill: str, terms: PaymentRequired, dialect: Dialect) -> str | None:
        """The checkout JWT of `terms`, or None when the round has no checkout: the tenant offers no
        embedded flow, the dialect is v0.2, or the price rule refuses the terms."""
        tenant = self._pricing.tenants.get(tenant_id)
        ap2 = tenant.ap2 if tenant is not None else None
        if ap2 is None or dialect is not Dialect.V03:
            return None
        asset = self._pricing.asset
        try:
            signed = sign_checkout(
                terms,
                ap2.checkout_keys,
                merchant=ap2.merchant,
                item=CheckoutItem(id=skill, title=self._titles.get(skill) or skill),
                assets=(ParAsset(network=asset.network, address=asset.address, decimals=asset.decimals),),
                currency=ap2.currency,
                now=int(time.time()),
            )
        except CheckoutNotOffered as exc:
            if (tenant_id, skill) not in self._said:
                self._said.add((tenant_id, skill))
                logger.info(
                    "tenant %s, skill %s: terms offered without an AP2 checkout (%s)",
                    tenant_name(tenant_id),
                    skill,
                    exc,
                )
            return None
        return signed.jwt


def checkout_artifact(task_id: str, context_id: str, checkout_jwt: str) -> TaskArtifactUpdateEvent:
    """The `ap2-checkout` artifact of a round (§20.3): it replaces any earlier round's (`append` false)."""
    data = Value()
    data.struct_value.update({AP2_CHECKOUT_JWT_KEY: checkout_jwt})
    artifact = Artifact(
        artifact_id=AP2_CHECKOUT_ARTIFACT_ID,
        name=AP2_CHECKOUT_ARTIFACT_NAME,
        parts=[Part(data=data, media_type=_JSON)],
        extensions=[EXTENSION_URI],
    )
    return TaskArtifactUpdateEvent(
        task_id=task_id, context_id=context_id, artifact=artifact, append=False, last_chunk=True
    )
