"""`FailureThrottle`: wrong credentials per (key, client network) in a sliding window, on a set clock."""

from __future__ import annotations

import pytest

from a2a_x402.observability import FailureThrottle, client_network


def test_an_address_is_refused_after_its_failures_until_the_oldest_leaves_the_window() -> None:
    throttle = FailureThrottle(max_failures=3, window_s=60)
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
    throttle = FailureThrottle(max_failures=2, window_s=10)
    for second in range(0, 100, 10):
        assert throttle.retry_after("acme", "10.0.0.1", now=second) is None
        throttle.refused("acme", "10.0.0.1", now=second)


def test_the_table_of_addresses_is_bounded_forgetting_the_least_recently_refused() -> None:
    throttle = FailureThrottle(max_failures=1, window_s=60, max_addresses=2)
    throttle.refused("acme", "a", now=0)
    throttle.refused("acme", "b", now=1)
    throttle.refused("acme", "a", now=2)  # a is now the most recent
    throttle.refused("acme", "c", now=3)  # b is forgotten

    assert [address for address in "abc" if throttle.retry_after("acme", address, now=4) is not None] == [
        "a",
        "c",
    ]


def test_failed_counts_and_says_the_whole_seconds_to_wait_once_over_the_limit() -> None:
    throttle = FailureThrottle(max_failures=2, window_s=10)
    assert [throttle.failed("acme", "10.0.0.1", now=second) for second in (0, 0.5, 1, 9.8)] == [
        None,
        None,
        9,  # the failure at 0 leaves the window at 10
        1,  # 0.7 s, rounded up: a Retry-After of 0 would invite an immediate retry
    ]


@pytest.mark.parametrize(
    ("host", "network"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("[2001:db8:1:2::9]", "2001:db8:1:2::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
        ("", ""),
    ],
)
def test_a_client_counts_as_its_ipv4_address_or_its_ipv6_64(host: str, network: str) -> None:
    assert client_network(host) == network


def test_every_address_of_one_ipv6_64_shares_one_count() -> None:
    throttle = FailureThrottle(max_failures=3, window_s=60)
    for n in range(3):
        throttle.refused("acme", f"2001:db8:1:2::{n + 1:x}", now=0)

    assert throttle.retry_after("acme", "2001:db8:1:2:ffff::1", now=1) == 59
    assert throttle.retry_after("acme", "2001:db8:1:3::1", now=1) is None  # the next /64 is another client
