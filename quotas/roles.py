"""Roles and their order (pure): what a role may do, and the lower of two roles."""

from __future__ import annotations

OWNER = "owner"
MEMBER = "member"
ORDER = (MEMBER, OWNER)  # lowest first
RANK = {role: rank for rank, role in enumerate(ORDER)}


def lower(a: str | None, b: str | None) -> str | None:
    """The lower of two roles; None (no role at all) is lowest."""
    if a is None or b is None:
        return None
    return a if RANK[a] <= RANK[b] else b


def allows(have: str | None, need: str) -> bool:
    """True when a caller with role `have` may do what needs `need`."""
    return have is not None and RANK[have] >= RANK[need]


def effective_key_role(*, key_role: str, creator_role: str | None, has_creator: bool) -> str | None:
    """What a key acts with: its own role, lowered to its creator's current role in the project.

    A key made by an operator (the `createapikey` command) has no creator and acts with its own role;
    a key whose creator is no longer a member acts with nothing.
    """
    if not has_creator:
        return key_role
    return lower(key_role, creator_role)
