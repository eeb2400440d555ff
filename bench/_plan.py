"""What a facilitator benchmark run does (`Plan`: its full and quick sizes) and the header of its summary,
which says so along with the machine, the chain, the servers and the load."""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib.metadata import version
from pathlib import Path

from ._chain import BenchChain
from ._payloads import EIP3009_KIND

__all__ = ["FULL", "QUICK", "Plan", "cores", "header"]


@dataclass(frozen=True, slots=True)
class Plan:
    """How much work each segment does, and how often the whole set is repeated."""

    repetitions: int
    verify_count: int
    settle_sequential_count: int
    settle_concurrent_count: int
    two_signer_count: int
    floor_count: int
    kind_sequential_count: int
    kind_concurrent_count: int
    """Settlements of each Permit2 kind (`--kinds`) per segment, sequentially and concurrently."""
    concurrency: int = 50
    warmup_count: int = 20
    payers: int = 8


FULL = Plan(
    repetitions=3,
    verify_count=500,
    settle_sequential_count=300,
    settle_concurrent_count=500,
    two_signer_count=300,
    floor_count=2000,
    kind_sequential_count=300,
    kind_concurrent_count=500,
)
QUICK = Plan(
    repetitions=1,
    verify_count=150,
    settle_sequential_count=100,
    settle_concurrent_count=200,
    two_signer_count=100,
    floor_count=1000,
    kind_sequential_count=50,
    kind_concurrent_count=150,
)


def header(
    chain: BenchChain,
    plan: Plan,
    started: datetime,
    elapsed_s: float,
    snapshot_height: int,
    load_start: float,
    baseline: Path | None,
    kinds: Sequence[str],
) -> list[str]:
    """The summary's header: the machine, the chain, the servers, the work, the load and the method."""
    permit2 = [kind for kind in kinds if kind != EIP3009_KIND]
    packages = ", ".join(
        f"{name} {version(name)}" for name in ("x402", "web3", "uvicorn", "fastapi", "httpx")
    )
    return [
        f"## Facilitator benchmark, {started:%Y-%m-%d %H:%M} UTC",
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"anvil {chain.anvil_version()}; {packages}.",
        f"- Chain: anvil automine, chain id {chain.chain.chain_id}, the project's DevUSDC; every segment "
        f"starts from a snapshot at height {snapshot_height} (evm_revert) plus one empty block that sets the "
        "chain's clock to now; start and end heights per segment below.",
        "- Servers: one uvicorn worker each, own process; ours = `x402-facilitator serve` (SQLite claim "
        "store), reference = x402 SDK `x402Facilitator` in a minimal FastAPI app "
        "(`bench/_x402_reference_app.py`).",
        f"- Work: {plan.repetitions} repetition(s); verify N={plan.verify_count}, settle sequential "
        f"N={plan.settle_sequential_count}, settle c={plan.concurrency} N={plan.settle_concurrent_count}, "
        f"two signers N={plan.two_signer_count}; every authorization distinct and pre-signed. "
        f"Load generator: raw asyncio HTTP/1.1 keep-alive client. Run took {elapsed_s:.0f} s.",
        f"- Kinds: {'; '.join(f'`{kind}`' for kind in kinds)}."
        + (
            f" The Permit2 ones settle N={plan.kind_sequential_count} sequentially and "
            f"N={plan.kind_concurrent_count} at c={plan.concurrency} (the node's ceiling the same N), on the "
            "plain ERC-20 (`DevToken`), each payer's Permit2 allowance approved before the snapshot; signed "
            "by the x402 SDK's client schemes; the reference registers the SDK's `upto` facilitator scheme."
            if permit2
            else ""
        ),
        f"- Load average (1 min): {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end "
        f"(other work on the machine shares its {cores()} cores).",
        *(
            [
                f"- Baseline: our server on the code of {_commit(baseline)} (`--baseline`), with this "
                "checkout's virtualenv (its libraries' versions above)."
            ]
            if baseline is not None
            else []
        ),
        "- The reference app awaits the SDK's async `x402Facilitator` in `async def` routes, as the SDK's "
        "example does; its EVM scheme makes blocking web3 calls inside, so one request runs at a time and "
        "the event loop stalls meanwhile. That is measured as a user would deploy it, not worked around.",
        "- Figures are medians over repetitions (min–max); a ratio is taken within each repetition, then "
        "its median is shown. CPU columns are milliseconds per request read from /proc.",
    ]


def _commit(checkout: Path) -> str:
    """`checkout`'s commit, as git names it (its path if git cannot say)."""
    found = subprocess.run(  # noqa: S603 - fixed executable, no shell
        ["git", "-C", str(checkout), "describe", "--always", "--dirty"],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    return f"`{found.stdout.strip()}`" if found.returncode == 0 and found.stdout.strip() else str(checkout)


def cores() -> int:
    """The cores this process may run on (what the benchmark's processes share)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
