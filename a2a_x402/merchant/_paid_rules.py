"""What `paid_app` refuses before anything is built, and the skill resolver and default tenant it derives.

Every refusal is a `PaidAppError` whose message is one line saying what is wrong and how to fix it: a call
that would serve a card listing one skill while charging for another, or charge a price nobody set, must not
start at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from a2a.types import AgentSkill, Message
from a2a.utils.errors import InvalidParamsError

from ._tenant_rules import amount_problems
from .tenants import DEFAULT_TENANT, TenantRegistry, tenant_name

__all__ = ["PaidAppError", "checked_prices", "checked_skills", "priced_tenants", "skill_resolver"]


class PaidAppError(ValueError):
    """`paid_app` was called wrongly (its skills, prices or `skill_of`); the message is one line saying
    what is wrong and what to do. Raised before anything is built, connected or started."""

    code = "paid_app_invalid"


def checked_skills(skills: Sequence[AgentSkill]) -> tuple[AgentSkill, ...]:
    """`skills`, each an `AgentSkill` with an id of its own.

    Raises:
        PaidAppError: no skill, a skill that is not an `AgentSkill`, one without an id, or an id twice.
    """
    found = tuple(skills)
    if not found:
        raise PaidAppError("skills is empty: list the AgentSkill(s) the agent offers (its card names them)")
    seen: set[str] = set()
    for skill in found:
        if not isinstance(skill, AgentSkill):
            raise PaidAppError(f"skills must hold a2a.types.AgentSkill, got {type(skill).__name__}")
        if not skill.id:
            raise PaidAppError(f"the skill {skill.name!r} has no id: give every AgentSkill an id")
        if skill.id in seen:
            raise PaidAppError(f"the skill id {skill.id!r} is listed twice in skills: ids must differ")
        seen.add(skill.id)
    return found


def checked_prices(prices: Mapping[str, int] | None, skills: Sequence[AgentSkill]) -> dict[str, int]:
    """`prices` (atomic units by skill id), each for a skill in `skills` and a whole non-negative amount.

    Raises:
        PaidAppError: a price for a skill not offered, or one that is not an int in [0, 2**256).
    """
    offered = [skill.id for skill in skills]
    checked: dict[str, int] = {}
    for skill_id, amount in (prices or {}).items():
        if skill_id not in offered:
            raise PaidAppError(
                f"prices names the skill {skill_id!r}, which is not in skills (offered: {', '.join(offered)})"
            )
        problems = amount_problems(f"prices[{skill_id!r}]", amount)
        if problems:
            raise PaidAppError(problems[0])
        checked[skill_id] = amount
    return checked


def skill_resolver(
    skills: Sequence[AgentSkill], skill_of: Callable[[Message], str] | None
) -> Callable[[Message], str]:
    """Which skill a message asks for: the only skill, or `skill_of`'s answer, which must name one of
    `skills` (a message naming none is refused with `InvalidParamsError`, before any task or price).

    Raises:
        PaidAppError: several skills and no `skill_of`, or a `skill_of` that is not callable.
    """
    ids = frozenset(skill.id for skill in skills)
    if skill_of is None:
        if len(skills) > 1:
            raise PaidAppError(
                f"{len(skills)} skills and no skill_of: pass skill_of, a function telling which skill "
                "(by id) a message asks for"
            )
        only = skills[0].id
        return lambda _message: only
    if not callable(skill_of):
        raise PaidAppError(f"skill_of must be a function of the message, got {type(skill_of).__name__}")
    resolve = skill_of

    def resolved(message: Message) -> str:
        skill = resolve(message)
        if skill not in ids:
            # Never priced at a tenant's default price: the card lists no such skill. The client's own
            # words (which `skill_of` may have returned) are not echoed.
            raise InvalidParamsError(
                message=f"the message asks for no skill this agent offers ({', '.join(sorted(ids))})"
            )
        return skill

    return resolved


def priced_tenants(
    tenants: TenantRegistry, prices: Mapping[str, int], skills: Sequence[AgentSkill], source: str | None
) -> TenantRegistry:
    """`tenants` with `prices` as the default tenant's skill prices; every tenant's skill prices must name
    offered skills (`source` is the tenants file they came from, if any).

    Raises:
        PaidAppError: a tenant prices a skill not offered; `prices` is given but there is no default tenant;
            or a skill is priced both in `prices` and in the default tenant's `skill_prices` or
            `metered_skills`.
    """
    offered = {skill.id for skill in skills}
    where = source or "the tenants"
    for tenant in tenants:
        for key, skill_ids in (
            ("skill_prices", tenant.skill_prices),
            ("metered_skills", tenant.metered_skills),
        ):
            unknown = sorted(set(skill_ids) - offered)
            if unknown:
                raise PaidAppError(
                    f"{where}: {tenant_name(tenant.id)}.{key} names {', '.join(map(repr, unknown))}, "
                    f"not in skills (offered: {', '.join(sorted(offered))})"
                )
    if not prices:
        return tenants
    default = tenants.get(DEFAULT_TENANT)
    if default is None:
        raise PaidAppError(
            f"prices are the default tenant's, but {where} declares no [default] tenant: add one, "
            "or give the prices in the file"
        )
    for key, skill_ids in (
        ("skill_prices", default.skill_prices),
        ("metered_skills", default.metered_skills),
    ):
        both = sorted(set(prices) & set(skill_ids))
        if both:
            raise PaidAppError(
                f"{', '.join(map(repr, both))} priced both in prices and in {where}'s [default] "
                f"{key}: keep one"
            )
    priced = dataclasses.replace(default, skill_prices={**default.skill_prices, **prices})
    return TenantRegistry(priced if tenant.id == DEFAULT_TENANT else tenant for tenant in tenants)
