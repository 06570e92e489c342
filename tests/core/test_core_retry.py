"""The 40001 retry helper against a real serialization failure on PostgreSQL.

Two real connections: Django's (the transaction under test, at SERIALIZABLE) and a second psycopg
connection that commits a conflicting SERIALIZABLE transaction in the middle of it.
"""

import psycopg
import pytest
from django.db import OperationalError, connection

from core.retry import RetriesExhausted, run_in_transaction


@pytest.fixture
def counter_table(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE retry_probe (id int PRIMARY KEY, n int NOT NULL)")
        cursor.execute("INSERT INTO retry_probe VALUES (1, 0)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS retry_probe")


def other_connection():
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], password=s["PASSWORD"] or None,
                           dbname=s["NAME"], autocommit=True)


def conflicting_increment(rival, attempts_seen, *, interfere_on):
    """Read n, let the rival commit its own increment of the same row, then write n + 1."""
    attempts_seen.append(len(attempts_seen) + 1)
    with connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        cursor.execute("SELECT n FROM retry_probe WHERE id = 1")
        n = cursor.fetchone()[0]
        if attempts_seen[-1] in interfere_on:
            with rival.transaction():
                rival.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
                rival.execute("UPDATE retry_probe SET n = n + 100 WHERE id = 1")
        cursor.execute("UPDATE retry_probe SET n = %s WHERE id = 1", [n + 1])
    return n + 1


@pytest.mark.django_db(transaction=True)
def test_it_retries_a_real_serialization_failure_and_then_succeeds(counter_table):
    attempts = []
    with other_connection() as rival:
        result = run_in_transaction(conflicting_increment, rival, attempts, interfere_on={1}, attempts=5,
                                    base_delay=0.001)
        final = rival.execute("SELECT n FROM retry_probe WHERE id = 1").fetchone()[0]
    assert attempts == [1, 2]
    # The retried transaction re-read the rival's committed +100: no lost update.
    assert result == 101 and final == 101


@pytest.mark.django_db(transaction=True)
def test_without_the_helper_the_same_conflict_is_a_40001_error(counter_table):
    from django.db import transaction

    with other_connection() as rival:
        with pytest.raises(OperationalError) as raised:
            with transaction.atomic():
                conflicting_increment(rival, [], interfere_on={1})
    assert raised.value.__cause__.sqlstate == "40001"


@pytest.mark.django_db(transaction=True)
def test_it_gives_up_with_a_clear_error_after_the_bound(counter_table):
    attempts = []
    with other_connection() as rival:
        with pytest.raises(RetriesExhausted, match=r"still conflicting after 3 attempts \(SQLSTATE 40001\)") as raised:
            run_in_transaction(conflicting_increment, rival, attempts, interfere_on={1, 2, 3}, attempts=3,
                               base_delay=0.001)
        final = rival.execute("SELECT n FROM retry_probe WHERE id = 1").fetchone()[0]
    assert attempts == [1, 2, 3]
    assert raised.value.__cause__.__cause__.sqlstate == "40001"
    assert final == 300  # only the rival's three commits; every attempt of ours rolled back


@pytest.mark.django_db(transaction=True)
def test_it_does_not_retry_other_errors(counter_table):
    calls = []

    def broken():
        calls.append(1)
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM retry_probe")

    with pytest.raises(Exception, match="no_such_column"):
        run_in_transaction(broken, attempts=5)
    assert calls == [1]


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_run_inside_an_outer_transaction():
    from django.db import transaction

    with transaction.atomic(), pytest.raises(RuntimeError, match="outermost"):
        run_in_transaction(lambda: None)
