"""Priority classes as a job meets them: which class a submission gets (its project's default, or one it names up
to its project's maximum), and the list callers may read. The operator manages the classes (quotas.PriorityClass,
in the admin) and each project's default and maximum."""

from __future__ import annotations

from euler.errors import Forbidden, InvalidInput


def resolve(*, project, requested: str | None) -> tuple[str, int]:
    """(class name, value) for a job of `project` that asks for `requested` (None: the project's default; no
    default: "" and 0). 400 unknown_priority_class for a name that is not a class; 403 priority_class_not_allowed
    above the project's maximum (no maximum: its default, or value 0 without one)."""
    from quotas.models import PriorityClass

    default = project.default_priority_class
    if requested is None:
        return (default.name, default.value) if default is not None else ("", 0)
    found = PriorityClass.objects.filter(name=requested).first()
    if found is None:
        raise InvalidInput(f"There is no priority class {requested!r}.", code="unknown_priority_class")
    ceiling = project.max_priority_class or default
    top = ceiling.value if ceiling is not None else 0
    if found.value > top:
        shown = f"{ceiling.name} ({top})" if ceiling is not None else "the default (0)"
        raise Forbidden(
            f"Priority class {found.name!r} ({found.value}) is above this project's maximum, {shown}.",
            code="priority_class_not_allowed",
        )
    return found.name, found.value


def apply(*, project, spec: dict) -> dict:
    """Replace the spec's requested `priority_class` (a name, or absent) by the class's name and value columns."""
    spec["priority_class"], spec["priority_value"] = resolve(
        project=project, requested=spec.pop("priority_class", None)
    )
    return spec


def visible(*, project) -> list[dict]:
    """Every class, highest first, with whether this project may ask for it and which is its default."""
    from quotas.models import PriorityClass

    default = project.default_priority_class
    ceiling = project.max_priority_class or default
    top = ceiling.value if ceiling is not None else 0
    return [
        {
            "name": c.name,
            "value": c.value,
            "description": c.description,
            "allowed": c.value <= top,
            "default": default is not None and c.pk == default.pk,
        }
        for c in PriorityClass.objects.order_by("-value", "name")
    ]
