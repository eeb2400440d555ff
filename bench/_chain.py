"""The benchmark's chain: one anvil with the project's token, reset to the same snapshot before each segment.

anvil in automine mode gets slower per block as the chain grows (perf-baselines, "Anvil slows down as
the chain grows"), so a segment that ran after another would be measured on a longer, slower chain.
Every segment therefore starts with ``evm_revert`` to a snapshot taken right after deployment; anvil
drops a snapshot once it is reverted to, so a new one is taken at once. A revert also rewinds anvil's
clock to the snapshot's, which would make authorizations signed since then "not yet valid" on chain, so
one empty block stamped with the current time follows every revert. A revert keeps the node's pool, so
the pool is emptied first. Servers must be restarted after a reset, because their relayers cache the
next nonce.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from eth_account import Account

from a2a_x402.devchain import AnvilNode, DevChain, deploy_devchain

__all__ = [
    "BenchChain",
    "ChainState",
    "busiest_thread_s",
    "machine_busy_s",
    "process_cpu_s",
    "start_bench_chain",
    "threads_cpu_s",
]

# Payments go to anvil's well-known account 9; it never sends anything in the benchmark.
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"

_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_cpu_s(path: str, *, system_only: bool = False) -> float | None:
    try:
        with open(path) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # After the command name: state is field 3, utime 14 and stime 15 (1-based, man proc).
    ticks = int(fields[12]) if system_only else int(fields[11]) + int(fields[12])
    return ticks / _CLOCK_TICKS_PER_S


def process_cpu_s(pid: int, *, system_only: bool = False) -> float | None:
    """User plus system CPU seconds used so far by process `pid` (only system with `system_only`: the
    kernel's work on its behalf, its sockets' included), or None where /proc is unavailable."""
    return _stat_cpu_s(f"/proc/{pid}/stat", system_only=system_only)


def threads_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds used so far by each live thread of process `pid` (empty where /proc is unavailable)."""
    try:
        tids = [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return {}
    found = {tid: _stat_cpu_s(f"/proc/{pid}/task/{tid}/stat") for tid in tids}
    return {tid: cpu for tid, cpu in found.items() if cpu is not None}


def busiest_thread_s(before: dict[int, float], after: dict[int, float]) -> float | None:
    """The most CPU seconds one thread used between two `threads_cpu_s` readings (a thread started in
    between counts from zero), or None without readings. Where that work cannot move to another thread
    (an event loop's, a miner's), it bounds the process's rate however many cores there are."""
    if not after:
        return None
    return max(cpu - before.get(tid, 0.0) for tid, cpu in after.items())


def machine_busy_s() -> float | None:
    """CPU seconds all the machine's cores have been busy so far (every process, the kernel's interrupt
    work included; idle, I/O wait and time stolen by the hypervisor excluded), or None without /proc."""
    try:
        with open("/proc/stat") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    # The aggregate line: cpu user nice system idle iowait irq softirq steal ... (man proc).
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / _CLOCK_TICKS_PER_S


@dataclass(frozen=True, slots=True)
class ChainState:
    """What a segment's correctness checks compare before and after: all in atomic units or counts."""

    height: int
    payee_balance: int
    relayer_nonce: int


@dataclass
class BenchChain:
    """The dev chain plus its anvil process and the snapshot every segment starts from."""

    chain: DevChain
    node: AnvilNode
    relayer: str
    pay_to: str = PAY_TO
    _snapshot: str = field(default="", repr=False)

    def take_snapshot(self) -> None:
        """Remember the current state as the start of every later segment."""
        self._snapshot = self.chain.rpc.call("evm_snapshot")

    def reset(self) -> ChainState:
        """Empty the pool, revert to the snapshot (and take it again), bring the chain's clock to now, return
        the state."""
        # A revert keeps anvil's pool: a transaction left there (one it held queued, then replaced) would be
        # mined in the next segment once the reverted chain reaches its nonce again.
        self.chain.rpc.call("anvil_dropAllTransactions")
        if not self.chain.rpc.call("evm_revert", [self._snapshot]):
            raise RuntimeError(f"anvil refused to revert to snapshot {self._snapshot}")
        self.take_snapshot()
        self.chain.rpc.call("evm_setNextBlockTimestamp", [int(time.time())])
        self.chain.rpc.call("evm_mine")
        return self.state()

    def state(self, asset: str | None = None) -> ChainState:
        """The head height, the payee's balance of `asset` (the dev USDC by default) and the relayer's count
        of mined transactions."""
        return ChainState(
            height=int(self.chain.rpc.call("eth_blockNumber"), 16),
            payee_balance=self.chain.balance_of(self.pay_to, asset=asset),
            relayer_nonce=int(self.chain.rpc.call("eth_getTransactionCount", [self.relayer, "latest"]), 16),
        )

    @property
    def rpc_target(self) -> tuple[str, int]:
        """(host, port) of anvil's JSON-RPC endpoint."""
        if self.node.port is None:
            raise RuntimeError("anvil is not running")
        return ("127.0.0.1", self.node.port)

    def anvil_version(self) -> str:
        """anvil's version string, as its ``--version`` prints it."""
        completed = subprocess.run(  # noqa: S603 - the anvil binary devchain found, no shell
            [str(self.node.binary), "--version"], capture_output=True, text=True, check=False
        )
        first = completed.stdout.splitlines()[0] if completed.stdout else ""
        return first.removeprefix("anvil Version: ") or "unknown"

    def anvil_cpu_s(self) -> float | None:
        """CPU seconds anvil has used so far."""
        return process_cpu_s(self.node.pid)

    def anvil_threads_cpu_s(self) -> dict[int, float]:
        """CPU seconds each of anvil's threads has used so far."""
        return threads_cpu_s(self.node.pid)


@contextmanager
def start_bench_chain(payers: int) -> Iterator[BenchChain]:
    """Start anvil, deploy the token, fund `payers` payers and take the segment snapshot."""
    with AnvilNode() as node:
        chain = deploy_devchain(node.client, payers=payers)
        bench = BenchChain(chain=chain, node=node, relayer=Account.from_key(chain.relayer_key).address)
        bench.take_snapshot()
        yield bench
