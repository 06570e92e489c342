"""System checks for configuration mistakes that settings parsing alone cannot see."""

from django.conf import settings
from django.core.checks import Error, register

from memory.embeddings import column_dimension

KNOWN_REGIONS = {
    # The regions the compose cluster and the app know; extend with care (sql/001_bootstrap.sql).
    "aws-us-east-1", "aws-us-west-2", "aws-eu-west-1", "aws-eu-central-1", "aws-ap-southeast-1",
    "aws-ap-northeast-1",
}


@register()
def check_regions(app_configs, **kwargs):
    errors = []
    if not settings.UNSAY_REGIONS:
        errors.append(Error("UNSAY_REGIONS is empty.", hint="Name at least one region.", id="unsay.E001"))
    for region in settings.UNSAY_REGIONS:
        if region not in KNOWN_REGIONS:
            errors.append(Error(
                f"UNSAY_REGIONS names unknown region {region!r}.",
                hint=f"Known regions: {', '.join(sorted(KNOWN_REGIONS))}.", id="unsay.E002"))
    if settings.UNSAY_PRIMARY_REGION not in settings.UNSAY_REGIONS:
        errors.append(Error(
            f"UNSAY_PRIMARY_REGION={settings.UNSAY_PRIMARY_REGION!r} is not in UNSAY_REGIONS.", id="unsay.E003"))
    return errors


@register()
def check_embeddings(app_configs, **kwargs):
    errors = []
    if settings.UNSAY_EMBEDDINGS == "hashing" and not settings.UNSAY_ALLOW_FAKE_EMBEDDINGS:
        errors.append(Error(
            "UNSAY_EMBEDDINGS=hashing is a test-only lexical embedding.",
            hint="Set UNSAY_ALLOW_FAKE_EMBEDDINGS=1 to use it deliberately, or choose local/bedrock.",
            id="unsay.E010"))
    expected = {"local": 384, "bedrock": 1024}.get(settings.UNSAY_EMBEDDINGS)
    if expected and settings.UNSAY_EMBEDDING_DIM != expected:
        errors.append(Error(
            f"UNSAY_EMBEDDING_DIM={settings.UNSAY_EMBEDDING_DIM} but UNSAY_EMBEDDINGS={settings.UNSAY_EMBEDDINGS} "
            f"produces {expected}-dimensional vectors.", id="unsay.E011"))
    return errors


@register(deploy=False)
def check_embedding_column(app_configs, databases=None, **kwargs):
    """The vector column's dimension is fixed at migrate time; a later change of setting must not pass silently."""
    if not databases:
        return []

    try:
        actual = column_dimension()
    except Exception:  # table not migrated yet: nothing to compare
        return []
    if actual is not None and actual != settings.UNSAY_EMBEDDING_DIM:
        return [Error(
            f"UNSAY_EMBEDDING_DIM={settings.UNSAY_EMBEDDING_DIM} but memory_fact.embedding is vector({actual}).",
            hint="Use the dimension the database was migrated with, or re-create the database.",
            id="unsay.E012")]
    return []


@register()
def check_audit_key(app_configs, **kwargs):
    """Production signs the audit chain with a key the database does not hold; without one nothing could be
    audited, so the deployment is refused before it serves anything."""
    if settings.PROFILE == "production" and not settings.UNSAY_AUDIT_KEY_ID:
        return [Error(
            "UNSAY_AUDIT_KEY is not set: the audit chain has no key to sign its links with.",
            hint="Set UNSAY_AUDIT_KEY=key-id:secret (32 or more random characters, kept outside the database; "
                 "docs/operator.md, Audit chain).", id="unsay.E020")]
    return []
