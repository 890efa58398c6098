"""Queries built by the ORM once, then run as their SQL with new values: the hot paths' reads without the ORM's
per-call building and compiling.

On this project's hot paths (a scheduling pass, a node's poll, an attempt's reports) a query cost more in the ORM's
Python (filter(), the compiler's as_sql()) than in running its SQL, and the statements were the same each time:
`bench/prepared.py` times the project's own against their ORM builds (on SQLite 0.65 against 0.06 ms for a pass's
read; BENCHMARKS.md, "Queries compiled once on the hot path"). `Prepared(build)` calls `build(*args)` (a function returning a
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

The hot paths' writes, built once the same way: euler/writes.py.
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
