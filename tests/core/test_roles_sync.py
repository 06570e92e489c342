"""Groups are kept in step with core.roles.GROUP_PERMISSIONS by a post_migrate receiver, not by
historical data migrations (a migration must not replay today's table)."""

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from core import roles
from tests.paths import PROJECT_DIR


@pytest.mark.django_db(transaction=True)
def test_migrate_recreates_the_groups_from_the_roles_table(monkeypatch):
    Group.objects.filter(name__in=[roles.PHARMACIST, roles.PHARMACY_STAFF]).delete()
    wider = {app: list(codes) for app, codes in roles.GROUP_PERMISSIONS[roles.PHARMACY_STAFF].items()}
    wider["corrections"].append("view_redecision")  # a grant added to the table, no migration written
    monkeypatch.setitem(roles.GROUP_PERMISSIONS, roles.PHARMACY_STAFF, wider)

    call_command("migrate", verbosity=0)  # nothing to apply: only post_migrate runs

    staff = set(Group.objects.get(name=roles.PHARMACY_STAFF).permissions.values_list("codename", flat=True))
    pharmacist = set(Group.objects.get(name=roles.PHARMACIST).permissions.values_list("codename", flat=True))
    assert {"view_redecision", "view_fact", "add_dispensingrecord"} <= staff
    assert {"review_correction", "view_exposure"} <= pharmacist
    assert "review_correction" not in staff


def test_no_migration_imports_the_roles_table():

    root = PROJECT_DIR
    offenders = [str(p.relative_to(root)) for p in root.glob("*/migrations/0*.py")
                 if "grant_group_permissions" in p.read_text() or ".roles import" in p.read_text()]
    assert offenders == []
