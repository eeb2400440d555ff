"""Gas per settlement: ours beside the x402 Python SDK's facilitator, for the very same payment, per kind.

Run ``python -m bench.gas_bench`` (three payments per kind, about a minute) or with ``--quick`` (one each).
The kinds (``bench._gas_payments``): ``exact`` by EIP-3009, ``exact`` by Permit2 (approved beforehand, and
with an EIP-2612 permit instead), ``upto`` by Permit2 the same two ways, settled for 60 % of its maximum.

First each kind settles one payment through ours, unrecorded (``warm_up``: the dev proxies' first
settlement pays a one-time storage write). Then for every payment (a fresh payer, signed by the SDK's own
client scheme), on one anvil chain:

1. a snapshot; the SDK's facilitator (``x402FacilitatorSync`` with its exact and upto EVM schemes on a
   ``FacilitatorWeb3Signer``) settles the payment; its receipt is read;
2. the chain goes back to the snapshot; ours (``x402-facilitator serve``, over HTTP) settles the same payment
   from the same state with the same relayer key (so an ``upto`` payment, which names its facilitator's
   address, is valid for both); its receipt is read.

Each settlement is checked: a success, a mined transaction, and the payer's and the payee's balances moved
by exactly the settled amount. Gas used is a property of the calldata and the state, not of the machine's
load, so the figures are exact; the ratio ours/SDK is per payment. The SDK's facilitator runs in process
and gets a signer of its own per payment: its signer caches the next nonce, which each revert takes back
(HTTP around it would change no gas). The summary goes to stdout and ``bench/results/gas-latest.md``; the
exit status is 1 when a check failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account
from eth_utils.crypto import keccak
from x402 import x402FacilitatorSync
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import register_exact_evm_facilitator
from x402.mechanisms.evm.upto import UptoEvmFacilitatorScheme
from x402.schemas import parse_payment_payload, parse_payment_requirements

from a2a_x402.devchain import DevChain

from ._chain import BenchChain, start_bench_chain
from ._gas_payments import KINDS, Kind, Payment, make_payment
from ._servers import migrate_claim_store, start_ours

__all__ = ["CheckFailed", "Pair", "Settlement", "main", "measure_pair", "render"]

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "gas-latest.md"
_SETTLE_TIMEOUT_S = 120.0


def _selector(signature: str) -> str:
    return "0x" + keccak(text=signature).hex()[:8]


_PERMIT = "((address,uint256),uint256,uint256)"
_EIP2612 = "(uint256,uint256,bytes32,bytes32,uint8)"
_CALL_NAMES = {
    _selector(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
    ): "transferWithAuthorization(v,r,s)",
    _selector(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
    ): "transferWithAuthorization(bytes)",
    _selector(f"settle({_PERMIT},address,(address,uint256),bytes)"): "exact proxy settle",
    _selector(f"settleWithPermit({_EIP2612},{_PERMIT},address,(address,uint256),bytes)"): (
        "exact proxy settleWithPermit"
    ),
    _selector(f"settle({_PERMIT},uint256,address,(address,address,uint256),bytes)"): "upto proxy settle",
    _selector(f"settleWithPermit({_EIP2612},{_PERMIT},uint256,address,(address,address,uint256),bytes)"): (
        "upto proxy settleWithPermit"
    ),
}


@dataclass(frozen=True, slots=True)
class Settlement:
    """One facilitator's settlement of a payment, as mined."""

    gas_used: int
    gas_limit: int
    gas_price_wei: int
    calldata_bytes: int
    call: str
    calldata: str = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Pair:
    """The same payment settled by the SDK's facilitator and by ours, from the same state."""

    kind: Kind
    reference: Settlement
    ours: Settlement


class CheckFailed(RuntimeError):
    """A settlement did not do what it must (its message says what)."""


def _balances(chain: DevChain, payment: Payment, pay_to: str) -> tuple[int, int]:
    asset = getattr(chain, payment.kind.asset_field)
    return chain.balance_of(payment.payer, asset=asset), chain.balance_of(pay_to, asset=asset)


def _mined(chain: DevChain, answer: dict[str, Any], who: str) -> Settlement:
    if not answer.get("success") or not answer.get("transaction"):
        raise CheckFailed(f"{who} did not settle: {answer}")
    receipt = chain.rpc.call("eth_getTransactionReceipt", [answer["transaction"]])
    if receipt is None or int(receipt["status"], 16) != 1:
        raise CheckFailed(f"{who}'s transaction {answer['transaction']} is not mined with success: {receipt}")
    sent = chain.rpc.call("eth_getTransactionByHash", [answer["transaction"]])
    data = sent["input"]
    return Settlement(
        gas_used=int(receipt["gasUsed"], 16),
        gas_limit=int(sent["gas"], 16),
        gas_price_wei=int(receipt["effectiveGasPrice"], 16),
        calldata_bytes=(len(data) - 2) // 2,
        call=_CALL_NAMES.get(data[:10], data[:10]),
        calldata=data,
    )


def _settle_with_the_sdk(chain: DevChain, payment: Payment) -> dict[str, Any]:
    """The SDK's facilitator settles `payment`: a signer made now, since the SDK's caches the next nonce."""
    signer = FacilitatorWeb3Signer(private_key=chain.relayer_key, rpc_url=chain.rpc_url)
    facilitator = x402FacilitatorSync()
    register_exact_evm_facilitator(facilitator, signer, networks=chain.network)
    facilitator.register([chain.network], UptoEvmFacilitatorScheme(signer))
    body = payment.settle_body()
    payload = parse_payment_payload(body["paymentPayload"])
    requirements = parse_payment_requirements(2, body["paymentRequirements"])
    answer: dict[str, Any] = facilitator.settle(payload, requirements).model_dump(by_alias=True, mode="json")
    return answer


def _settle_with_ours(chain: DevChain, ours_url: str, payment: Payment) -> Settlement:
    answer = httpx.post(f"{ours_url}/settle", json=payment.settle_body(), timeout=_SETTLE_TIMEOUT_S).json()
    return _mined(chain, answer, "ours")


def chain_relayer(chain: DevChain) -> str:
    """The address of `chain`'s relayer key, which both facilitators settle with."""
    return str(Account.from_key(chain.relayer_key).address)


def warm_up(chain: DevChain, pay_to: str, ours_url: str) -> None:
    """Settle one payment of each kind through ours, unrecorded. The dev chain's proxies guard reentrancy
    with a storage slot that starts at zero (their code is installed without running a constructor), so
    the first settlement through each pays a first write of that slot (about 20,000 gas) that neither a
    later one nor x402's deployed proxies (a transient guard) pay."""
    for kind in KINDS:
        _settle_with_ours(
            chain, ours_url, make_payment(chain, kind, pay_to=pay_to, relayer=chain_relayer(chain))
        )


def measure_pair(chain: DevChain, pay_to: str, ours_url: str, payment: Payment) -> Pair:
    """`payment` settled by the SDK's facilitator, then, from the same state again, by ours at `ours_url`
    (both with `chain`'s relayer key), each checked.

    Raises:
        CheckFailed: a settlement failed, or moved other amounts than the payment's.
    """
    charged = payment.kind.charged
    payer_before, payee_before = _balances(chain, payment, pay_to)
    expected = (payer_before - charged, payee_before + charged)
    snapshot = chain.rpc.call("evm_snapshot")

    reference = _mined(chain, _settle_with_the_sdk(chain, payment), "the SDK's facilitator")
    if _balances(chain, payment, pay_to) != expected:
        raise CheckFailed(f"the SDK's facilitator moved {_balances(chain, payment, pay_to)}, not {expected}")

    chain.rpc.call("anvil_dropAllTransactions")
    if not chain.rpc.call("evm_revert", [snapshot]):
        raise RuntimeError(f"anvil refused to revert to snapshot {snapshot}")
    if _balances(chain, payment, pay_to) != (payer_before, payee_before):
        raise CheckFailed("the revert did not restore the balances")

    ours = _settle_with_ours(chain, ours_url, payment)
    if _balances(chain, payment, pay_to) != expected:
        raise CheckFailed(f"ours moved {_balances(chain, payment, pay_to)}, not {expected}")
    return Pair(payment.kind, reference, ours)


def _spread(values: list[float], unit: float = 1.0, digits: int = 0) -> str:
    """The median of `values` / `unit`, with the min–max where they differ."""
    low, median, high = (v / unit for v in (min(values), statistics.median(values), max(values)))
    shown = f"{median:,.{digits}f}"
    return shown if low == high else f"{shown} ({low:,.{digits}f}–{high:,.{digits}f})"


def _both(pairs: list[Pair], field: str, unit: float = 1.0, digits: int = 0) -> str:
    """`field` of ours and of the SDK's settlements of `pairs`, as "ours / SDK's"."""
    ours = _spread([getattr(p.ours, field) for p in pairs], unit, digits)
    theirs = _spread([getattr(p.reference, field) for p in pairs], unit, digits)
    return f"{ours} / {theirs}"


def render(pairs: list[Pair], header: list[str]) -> str:
    """The summary in Markdown: per kind, the gas used by each (median, min–max) and ours over the SDK's
    (per payment, then the median), the gas limit each set, the price each paid, the calldata (how many
    payments the two sent byte for byte the same) and the call."""
    lines = [
        *header,
        "",
        "| kind | n | gas used, ours / SDK's | ours ÷ SDK's | gas limit, ours / SDK's "
        "| effective price, gwei | calldata bytes | same calldata | call, ours / SDK's |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        of_kind = [p for p in pairs if p.kind == kind]
        if not of_kind:
            continue
        ratio = statistics.median(p.ours.gas_used / p.reference.gas_used for p in of_kind)
        calls = sorted({(p.ours.call, p.reference.call) for p in of_kind})
        call = "; ".join(mine if mine == sdk else f"{mine} / {sdk}" for mine, sdk in calls)
        lines.append(
            f"| {kind.label} | {len(of_kind)} | {_both(of_kind, 'gas_used')} | {ratio:.3f}x "
            f"| {_both(of_kind, 'gas_limit')} | {_both(of_kind, 'gas_price_wei', 1e9, 3)} "
            f"| {_both(of_kind, 'calldata_bytes')} "
            f"| {sum(p.ours.calldata == p.reference.calldata for p in of_kind)} of {len(of_kind)} | {call} |"
        )
    return "\n".join(lines) + "\n"


def _header(bench: BenchChain, payments: int) -> list[str]:
    try:
        commit = subprocess.run(  # noqa: S603 - fixed executable, no shell
            ["git", "rev-parse", "--short", "HEAD"],  # noqa: S607 - git from PATH
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except OSError:
        commit = "unknown"
    load = " / ".join(f"{value:.2f}" for value in os.getloadavg())
    return [
        "# Gas per settlement, ours beside the x402 Python SDK's facilitator "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"- commit {commit or 'unknown'}; x402 {version('x402')}; anvil {bench.anvil_version()}",
        f"- {payments} payment(s) per kind, each settled by both from the same chain state",
        f"- load average at the end (1/5/15 min): {load} (gas does not depend on it)",
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print and write the summary. Returns 1 when a check failed."""
    parser = argparse.ArgumentParser(prog="python -m bench.gas_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--payments", type=int, default=3, help="payments per kind (default 3)")
    parser.add_argument("--quick", action="store_true", help="one payment per kind")
    args = parser.parse_args(argv)
    payments = 1 if args.quick else args.payments
    pairs: list[Pair] = []
    failure: str | None = None
    with tempfile.TemporaryDirectory(prefix="gas-bench-") as tmp, start_bench_chain(payers=1) as bench:
        workdir = Path(tmp)
        chain = bench.chain
        # The payee holds each token already, as a merchant does: no first-balance write in the figures.
        for asset in (chain.asset, chain.plain_asset, chain.permit_asset):
            chain.mint(bench.pay_to, 1, asset=asset)
        ours = start_ours(
            rpc_url=chain.rpc_url,
            network=chain.network,
            relayer_key=chain.relayer_key,
            template_db=migrate_claim_store(workdir),
            workdir=workdir,
            tag="gas",
        )
        try:
            ours_url = f"http://127.0.0.1:{ours.port}"
            warm_up(chain, bench.pay_to, ours_url)
            for kind in KINDS:
                for _ in range(payments):
                    payment = make_payment(chain, kind, pay_to=bench.pay_to, relayer=chain_relayer(chain))
                    pairs.append(measure_pair(chain, bench.pay_to, ours_url, payment))
        except CheckFailed as error:
            failure = str(error)
        finally:
            ours.stop()
        report = render(pairs, _header(bench, payments))
    if failure is not None:
        report += f"\n**Check failed:** {failure}\n"
    print(report)
    RESULTS_PATH.parent.mkdir(exist_ok=True)
    RESULTS_PATH.write_text(report)
    return 1 if failure is not None else 0


if __name__ == "__main__":
    sys.exit(main())
