"""Rows written with PostgreSQL's COPY: a thousand rows cost one round trip, not a thousand INSERTs.

    copy_rows(cursor, model, columns, rows, with_id=...)   # psycopg's cursor (a Django cursor's `.cursor`)
    copy_models(cursor, [(model, columns, rows, with_id), ...])   # several tables, in this order
    insert_rows(model, fields, rows, batch_size=...)   # by field names; COPY, or bulk_create on CockroachDB

A COPY bypasses the ORM: no defaults, no save(). The columns a COPY names are checked once per model
against its concrete columns (its primary key's too when with_id): a new model field is never silently
left empty, the COPY is refused (RuntimeError).
"""

from django.db import connection

_CHECKED: set = set()


def copy_models(cursor, batches) -> None:
    """copy_rows for each (model, columns, rows, with_id), in the order given."""
    for model, columns, rows, with_id in batches:
        copy_rows(cursor, model, columns, rows, with_id=with_id)


def copy_rows(cursor, model, columns, rows, *, with_id: bool) -> None:
    """COPY `rows` (tuples in the order of `columns`) into the model's table, in the cursor's transaction."""
    _check(model, columns, with_id=with_id)
    if not rows:
        return
    with cursor.copy(f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _check(model, columns, *, with_id: bool) -> None:
    if model in _CHECKED:
        return
    actual = [f.column for f in model._meta.concrete_fields if with_id or not f.primary_key]
    if set(actual) != set(columns) or len(actual) != len(columns):
        raise RuntimeError(f"{model.__name__}: columns {sorted(set(actual) ^ set(columns))} named wrongly")
    _CHECKED.add(model)


def insert_rows(model, fields, rows, *, batch_size: int = 5000) -> None:
    """New rows (tuples in the order of the model's `fields`, by field name) in the connection's
    transaction: COPY on PostgreSQL, bulk_create elsewhere (CockroachDB). Fields left out take NULL, not
    their defaults. bulk_create's SQL building costs more than the insert itself at EPCIS volumes (about
    2,000 against over 5,000 events/s in bench/shelf.py): the shelf's received events and new units."""
    rows = list(rows)
    if not rows:
        return
    fields = list(fields)
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**dict(zip(fields, row, strict=True))) for row in rows],
                                  batch_size=batch_size)
        return
    columns = ", ".join(connection.ops.quote_name(model._meta.get_field(f).column) for f in fields)
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {connection.ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
