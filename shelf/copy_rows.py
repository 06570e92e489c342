"""New rows inserted with COPY on PostgreSQL, bulk_create elsewhere (CockroachDB).

    copy_rows(model, fields, rows, *, batch_size)    rows: tuples in the order of `fields`

bulk_create's SQL building costs more than the insert itself at EPCIS volumes (about 2,000 against over 5,000
events/s in bench/shelf.py). Used for received events (shelf.receiving) and new units (shelf.transitions, the
one writer of Unit.state)."""

from django.db import connection


def copy_rows(model, fields, rows, *, batch_size: int = 5000) -> None:
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
