from __future__ import annotations

from .conftest import TckRun


def test_summary(tck_run: TckRun) -> None:
    for result in ("passed", "failed", "error", "skipped"):
        print(result, len(tck_run.named(result)))
    for o in tck_run.outcomes:
        if o.result in ("failed", "error"):
            print(o.classname, o.name, o.result, o.detail[:300])
    assert False
