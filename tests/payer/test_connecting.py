"""`Payer.connect` is awaited for the payer, or entered with `async with` to have it closed at the end."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from a2a_x402.payer import Connecting, MerchantUnreachableError, Payer
from a2a_x402.payer._connecting import connecting

from .conftest import TEXT


class _Line:
    """A connection of its own: counts how often it was closed."""

    def __init__(self) -> None:
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


@connecting
async def _open(line: _Line, *, fail: bool = False) -> _Line:
    if fail:
        raise ConnectionError("refused")
    return line


async def test_entered_it_is_closed_once_when_the_block_ends_however_it_ends() -> None:
    line = _Line()
    async with _open(line) as opened:
        assert opened is line and line.closed == 0
    assert line.closed == 1

    with pytest.raises(ValueError, match="inside"):
        async with _open(line):
            raise ValueError("inside")
    assert line.closed == 2


async def test_awaited_it_is_the_caller_s_to_close() -> None:
    line = _Line()

    opened = await _open(line)

    assert opened is line and line.closed == 0


async def test_a_connection_that_fails_to_open_raises_and_closes_nothing() -> None:
    line = _Line()

    with pytest.raises(ConnectionError):
        async with _open(line, fail=True):
            pass
    assert line.closed == 0


async def test_payer_connect_is_one_and_closes_the_payer_s_own_http_client(
    merchant: Callable[..., str], new_payer: Callable[..., str]
) -> None:
    connection = Payer.connect(merchant(), new_payer())
    assert isinstance(connection, Connecting)

    async with connection as payer:
        result = await payer.pay(TEXT)
    assert result.transaction

    with pytest.raises(MerchantUnreachableError):
        await payer.pay(TEXT)  # its clients are closed with the block
