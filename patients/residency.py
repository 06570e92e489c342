"""Where patient rows live. The SQL that homes them (sql/cockroachdb/020_patient_residency.sql) is
rendered from settings here, so the CASE always lists exactly the configured regions."""

from django.conf import settings


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def region_case_sql(column: str = "region", regions=None, *, otherwise: str | None = None) -> str:
    """`CASE region WHEN 'r1' THEN 'r1' ... END`: maps the app's region column to the database region
    of the same name; anything else is NULL, which the NOT NULL computed column refuses — unless
    `otherwise` names a region for rows that name no patient (a decision asked for nobody)."""
    regions = list(settings.UNSAY_REGIONS if regions is None else regions)
    if not regions:
        raise ValueError("UNSAY_REGIONS is empty: patients need at least one home region.")
    whens = " ".join(f"WHEN {_quote(r)} THEN {_quote(r)}" for r in regions)
    tail = f" ELSE {_quote(otherwise)}" if otherwise else ""
    return f"CASE {column} {whens}{tail} END"


def residency_sql_params() -> dict:
    return {"region_case": region_case_sql(),
            "region_case_or_primary": region_case_sql(otherwise=settings.UNSAY_PRIMARY_REGION)}
