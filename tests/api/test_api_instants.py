"""api.schemas.parse_instant, the one reader of every timestamp the API takes: any RFC 3339 date-time
with a zone is either an instant PostgreSQL stores as it is, or a ValueError (the API's 422)."""

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.schemas import parse_day, parse_instant

OFFSETS = st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59)


def rfc3339(moment: datetime, offset_minutes: int) -> str:
    sign, minutes = ("-" if offset_minutes < 0 else "+"), abs(offset_minutes)
    return (f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{moment.microsecond:06d}"  # %Y: no zeros before 1000
            f"{sign}{minutes // 60:02d}:{minutes % 60:02d}")


@pytest.mark.django_db
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moment=st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
       offset=OFFSETS | st.sampled_from([-(23 * 60 + 59), 23 * 60 + 59, 16 * 60, -16 * 60]))
def test_any_rfc_3339_instant_is_stored_by_postgresql_or_refused(moment, offset):
    text = rfc3339(moment, offset)
    try:
        instant = parse_instant(text)
    except ValueError:
        # Only an instant outside years 1..9999 once in UTC.
        with pytest.raises(OverflowError):
            moment.replace(tzinfo=timezone(timedelta(minutes=offset))).astimezone(UTC)
        return
    assert instant.utcoffset() == timedelta(0)
    assert instant == moment.replace(tzinfo=timezone(timedelta(minutes=offset)))
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz", [instant])
        assert cursor.fetchone()[0] == instant


@pytest.mark.parametrize("text", ["0.5", "1551434400", "2019-01-05T12:00:00", "2019-01-05", "20190105T120000Z",
                                  "2019-W01-6T12:00:00Z", "2019-01-05T12:00Z", "0000-01-01T00:00:00Z",
                                  "10000-01-01T00:00:00Z", "2019-01-05T12:00:00+24:00", "2016-12-31T23:59:60Z",
                                  "2019-01-05T12:00:00 02:00", "٢٠١٩-01-05T12:00:00Z", "", None, 1551434400])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError):
        parse_instant(text)


def test_a_naive_datetime_from_python_is_refused_and_an_aware_one_read_in_utc():
    with pytest.raises(ValueError):
        parse_instant(datetime(2019, 1, 5, 12))
    assert parse_instant(datetime(2019, 1, 5, 12, tzinfo=timezone(timedelta(hours=-5)))) == datetime(
        2019, 1, 5, 17, tzinfo=UTC)


@pytest.mark.parametrize("text", [1551398400, 0, "2019-03-01T00:00:00", "20190301", "2019-02-30", "0000-01-01",
                                  "٢٠١٩-03-01", "", None])
def test_a_day_is_yyyy_mm_dd_and_nothing_else(text):
    with pytest.raises(ValueError):
        parse_day(text)
    assert parse_day("2027-06-30") == date(2027, 6, 30)
