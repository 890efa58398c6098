"""Who may do what: each route declares, next to itself, the role each HTTP method needs.

The declaration is read three ways: by `quotas.api.base.HasProject` (enforcement, DRF views), by
`quotas.api.base.require_role` (the few views that authenticate themselves), and by `permission_table`
(the table in docs/api.md, written by `manage.py permtable`). One source, so they cannot drift.

    class MemberDetailView(APIView):
        access = {"patch": owner(), "delete": owner()}

    @declare(get=member())
    async def job_logs(request, job_id): ...
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quotas import roles

SAFE = ("get", "head", "options")


@dataclass(frozen=True)
class Rule:
    role: str  # the least role that may call the method at all
    owner_fields: frozenset[str] = field(default_factory=frozenset)  # body fields only an owner may send
    note: str = ""  # what the table says beside the role (rules checked on the object itself)


def owner(note: str = "") -> Rule:
    return Rule(roles.OWNER, note=note)


def member(*, owner_fields: tuple[str, ...] = (), note: str = "") -> Rule:
    return Rule(roles.MEMBER, frozenset(owner_fields), note)


def declare(**methods: Rule):
    """Attach a declaration to a function view (DRF classes set the `access` attribute instead)."""

    def attach(view):
        view.access = {m.lower(): r for m, r in methods.items()}
        return view

    return attach


def rules_of(view) -> dict[str, Rule] | None:
    """The declaration of a resolved view: a DRF class view (`as_view()`), or a declared function."""
    cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
    declared = getattr(cls, "access", None) if cls is not None else None
    if declared is None:
        declared = getattr(view, "access", None)
    return declared


def rule_for(declared: dict[str, Rule] | None, method: str) -> Rule | None:
    if not declared:
        return None
    method = method.lower()
    if method == "head":
        method = "get"
    if method == "options":
        return declared.get("options") or member()
    return declared.get(method)


def refusal(rule: Rule, acting: str | None, body_fields=()) -> tuple[str, str] | None:
    """(code, message) when a caller acting as `acting` may not do what `rule` guards, else None."""
    if not roles.allows(acting, rule.role):
        return f"{rule.role}_required", f"This needs the {rule.role} role; you act as {acting or 'nobody'}."
    if rule.owner_fields and not roles.allows(acting, roles.OWNER):
        sent = sorted(set(body_fields) & rule.owner_fields)
        if sent:
            return "owner_required", f"Only a project owner can set {sent[0]!r}."
    return None


def cell(rule: Rule | None, role: str) -> str:
    """One cell of the table: what `role` gets from the route's rule."""
    if rule is None:
        return "—"
    if not roles.allows(role, rule.role):
        return "no"
    extra = []
    if rule.owner_fields and not roles.allows(role, roles.OWNER):
        extra.append("not " + ", ".join(f"`{f}`" for f in sorted(rule.owner_fields)))
    if rule.note and not roles.allows(role, roles.OWNER):
        extra.append(rule.note)
    return "yes" + (f" ({'; '.join(extra)})" if extra else "")
