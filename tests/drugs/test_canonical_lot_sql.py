"""drugs.lots.canonical_lot_sql: the database computes the same canonical lot as canonical_lot().

Python is the reference. The lots are the REAL recalled lots of the three openFDA fixtures (as printed, as the
recall's raw text wrote them, and as a pharmacy types them: lower case, spaces, dashes, dots, leading zeros,
"Lot#" prefixes, unicode), generated lots (120 hypothesis batches of 100, and 10,000 from a seeded generator),
and every character of the Basic Multilingual Plane inside a lot and inside its prefix. Each batch is one query
over unnest(text[]), valid on PostgreSQL and CockroachDB alike. Text a database cannot hold (NUL, lone
surrogates) is left out."""

import os
import random
import sys

import psycopg
import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from django.db.models.sql import Query
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drugs import lots as lots_module
from drugs.lots import canonical_lot, canonical_lot_sql, printed_lot
from recalls.lots.parse import parse_scope
from tests.factories import RECENT_SAMPLE, SNAPSHOT_2021, SNAPSHOT_2023, read_results

pytestmark = pytest.mark.django_db

def in_sql(texts: list[str | None], cursor=None) -> list[str]:
    """canonical_lot_sql of each text, computed by the database in one query (on `cursor` when given)."""
    query = Query(None)
    expression = canonical_lot_sql(RawSQL("given.lot", [])).resolve_expression(query)
    sql, params = expression.as_sql(query.get_compiler(connection=connection), connection)
    statement = f"SELECT {sql} FROM unnest(%s::text[]) WITH ORDINALITY AS given(lot, n) ORDER BY given.n"
    if cursor is not None:
        cursor.execute(statement, [*params, texts])
        return [row[0] for row in cursor.fetchall()]
    with connection.cursor() as own:
        own.execute(statement, [*params, texts])
        return [row[0] for row in own.fetchall()]


def assert_agree(texts: list[str | None], cursor=None) -> None:
    disagree = [(text, canonical_lot(text), sql) for text, sql in zip(texts, in_sql(texts, cursor), strict=True)
                if sql != canonical_lot(text)]
    assert not disagree, f"{len(disagree)} of {len(texts)} disagree (text, python, sql): {disagree[:10]}"


def real_lots() -> list[str]:
    """Every lot the three openFDA fixtures name, as parsed, as printed, and each raw lot-list token."""
    found = set()
    for path in (SNAPSHOT_2021, SNAPSHOT_2023, RECENT_SAMPLE):
        for raw in read_results(path):
            scope = parse_scope(raw.get("code_info") or "", raw.get("more_code_info") or "")
            for lot in scope.lot_numbers:
                found.update({lot, printed_lot(lot)})
            found.update((raw.get("code_info") or "").split()[:40])
    return sorted(found)


TYPED = ["{lot}", "{lower}", " {lot} ", "Lot# {lot}", "lot no. {lower}", "LOT: {lot}", "Batch {lot}", "LOTS {lot}",
         "lot number {lot}", "Lot Numbers {lot}", "0{lot}", "00{lot}", "{spaced}", "{dashed}", "{dotted}",
         "\u00a0lot\u2003{lot}", "ＬＯＴ {lot}", "{lot}\u200b", "lot\t#\n{lot}", "{lot}ß", "ﬁ{lower}", "lotſ{lot}",
         "Lot İ{lot}", "{lot} / {lower}", "batch no.:# {lot}", "L0T {lot}", "lot{lot}", "ın{lot}"]


def typed(shape: str, lot: str) -> str:
    return shape.format(lot=lot, lower=lot.lower(), spaced=" ".join(lot), dashed="-".join(lot[::2]),
                        dotted=".".join((lot[:3], lot[3:])))


def test_every_real_recalled_lot_and_every_way_a_pharmacy_types_one():
    found = real_lots()
    assert len(found) > 5000  # the fixtures hold thousands of lots; far fewer means they were not read
    assert_agree(found)
    assert_agree([typed(shape, lot) for lot in random.Random(7).sample(found, 2000) for shape in TYPED])


def test_every_character_of_the_basic_multilingual_plane_in_a_lot_and_in_its_prefix():
    characters = [chr(code) for code in range(1, 0x10000) if not 0xD800 <= code <= 0xDFFF]
    assert_agree([f"a{ch}7" for ch in characters])
    assert_agree([f"{ch}lot{ch}no{ch}5b" for ch in characters])


def test_the_upper_case_table_is_every_character_whose_capital_holds_an_ascii_letter():
    """Outside the BMP too: the SQL spells str.upper() out as a table, which must be complete."""
    ascii_letters = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    derived = {}
    for code in range(128, sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        kept = "".join(ch for ch in chr(code).upper() if ch in ascii_letters)
        if kept:
            derived[chr(code)] = kept
    spelled = {**lots_module._UPPER_INTO_LETTERS,
               **{k: v for k, v in lots_module._UPPER_INTO_LETTER.items() if not k.isascii()}}
    assert derived == spelled


def test_null_and_empty_are_the_empty_lot():
    assert_agree([None, "", "   ", "LOT", "lot #", "---", "Lot No."])


_LOT_ALPHABET = st.sampled_from(list("ABCDEFGHJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
                                + list(" -./#:_\t") + list("ßıſﬁﬆéÉñ\u00a0\u2009\u3000Ｌ０\u200bİ"))
_PREFIXES = st.sampled_from(["", "Lot", "LOT#", "lot no.", "Lot Number:", "LOTS", "batch", "Batch No", " lot ",
                             "l0t", "LOTNUMBERS", "lot:#no.", "\u2003Lot\u00a0#"])
_GENERATED = st.builds(lambda prefix, zeros, body: prefix + "0" * zeros + body, _PREFIXES,
                       st.integers(min_value=0, max_value=3), st.text(_LOT_ALPHABET, max_size=24))
_ANY_TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=30)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=st.lists(st.one_of(_GENERATED, _ANY_TEXT), min_size=100, max_size=100))
def test_generated_lots_agree(batch):
    assert_agree(batch)


def test_ten_thousand_seeded_lots_in_one_query():
    """The same shapes from a seeded generator, so the count never depends on how hypothesis runs."""
    rng = random.Random(20261205)
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz0123456789 -./#:_\tßıſﬁﬆéñРОЗАВаоΟΡ\u00a0\u3000Ｌ０İ"
    prefixes = ["", "Lot", "LOT#", "lot no.", "Lot Number:", "LOTS", "batch", "Batch No", " lot ", "\u2003Lot\u00a0#"]
    generated = [rng.choice(prefixes) + "0" * rng.randint(0, 3) + "".join(rng.choices(alphabet, k=rng.randint(0, 20)))
                 for _ in range(10_000)]
    assert len(set(generated)) > 9_000
    assert_agree(generated)


@pytest.mark.cockroach
def test_cockroachdb_computes_the_same_key():
    """The same lots on a real CockroachDB (its regexp_replace is Go's RE2, not PostgreSQL's ARE)."""
    url = os.environ["UNSAY_COCKROACH_URL"].replace("cockroachdb://", "postgresql://", 1)
    characters = [chr(code) for code in range(1, 0x10000) if not 0xD800 <= code <= 0xDFFF]
    found = real_lots()
    with psycopg.connect(url, autocommit=True) as cockroach, cockroach.cursor() as cursor:
        assert_agree(found, cursor)
        assert_agree([typed(shape, lot) for lot in random.Random(7).sample(found, 2000) for shape in TYPED], cursor)
        assert_agree([f"{ch}lot{ch}no{ch}5b" for ch in characters], cursor)
