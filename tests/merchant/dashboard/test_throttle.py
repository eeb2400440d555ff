"""`LoginThrottle`: wrong credentials per (tenant, address) in a sliding window, on a clock the test sets."""

from __future__ import annotations

from a2a_x402.merchant.dashboard import LoginThrottle


def test_an_address_is_refused_after_its_failures_until_the_oldest_leaves_the_window() -> None:
    throttle = LoginThrottle(max_failures=3, window_s=60)
    for second in (0, 10, 20):
        assert throttle.retry_after("acme", "10.0.0.1", now=second) is None
        throttle.refused("acme", "10.0.0.1", now=second)

    assert throttle.retry_after("acme", "10.0.0.1", now=30) == 30  # the failure at 0 leaves the window at 60
    assert throttle.retry_after("acme", "10.0.0.2", now=30) is None  # another address is not affected
    assert throttle.retry_after("globex", "10.0.0.1", now=30) is None  # nor another tenant
    assert throttle.retry_after("acme", "10.0.0.1", now=60) is None
    throttle.refused("acme", "10.0.0.1", now=60)
    assert (
        throttle.retry_after("acme", "10.0.0.1", now=61) == 9
    )  # now the failure at 10 is the oldest of three


def test_failures_spread_wider_than_the_window_never_refuse() -> None:
    throttle = LoginThrottle(max_failures=2, window_s=10)
    for second in range(0, 100, 10):
        assert throttle.retry_after("acme", "10.0.0.1", now=second) is None
        throttle.refused("acme", "10.0.0.1", now=second)


def test_the_table_of_addresses_is_bounded_forgetting_the_least_recently_refused() -> None:
    throttle = LoginThrottle(max_failures=1, window_s=60, max_addresses=2)
    throttle.refused("acme", "a", now=0)
    throttle.refused("acme", "b", now=1)
    throttle.refused("acme", "a", now=2)  # a is now the most recent
    throttle.refused("acme", "c", now=3)  # b is forgotten

    assert [address for address in "abc" if throttle.retry_after("acme", address, now=4) is not None] == [
        "a",
        "c",
    ]
