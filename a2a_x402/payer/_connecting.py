"""A connection being opened, usable both ways: `await` it for the object, or `async with` it to have
the object closed at the end of the block (`async with Payer.connect(url, key) as payer:`)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Generator
from functools import wraps
from types import TracebackType
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

__all__ = ["Connecting", "connecting"]


class _Closable(Protocol):
    async def aclose(self) -> None: ...


_T = TypeVar("_T", bound=_Closable)
_P = ParamSpec("_P")


class Connecting(Generic[_T]):
    """The connection `opening` makes: `await` it to get it (then close it yourself), or enter it with
    `async with` to have it closed when the block ends, however it ends."""

    def __init__(self, opening: Coroutine[Any, Any, _T]) -> None:
        self._opening = opening
        self._opened: _T | None = None

    def __await__(self) -> Generator[Any, None, _T]:
        return self._opening.__await__()

    async def __aenter__(self) -> _T:
        self._opened = await self._opening
        return self._opened

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._opened is not None:
            await self._opened.aclose()


def connecting(open_: Callable[_P, Coroutine[Any, Any, _T]]) -> Callable[_P, Connecting[_T]]:
    """`open_`, answering a `Connecting` (awaitable, or an async context manager) instead of a coroutine."""

    @wraps(open_)
    def opened(*args: _P.args, **kwargs: _P.kwargs) -> Connecting[_T]:
        return Connecting(open_(*args, **kwargs))

    return opened
