"""The reference merchant's text-stats skill: its counts and the one-line summary it answers with."""

from __future__ import annotations

import pytest

from a2a_x402.merchant.demo_skill import stats_summary, text_stats


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("The quick brown fox. It runs.", "6 words, 2 sentences, 29 characters."),
        ("Hi.", "1 word, 1 sentence, 3 characters."),
        ("", "0 words, 0 sentences, 0 characters."),
        ("A", "1 word, 1 sentence, 1 character."),
    ],
)
def test_the_summary_counts_in_the_singular_for_one(text: str, summary: str) -> None:
    assert stats_summary(text_stats(text)) == summary
