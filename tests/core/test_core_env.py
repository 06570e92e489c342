"""Typed environment reading (core.env, environs underneath) and DATABASE_URL handling, in-process."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.env import env_bool, env_choice, env_float, env_int, env_list, env_str
from unsay_site.settings import _database_from_url


@pytest.mark.parametrize("raw, expected", [("1", True), ("TRUE", True), ("yes", True), ("On", True), ("y", True),
                                           ("0", False), ("false", False), ("No", False), ("off", False)])
def test_env_bool_accepts_the_usual_spellings(monkeypatch, raw, expected):
    monkeypatch.setenv("UNSAY_X", raw)
    assert env_bool("UNSAY_X") is expected


def test_unset_or_empty_means_the_default(monkeypatch):
    monkeypatch.delenv("UNSAY_X", raising=False)
    assert env_bool("UNSAY_X", True) is True and env_int("UNSAY_X", 7) == 7 and env_str("UNSAY_X", "d") == "d"
    monkeypatch.setenv("UNSAY_X", "")
    assert env_float("UNSAY_X", 1.5) == 1.5 and env_list("UNSAY_X", ["a"]) == ["a"]


@pytest.mark.parametrize("parse, raw, message", [
    (lambda: env_bool("UNSAY_X"), "maybe", "UNSAY_X='maybe' is invalid: Not a valid boolean."),
    (lambda: env_bool("UNSAY_X"), " yes ", "UNSAY_X=' yes ' is invalid: Not a valid boolean."),
    (lambda: env_int("UNSAY_X", 1), "12abc", "UNSAY_X='12abc' is invalid: Not a valid integer."),
    (lambda: env_int("UNSAY_X", 1, minimum=1), "0", "UNSAY_X='0' is invalid: Must be greater than or equal to 1."),
    (lambda: env_int("UNSAY_X", 1, maximum=10), "11", "UNSAY_X='11' is invalid: Must be less than or equal to 10."),
    (lambda: env_float("UNSAY_X", 1.0), "fast", "UNSAY_X='fast' is invalid: Not a valid number."),
    (lambda: env_float("UNSAY_X", 1.0, minimum=0.1), "0",
     "UNSAY_X='0' is invalid: Must be greater than or equal to 0.1."),
    (lambda: env_choice("UNSAY_X", "a", {"a", "b"}), "c", "UNSAY_X='c' is invalid: Must be one of: a, b."),
])
def test_junk_is_rejected_naming_the_variable(monkeypatch, parse, raw, message):
    monkeypatch.setenv("UNSAY_X", raw)
    with pytest.raises(ImproperlyConfigured) as raised:
        parse()
    assert str(raised.value).startswith(message)


def test_numbers_may_carry_surrounding_spaces(monkeypatch):
    monkeypatch.setenv("UNSAY_X", " 12 ")
    assert env_int("UNSAY_X", 1, maximum=12) == 12 and env_float("UNSAY_X", 1.0) == 12.0


def test_values_are_taken_as_written_without_dollar_expansion(monkeypatch):
    monkeypatch.setenv("UNSAY_OTHER", "expanded")
    monkeypatch.setenv("UNSAY_X", "s3cr$t-${UNSAY_OTHER}")
    assert env_str("UNSAY_X") == "s3cr$t-${UNSAY_OTHER}"
    assert env_choice("UNSAY_X", "a", {"a", "s3cr$t-${UNSAY_OTHER}"}) == "s3cr$t-${UNSAY_OTHER}"


def test_env_list_splits_on_commas_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("UNSAY_X", " aws-us-east-1 , ,aws-eu-west-1,")
    assert env_list("UNSAY_X", []) == ["aws-us-east-1", "aws-eu-west-1"]


def test_postgres_url_keeps_iterative_hnsw_scans_and_tls_options():
    db = _database_from_url("postgres://u%40x:p%2Fw@db.example:6543/unsay?sslmode=require")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["USER"], db["PASSWORD"], db["HOST"], db["PORT"], db["NAME"]) == ("u@x", "p/w", "db.example", "6543",
                                                                                "unsay")
    assert db["OPTIONS"] == {"options": "-c hnsw.iterative_scan=strict_order -c hnsw.ef_search=200",
                             "sslmode": "require"}


def test_postgres_url_may_name_a_unix_socket_directory():
    db = _database_from_url("postgresql:///unsay?host=/var/run/postgresql")
    assert (db["HOST"], db["PORT"], db["NAME"]) == ("/var/run/postgresql", "5432", "unsay")


@pytest.mark.parametrize("url, message", [
    ("mysql://root@localhost/unsay", "scheme 'mysql' is not supported"),
    ("postgres://root@localhost:5432/", "DATABASE_URL must name a database"),
])
def test_bad_database_urls_are_rejected(url, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        _database_from_url(url)
