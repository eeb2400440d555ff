"""The payer's policy: which of the merchant's terms it agrees to sign.

An entry of ``accepts`` is signable when, in this order:

1. its scheme is ``exact`` (by EIP-3009 ``transferWithAuthorization``, or by Permit2 when
   ``extra.assetTransferMethod`` is ``"permit2"``) or ``upto`` (a Permit2 transfer of at most its amount,
   signed only under a policy with ``upto_max_per_task_atomic``);
2. its network and asset are listed in the card, and its EIP-712 domain (``extra.name``/``extra.version``),
   which an EIP-3009 entry must give, agrees with the card's entry for that asset;
3. the policy allows its network and asset;
4. its ``payTo`` is listed in the card for that network and the tenant in use (payTo pinning: terms that
   redirect the money elsewhere are refused even when everything else looks right); an ``upto`` entry
   names a facilitator that could settle it (``extra.facilitatorAddress``: any address but the zero one
   and the payment's own contracts, since the payer cannot know the merchant's facilitator; whoever it is
   can move at most the maximum, and only to the pinned payTo);
5. its amount is at most the policy's maximum; an ``upto`` maximum is also at most the cap per task and fits
   in what is left of the cap per UTC day (the sum of the ``upto`` maxima authorized today for that network
   and asset: by this policy object, in memory, unless ``upto_days_file`` names a SQLite file to count them
   in, shared by every process naming it and kept across restarts).

``choose`` takes the merchant's first signable entry (the merchant lists them in its order of preference),
except that an ``exact`` by Permit2 gives way to an ``exact`` by EIP-3009 for the same price (no allowance
needed). When none is signable it raises the refusal of the entry that got furthest through the checks, so
an offer whose only entry pays the wrong address reports ``PayToNotPinnedError`` rather than a generic
refusal. ``reserve`` counts a chosen ``upto`` maximum for the day just before it is signed.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from eth_utils.address import to_checksum_address

from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements

from ._budget import NO_RESERVATION, Reservation, UptoDayCounts, UptoDays
from ._budget_file import UptoDaysFile
from ._card import CardAsset, CardPaymentTerms
from ._errors import AmountOverLimitError, NoAcceptableTermsError, PaymentRefusedError, PayToNotPinnedError
from ._permit2_terms import is_permit2, upto_facilitator

__all__ = ["PaymentPolicy"]

_SCHEMES = frozenset({"exact", "upto"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PaymentPolicy:
    """What the payer agrees to pay.

    Attributes:
        max_amount_atomic: the most one payment may take (an ``upto`` one: its maximum), in the asset's
            atomic units; ``None``: no cap.
        networks: CAIP-2 networks the payer pays on; ``None``: any the card lists.
        assets: token contracts the payer pays with (kept checksummed); ``None``: any the card lists.
        upto_max_per_task_atomic: the most one ``upto`` (metered) task may authorize; ``None``: ``upto``
            terms are refused.
        upto_max_per_day_atomic: the most the ``upto`` maxima authorized in one UTC day may add up to, per
            network and asset; ``None``: no daily cap. Counted in this object, in memory (share one policy
            between payers to share the cap; a new process starts the day at nothing), unless
            ``upto_days_file`` is given.
        upto_days_file: a SQLite file to count the day's ``upto`` maxima in (made if missing): every
            policy and process naming it shares one count per day, which survives restarts; ``None``: in
            memory.
        ap2_standalone_fallback: when a merchant answers AP2 mandates with ``mandates_not_supported``,
            present the same signed payment again without them (§20.6 allows it); ``False``: stop with
            ``MandatesNotSupportedError``.

    Raises:
        ValueError: a cap is not a non-negative int, an asset not an address, or ``upto_days_file``
            cannot be opened or made.
    """

    max_amount_atomic: int | None = None
    networks: frozenset[str] | None = None
    assets: frozenset[str] | None = None
    upto_max_per_task_atomic: int | None = None
    upto_max_per_day_atomic: int | None = None
    upto_days_file: str | Path | None = None
    ap2_standalone_fallback: bool = False
    _days: UptoDayCounts = field(default_factory=UptoDays, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("max_amount_atomic", "upto_max_per_task_atomic", "upto_max_per_day_atomic"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
        if self.networks is not None:
            object.__setattr__(self, "networks", frozenset(self.networks))
        if self.assets is not None:
            object.__setattr__(self, "assets", _checksummed(self.assets))
        if self.upto_days_file is not None:
            object.__setattr__(self, "_days", UptoDaysFile(self.upto_days_file))

    def upto_spent_today(self, network: str, asset: str) -> int:
        """The ``upto`` maxima of `asset` on `network` authorized today (UTC): by this policy, or by every
        policy counting in its ``upto_days_file``.

        Raises:
            UptoDayCapUnavailableError: its ``upto_days_file`` could not be read.
        """
        return self._days.spent(network, asset)

    def choose(self, required: PaymentRequired, terms: CardPaymentTerms, tenant: str) -> PaymentRequirements:
        """The entry of ``required.accepts`` to sign, following the module's rules.

        Args:
            required: the merchant's payment terms.
            terms: the x402 terms the merchant's card pins.
            tenant: the tenant the payer talks to (``""`` for the default tenant).

        Returns:
            The first signable entry, or an EIP-3009 one for the same price as that (an ``exact`` by Permit2).

        Raises:
            PayToNotPinnedError: the furthest entry pays an address the card does not list.
            AmountOverLimitError: the furthest entry asks more than a cap of the policy.
            NoAcceptableTermsError: no entry uses a scheme, network and asset the payer can sign.
            UptoDayCapUnavailableError: ``upto`` terms, and the ``upto_days_file`` could not be read.
        """
        best: tuple[int, PaymentRefusedError] | None = None
        signable: list[PaymentRequirements] = []
        for requirements in required.accepts:
            refusal = self._refusal(requirements, terms, tenant)
            if refusal is None:
                signable.append(requirements)
            elif best is None or refusal[0] > best[0]:
                best = refusal
        if signable:
            first = signable[0]
            if first.scheme == "exact" and is_permit2(first):
                return next((r for r in signable if _same_price(r, first) and not is_permit2(r)), first)
            return first
        if best is None:  # PaymentRequired guarantees at least one entry
            raise NoAcceptableTermsError("the merchant offered no terms")
        raise best[1]

    def reserve(self, requirements: PaymentRequirements, terms: CardPaymentTerms) -> Reservation:
        """Count chosen ``upto`` terms against the day's cap before they are signed (nothing for ``exact``);
        release the reservation if they are not signed after all.

        Raises:
            AmountOverLimitError: another task (or process) took the day's cap since ``choose``.
            UptoDayCapUnavailableError: the ``upto_days_file`` could not be read or written.
        """
        if requirements.scheme != "upto":
            return NO_RESERVATION
        counted = self._days.reserve(
            requirements.network, requirements.asset, requirements.amount, self.upto_max_per_day_atomic
        )
        if isinstance(counted, Reservation):
            return counted
        raise self._over_day_cap(requirements, terms, counted)

    def _refusal(
        self, requirements: PaymentRequirements, terms: CardPaymentTerms, tenant: str
    ) -> tuple[int, PaymentRefusedError] | None:
        """``None`` when ``requirements`` may be signed, else how far it got and why it is refused."""
        where = f"{requirements.amount} of {requirements.asset} on {requirements.network}"
        problem = self._scheme_problem(requirements)
        if problem is not None:
            return 0, NoAcceptableTermsError(problem)
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
        if requirements.scheme == "upto":
            try:
                upto_facilitator(requirements)
            except ValueError as exc:
                return 3, NoAcceptableTermsError(f"{where}: {exc}")
        refused = self._amount_refusal(requirements, terms)
        return None if refused is None else (4, refused)

    def _scheme_problem(self, requirements: PaymentRequirements) -> str | None:
        if requirements.scheme not in _SCHEMES:
            return f"scheme {requirements.scheme!r} is not supported (only exact and upto)"
        try:
            is_permit2(requirements)
        except ValueError as exc:
            return str(exc)
        if requirements.scheme == "upto" and self.upto_max_per_task_atomic is None:
            return (
                "scheme 'upto' (metered: the merchant settles what the task used, up to a maximum) is not "
                "signed without a cap per task (upto_max_per_task_atomic, x402-pay --upto-max-per-task)"
            )
        return None

    def _amount_refusal(
        self, requirements: PaymentRequirements, terms: CardPaymentTerms
    ) -> AmountOverLimitError | None:
        asset = terms.asset(requirements.network, requirements.asset)
        upto = requirements.scheme == "upto"
        amount = _shown(requirements.amount, asset, requirements.asset)
        asked = f"{'upto maximum' if upto else 'amount'} {amount} on {requirements.network}"
        if self.max_amount_atomic is not None and requirements.amount > self.max_amount_atomic:
            cap = _shown(self.max_amount_atomic, asset, requirements.asset)
            return AmountOverLimitError(f"{asked}: the amount is over the policy's maximum of {cap}")
        if not upto:
            return None
        task_cap = self.upto_max_per_task_atomic
        if task_cap is not None and requirements.amount > task_cap:
            cap = _shown(task_cap, asset, requirements.asset)
            return AmountOverLimitError(f"{asked}: over the policy's upto cap per task of {cap}")
        day_cap = self.upto_max_per_day_atomic
        if day_cap is None:
            return None
        spent = self._days.spent(requirements.network, requirements.asset)
        if spent + requirements.amount > day_cap:
            return self._over_day_cap(requirements, terms, spent)
        return None

    def _over_day_cap(
        self, requirements: PaymentRequirements, terms: CardPaymentTerms, spent: int
    ) -> AmountOverLimitError:
        asset = terms.asset(requirements.network, requirements.asset)
        token = requirements.asset
        return AmountOverLimitError(
            f"upto maximum {_shown(requirements.amount, asset, token)} on {requirements.network}: over the "
            f"policy's upto cap per day of {_shown(self.upto_max_per_day_atomic or 0, asset, token)} "
            f"({_shown(spent, asset, token)} authorized today, UTC, {self._days.scope})"
        )


def _same_price(one: PaymentRequirements, other: PaymentRequirements) -> bool:
    return (one.scheme, one.network, one.asset, one.amount, one.pay_to) == (
        other.scheme,
        other.network,
        other.asset,
        other.amount,
        other.pay_to,
    )


def _shown(atomic: int, asset: CardAsset | None, address: str) -> str:
    """An amount in display form: whole tokens where the card gives the decimals, and the atomic units."""
    if asset is None or asset.decimals is None:
        return f"{atomic} atomic units of {address}"
    whole, fraction = divmod(atomic, 10**asset.decimals)
    digits = f"{fraction:0{asset.decimals}d}".rstrip("0") if asset.decimals else ""
    unit = asset.name or address
    return f"{whole}{'.' + digits if digits else ''} {unit} ({atomic} atomic units)"


def _card_problem(requirements: PaymentRequirements, terms: CardPaymentTerms) -> str | None:
    if requirements.network not in terms.networks:
        return "the card does not list this network"
    asset = terms.asset(requirements.network, requirements.asset)
    if asset is None:
        return "the card does not list this asset"
    extra = requirements.extra or {}
    name, version = extra.get("name"), extra.get("version")
    if name is None and version is None and is_permit2(requirements):
        return None  # Permit2 signs under its own domain: the token's is not needed
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
