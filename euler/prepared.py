"""Queries built by the ORM once, then run as their SQL with new values: the hot paths' reads without the ORM's
per-call building and compiling.

On this project's hot paths (a scheduling pass, a node's poll, an attempt's reports) a small query costs ~0.6–0.9
ms of the ORM's Python (filter(), the compiler's as_sql()) against ~0.04 ms to run its SQL: most of a pass's 17 ms
was building the same dozen statements again. `Prepared(build)` calls `build(*args)` (a function returning a
queryset: `values_list()` rows, or model instances with their select_related ones, locked or not) once per
database and argument shape, with marker values in place of the arguments; finds each marker among the compiled
statement's parameters; and from then on runs that statement with the call's own values in their places, making
the rows what the ORM makes of them (its column converters: JSON, dates; its model instances).

The arguments: ints, strings, datetimes, dates, or collections of ints or strings (an `__in` list: run sorted and
without duplicates, as an SQL IN means; past MAX_ITEMS the ORM builds it). The shape is each argument's kind and a
collection's length; a statement that the ORM finds empty for a shape (an empty IN that its WHERE needs) gives no
rows, as the ORM's EmptyResultSet. A build that transforms an argument instead of passing it through (its marker is
not among the parameters), or that prefetches, raises at its first call: a programming error, which
tests/jobs/test_prepared.py finds by running every prepared query of the project against its ORM build. Whatever
else a build reads (a constant, a setting) is read once, at its shape's first call: what changes is an argument.

`update_fields(obj, names)` and `insert(obj)` are a row's writes by its primary key as save() makes them, their
statement built once per model and field set.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import (
    FlatValuesListIterable,
    ModelIterable,
    ValuesListIterable,
    get_related_populators,
)
from django.db.models.sql.compiler import EmptyResultSet
from django.db.transaction import TransactionManagementError

_INT_MARK = -7_340_000_000_000  # markers: values that no query of ours holds as a constant
_STR_MARK = "\x1fprepared-marker-{}\x1f"
_TIME_MARK = datetime(1901, 2, 3, 4, 5, 6)  # noqa: DTZ001 - naive on purpose when USE_TZ is off; made aware below
_DAY_MARK = date(1801, 2, 3)

MAX_ITEMS = 64  # a collection longer than this is run through the ORM: no statement kept per length past it
_EMPTY = object()  # the shape's statement selects nothing (an empty IN)


def _kind(value) -> tuple:
    if isinstance(value, bool) or value is None:
        raise TypeError(f"prepared queries take ints, strings, datetimes, dates or collections of them, not {value!r}")
    if isinstance(value, int):
        return ("int",)
    if isinstance(value, str):
        return ("str",)
    if isinstance(value, datetime):
        return ("time", value.tzinfo is not None)
    if isinstance(value, date):
        return ("day",)
    if isinstance(value, Collection):
        items = set(value)
        kinds = {_kind(item)[0] for item in items}
        if not kinds <= {"int"} and not kinds <= {"str"}:
            raise TypeError(f"a prepared query's collection holds ints or strings, not {kinds}")
        return ("many", len(items), kinds.pop() if kinds else "int")
    raise TypeError(f"prepared queries take ints, strings, datetimes, dates or collections of them, not {type(value)}")


class Prepared:
    """`Prepared(lambda ids: Model.objects.filter(pk__in=ids).values_list("pk", "name"))`, then `query(ids)`: the
    rows (tuples, or values with `flat=True`), as `list(build(ids))` would give them."""

    made: list[Prepared] = []  # every one the project defines (a test runs each against its ORM build)

    def __init__(self, build: Callable[..., QuerySet]) -> None:
        self.build = build
        self._plans: dict[tuple, object] = {}
        Prepared.made.append(self)

    def __call__(self, *args) -> list:
        values = [sorted(set(a)) if isinstance(a, Collection) and not isinstance(a, str) else a for a in args]
        shape = tuple(_kind(a) for a in args)
        if any(kind[0] == "many" and kind[1] > MAX_ITEMS for kind in shape):
            return list(self.build(*values))  # a long IN: the ORM's building is small beside its rows; no plan kept
        plan = self._plans.get(shape)
        if plan is None:
            plan = self._plans[shape] = self._plan(shape)
        if plan is _EMPTY:
            return []
        connection = connections[plan.alias]
        if plan.locks and connection.features.has_select_for_update and connection.get_autocommit():
            raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
        params = [values[i] if j is None else values[i][j] if j >= 0 else const for i, j, const in plan.slots]
        params = [_adapt(connection, p) for p in params]
        with connection.cursor() as cursor:
            cursor.execute(plan.sql, params)
            rows = cursor.fetchall()
        if plan.width is not None:
            rows = [row[: plan.width] for row in rows]
        if plan.converters:
            rows = [list(row) for row in rows]
            for row in rows:
                for i, funcs, field in plan.converters:
                    for func in funcs:
                        row[i] = func(row[i], field, connection)
        if plan.models is not None:
            return plan.models(rows)
        if plan.flat:
            return [row[0] for row in rows]
        return [tuple(row) for row in rows]

    def first(self, *args):
        """The first row (or instance), or None: for a build that selects one (`[:1]`)."""
        rows = self(*args)
        return rows[0] if rows else None

    def _plan(self, shape: tuple):
        counter = itertools.count()
        marks, args = {}, []
        for i, kind in enumerate(shape):
            if kind[0] == "many":
                items = []
                for j in range(kind[1]):
                    n = next(counter)
                    mark = _INT_MARK - n if kind[2] == "int" else _STR_MARK.format(n)
                    marks[mark] = (i, j)
                    items.append(mark)
                args.append(items)
                continue
            n = next(counter)
            if kind[0] == "int":
                mark = _INT_MARK - n
            elif kind[0] == "str":
                mark = _STR_MARK.format(n)
            elif kind[0] == "day":
                mark = _DAY_MARK + timedelta(days=n)
            else:
                mark = _TIME_MARK + timedelta(microseconds=n)
                if kind[1]:
                    mark = mark.replace(tzinfo=UTC)
            marks[mark] = (i, None)
            args.append(mark)
        queryset = self.build(*args)
        models = queryset._iterable_class is ModelIterable
        if not models and queryset._iterable_class not in (ValuesListIterable, FlatValuesListIterable):
            raise TypeError("a prepared query is a values_list() queryset or one of model instances")
        if queryset._prefetch_related_lookups or queryset._known_related_objects:
            raise TypeError("a prepared query prefetches nothing (its rows are one statement's)")
        compiler = queryset.query.get_compiler(queryset.db)
        try:
            sql, params = compiler.as_sql()
        except EmptyResultSet:
            return _EMPTY
        connection = connections[queryset.db]
        adapted = {}
        for mark, where in marks.items():
            key = _adapt(connection, mark)
            adapted[key] = where
        slots, found = [], set()
        for param in params:
            passed = isinstance(param, (int, str, date)) and not isinstance(param, bool)
            where = adapted.get(param) if passed else None
            if where is None:
                slots.append((0, -1, param))
                continue
            if where in found:
                raise ValueError(f"a prepared query's marker appears twice in its statement: {sql}")
            found.add(where)
            slots.append((where[0], where[1], None))
        missing = set(adapted.values()) - found
        if missing:
            raise ValueError(f"a prepared query does not pass its arguments {sorted(missing)} through: {sql}")
        fields = [s[0] for s in compiler.select[0 : compiler.col_count]]
        # The columns' converters (JSON, dates, decimals) as the ORM's results_iter finds them; they read only the
        # settings behind their connection, and are called with the calling thread's own.
        converters = []
        for i, field in enumerate(fields):
            funcs = connection.ops.get_db_converters(field) + field.get_db_converters(connection)
            if funcs:
                converters.append((i, funcs, field))
        return _Plan(
            alias=queryset.db,
            sql=sql,
            slots=slots,
            converters=converters,
            width=compiler.col_count if compiler.has_extra_select else None,
            flat=queryset._iterable_class is FlatValuesListIterable,
            models=_instances(queryset.db, compiler) if models else None,
            locks=queryset.query.select_for_update,
        )


def _adapt(connection, value):
    """A datetime or date as the ORM passes it to this database (SQLite: text; PostgreSQL: as it is)."""
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    if isinstance(value, date):
        return connection.ops.adapt_datefield_value(value)
    return value


@dataclass(frozen=True)
class _Plan:
    alias: str
    sql: str
    slots: list[tuple]  # per parameter: (argument, its item or None, ...) or (0, -1, the constant)
    converters: list[tuple]
    width: int | None  # the selected columns when the statement selects more (its ordering's)
    flat: bool
    models: Callable[[list], list] | None
    locks: bool  # SELECT … FOR UPDATE: inside a transaction only, as the ORM requires


def _instances(db: str, compiler) -> Callable[[list], list]:
    """Rows to model instances as the ORM's ModelIterable makes them (select_related's included)."""
    select, klass_info, annotation_col_map = compiler.select, compiler.klass_info, compiler.annotation_col_map
    model_cls = klass_info["model"]
    start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
    init_list = [f[0].target.attname for f in select[start:end]]
    populators = get_related_populators(klass_info, select, db)

    def make(rows: list) -> list:
        out = []
        for row in rows:
            obj = model_cls.from_db(db, init_list, row[start:end])
            for populator in populators:
                populator.populate(row, obj)
            for attr_name, col_pos in annotation_col_map.items():
                setattr(obj, attr_name, row[col_pos])
            out.append(obj)
        return out

    return make


# Writes of one row by its primary key, as Model.save() makes them, without its per-call building: a statement per
# model and field set, its values prepared by each field as save() prepares them (auto_now, JSON, encryption).
_WRITES: dict[tuple, str] = {}


def _watched(model) -> bool:
    from django.db.models import signals

    return signals.pre_save.has_listeners(model) or signals.post_save.has_listeners(model)


def update_fields(obj, names) -> None:
    """`obj.save(update_fields=names)`: the same row written, the same error when it is gone; a model that a
    pre_save or post_save receiver watches is saved through save() itself."""
    model = type(obj)
    if _watched(model) or model._meta.parents:
        obj.save(update_fields=names)
        return
    names = tuple(dict.fromkeys(names))
    connection = connections[obj._state.db or "default"]
    fields = [model._meta.get_field(name) for name in names]
    key = ("update", model, names, connection.alias)
    sql = _WRITES.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        sets = ", ".join(f"{qn(f.column)} = %s" for f in fields)
        sql = _WRITES[key] = f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(model._meta.pk.column)} = %s"
    params = [f.get_db_prep_save(f.pre_save(obj, False), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, obj.pk])
        if cursor.rowcount != 1:
            from django.db import DatabaseError

            raise DatabaseError("Save with update_fields did not affect any rows.")


def insert(*objs) -> None:
    """`obj.save()` of new rows of one model whose ids the caller does not need (the instances get none), in one
    statement run for each; a watched model, or one whose primary key is not the database's to choose, through
    save() itself."""
    if not objs:
        return
    obj = objs[0]
    model = type(obj)
    meta = model._meta
    if _watched(model) or meta.parents or not meta.pk.db_returning or any(o.pk is not None for o in objs):
        for one in objs:
            one.save(force_insert=True)
        return
    if any(type(o) is not model for o in objs):
        raise TypeError("prepared.insert writes rows of one model at a time")
    connection = connections[obj._state.db or "default"]
    fields = [f for f in meta.concrete_fields if f is not meta.pk]
    key = ("insert", model, connection.alias)
    sql = _WRITES.get(key)
    if sql is None:
        qn = connection.ops.quote_name
        columns = ", ".join(qn(f.column) for f in fields)
        sql = _WRITES[key] = f"INSERT INTO {qn(meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    rows = [[f.get_db_prep_save(f.pre_save(one, True), connection) for f in fields] for one in objs]
    with connection.cursor() as cursor:
        if len(rows) == 1:
            cursor.execute(sql, rows[0])
        else:
            cursor.executemany(sql, rows)


def update_where(model, pk, values: dict, *, add: dict | None = None, **where) -> int:
    """`model.objects.filter(pk=pk, **where).update(**values, **{f: F(f) + n for f, n in add.items()})` for
    equality (None: IS NULL) and `<field>__in` conditions on the row's own columns (`pk` None: no condition on it):
    how many rows it changed, its statement built once per model, field set and condition shape. Values are
    prepared by their fields as update() prepares them."""
    connection = connections["default"]
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
        "update_where",
        model,
        pk is None,
        tuple(f.name for f, _ in adds),
        tuple((f.name, value is None) for f, value in sets),
        tuple((f.name, op, len(value) if op else value is None) for f, op, value in conds),
    )
    sql = _WRITES.get(key)
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
        sql = _WRITES[key] = sql + (f" WHERE {' AND '.join(tests)}" if tests else "")
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
