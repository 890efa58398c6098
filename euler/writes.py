"""The hot paths' writes with their statements built once (euler/prepared.py does the same for reads): an UPDATE
as QuerySet.update() writes it, a row's fields as save(update_fields=…) writes them, new rows as save() inserts
them, each statement kept per model, field set and condition shape, its values prepared by each field as the ORM
prepares them (auto_now, JSON, encryption). A model a pre_save or post_save receiver watches is saved through save()
itself; update() sends no signal, and neither does update_where.
"""

from __future__ import annotations

from django.db import DatabaseError, connections, router
from django.db.models import signals

_STATEMENTS: dict[tuple, str] = {}


def _watched(model) -> bool:
    return signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model)


def update_where(model, pk, values: dict, *, add: dict | None = None, **where) -> int:
    """`model.objects.filter(pk=pk, **where).update(**values, **{f: F(f) + n for f, n in add.items()})` for
    equality (None: IS NULL) and `<field>__in` conditions on the row's own columns (`pk` None: no condition on it):
    how many rows it changed."""
    connection = connections[router.db_for_write(model)]
    meta = model._meta
    sets = [(meta.get_field(name), value) for name, value in values.items()]
    adds = [(meta.get_field(name), value) for name, value in (add or {}).items()]
    conds = []
    for lookup, value in where.items():
        name, _, op = lookup.partition("__")
        if op not in ("", "in"):
            raise ValueError(f"update_where takes equality and __in conditions, not {lookup}")
        conds.append((meta.get_field(name), op, value))
    key = (
        model,
        connection.alias,
        pk is None,
        tuple(f.name for f, _ in adds),
        tuple((f.name, value is None) for f, value in sets),
        tuple((f.name, op, len(value) if op else value is None) for f, op, value in conds),
    )
    sql = _STATEMENTS.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        assign = [f"{qn(f.column)} = NULL" if v is None else f"{qn(f.column)} = %s" for f, v in sets]
        assign += [f"{qn(f.column)} = {qn(f.column)} + %s" for f, _ in adds]
        tests = [] if pk is None else [f"{qn(meta.pk.column)} = %s"]
        for f, op, value in conds:
            if op:
                tests.append(f"{qn(f.column)} IN ({', '.join(['%s'] * len(value))})")
            else:
                tests.append(f"{qn(f.column)} IS NULL" if value is None else f"{qn(f.column)} = %s")
        sql = f"UPDATE {qn(meta.db_table)} SET {', '.join(assign)}"
        sql = _STATEMENTS[key] = sql + (f" WHERE {' AND '.join(tests)}" if tests else "")
    params = [f.get_db_prep_save(v, connection) for f, v in sets if v is not None]
    params += [f.get_db_prep_value(v, connection) for f, v in adds]
    if pk is not None:
        params.append(meta.pk.get_db_prep_value(pk, connection))
    for f, op, value in conds:
        if op:
            params.extend(f.get_db_prep_value(v, connection) for v in value)
        elif value is not None:
            params.append(f.get_db_prep_value(value, connection))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update_fields(obj, names) -> None:
    """`obj.save(update_fields=names)`: the same row written (auto_now fields set on `obj` too), the same error when
    it is gone."""
    model = type(obj)
    if _watched(model) or model._meta.parents:
        obj.save(update_fields=names)
        return
    values = {name: model._meta.get_field(name).pre_save(obj, False) for name in dict.fromkeys(names)}
    if update_where(model, obj.pk, values) != 1:
        raise DatabaseError("Save with update_fields did not affect any rows.")


def insert(*objs) -> None:
    """`obj.save()` of new rows of one model whose ids the caller does not need (the instances get none), in one
    statement run for each; a model whose primary key is not the database's to choose, through save() itself."""
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    if _watched(model) or meta.parents or not meta.pk.db_returning or any(o.pk is not None for o in objs):
        for one in objs:
            one.save(force_insert=True)
        return
    if any(type(o) is not model for o in objs):
        raise TypeError("writes.insert writes rows of one model at a time")
    connection = connections[router.db_for_write(model)]
    fields = [f for f in meta.concrete_fields if f is not meta.pk]
    key = (model, connection.alias, "insert")
    sql = _STATEMENTS.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        columns = ", ".join(qn(f.column) for f in fields)
        placeholders = ", ".join(["%s"] * len(fields))
        sql = _STATEMENTS[key] = f"INSERT INTO {qn(meta.db_table)} ({columns}) VALUES ({placeholders})"
    rows = [[f.get_db_prep_save(f.pre_save(one, True), connection) for f in fields] for one in objs]
    with connection.cursor() as cursor:
        if len(rows) == 1:
            cursor.execute(sql, rows[0])
        else:
            cursor.executemany(sql, rows)
