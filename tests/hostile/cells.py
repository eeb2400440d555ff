"""What the tenant matrices (`test_tenant_matrix*.py`) share: their cells, a cell's refusal, and the proof
that a refused cell changed nothing.

`cells` lists every (victim, intruder, operation, binding) of a matrix; `refusal` runs one attempt and
returns the `A2ACallError` it was refused with (the test fails if the attempt succeeds or hangs);
`refused_as_nowhere` is the push-notification-config cell: refused exactly as for a task that does not
exist; `unchanged_state` fails the test if any row, the relayer nonce or a payee's balance moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import TYPE_CHECKING, Any

import pytest

from a2a_x402.devchain import DevChain
from tests.fixtures.merchant import A2ACallError

from .state import changes, take_snapshot, wait_until_quiet

if TYPE_CHECKING:
    from _pytest.mark import ParameterSet

__all__ = ["NO_SUCH_TASK", "cells", "first_event", "refusal", "refused_as_nowhere", "unchanged_state"]

NO_SUCH_TASK = "00000000-0000-4000-8000-000000000000"
"""A task id no merchant has: what a refusal about a victim's task must be indistinguishable from."""

_CELL_TIMEOUT_S = 10.0


def cells(
    victims: Iterable[str],
    intruders: Callable[[str], Iterable[str]],
    operations: Mapping[str, Sequence[str]],
    names: Mapping[str, str],
    *,
    label: str = "",
) -> list[ParameterSet]:
    """(victim, intruder, operation, binding): each of `intruders(victim)` tries every operation of each
    binding (`operations`: binding -> its operations) on every victim; ids name the intruder by `names`."""
    prefix = f"{label}-" if label else ""
    return [
        pytest.param(
            victim,
            intruder,
            operation,
            binding,
            id=f"{names[intruder]}-{prefix}{operation}-{victim}-{binding}",
        )
        for victim in victims
        for intruder in intruders(victim)
        for binding, binding_operations in operations.items()
        for operation in binding_operations
    ]


async def first_event(subscription: AbstractAsyncContextManager[AsyncIterator[Any]]) -> None:
    """Open a stream and wait for its first event (a refused stream raises before it has one)."""
    async with subscription as events:
        await anext(events)


async def refusal(attempt: Awaitable[object]) -> A2ACallError:
    """The error `attempt` was refused with; the test fails if it succeeded or did not answer in time."""
    with pytest.raises(A2ACallError) as refused:
        await asyncio.wait_for(attempt, timeout=_CELL_TIMEOUT_S)
    return refused.value


async def refused_as_nowhere(call: Callable[[str], Awaitable[object]], task_id: str) -> A2ACallError:
    """`call` on `task_id` is refused exactly as on a task that does not exist (the same reason, coded the
    same): the refusal does not reveal the task. Returns the refusal."""
    error = await refusal(call(task_id))
    baseline = await refusal(call(NO_SUCH_TASK))
    assert (error.reason, error.coded) == (baseline.reason, baseline.coded), (error, baseline)
    return error


@contextmanager
def unchanged_state(database_url: str, chain: DevChain, payees: Iterable[str]) -> Iterator[None]:
    """Fails if anything changed in the block (checked once the merchant is quiet)."""
    payees = tuple(payees)
    before = take_snapshot(database_url, chain, payees)
    yield
    wait_until_quiet(database_url, chain, payees, settle_s=0.1)
    moved = changes(before, take_snapshot(database_url, chain, payees))
    assert not moved, f"a refused request changed {moved}"
