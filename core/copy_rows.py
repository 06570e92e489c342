"""Rows written with PostgreSQL's COPY: a thousand rows cost one round trip, not a thousand INSERTs.

    copy_rows(cursor, table, columns, rows)       # psycopg's cursor (a Django cursor's `.cursor`)
    checked_columns(model, columns, with_id=...)  # the columns a COPY names, checked against the model

A COPY bypasses the ORM: no defaults, no save(). `checked_columns` refuses to COPY when a table's concrete
columns are not exactly the ones named, so a new model field is never silently left empty.
"""

_CHECKED: set = set()


def copy_rows(cursor, table: str, columns, rows) -> None:
    """COPY `rows` (tuples in the order of `columns`) into `table`, in the cursor's transaction."""
    if not rows:
        return
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def model_columns(model, *, with_id: bool) -> list[str]:
    """The model's concrete columns; with_id: its primary key's too."""
    return [f.column for f in model._meta.concrete_fields if with_id or not f.primary_key]


def checked_columns(model, columns, *, with_id: bool):
    """`columns`, once checked to be exactly the model's concrete columns (RuntimeError otherwise)."""
    if model not in _CHECKED:
        actual = model_columns(model, with_id=with_id)
        if set(actual) != set(columns) or len(actual) != len(columns):
            raise RuntimeError(f"{model.__name__}: columns {sorted(set(actual) ^ set(columns))} named wrongly")
        _CHECKED.add(model)
    return columns
