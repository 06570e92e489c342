"""Who may do what. The groups are created by migrations; this table is the single source.

A later migration that adds models appends to GROUP_PERMISSIONS and calls sync_group_permissions
(after create_permissions) in a RunPython of its own.
"""

PHARMACIST = "Pharmacist"
PHARMACY_STAFF = "Pharmacy staff"

# app_label -> codenames (model-level perms: add/change/delete/view_<model>)
GROUP_PERMISSIONS = {
    PHARMACY_STAFF: {
        "patients": ["add_patient", "change_patient", "view_patient",
                     "add_dispensingrecord", "change_dispensingrecord", "view_dispensingrecord"],
        "memory": ["view_fact"],
        "corrections": ["view_sweeprun"],
    },
    PHARMACIST: {
        "patients": ["add_patient", "change_patient", "view_patient",
                     "add_dispensingrecord", "change_dispensingrecord", "view_dispensingrecord",
                     "view_exposure"],
        "memory": ["view_fact", "view_decision", "view_decisionread"],
        "corrections": ["view_correction", "review_correction", "view_outboxmessage", "view_sweeprun",
                        "view_auditevent", "view_redecision"],
    },
}


def sync_group_permissions(apps, extra: dict | None = None):
    """Create the groups (if missing) and grant what GROUP_PERMISSIONS (plus `extra`) lists that exists."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    table = {g: {a: list(c) for a, c in apps_.items()} for g, apps_ in GROUP_PERMISSIONS.items()}
    for group_name, apps_ in (extra or {}).items():
        for app_label, codenames in apps_.items():
            table.setdefault(group_name, {}).setdefault(app_label, []).extend(codenames)
    for group_name, apps_ in table.items():
        group, _ = Group.objects.get_or_create(name=group_name)
        for app_label, codenames in apps_.items():
            perms = Permission.objects.filter(content_type__app_label=app_label, codename__in=codenames)
            group.permissions.add(*perms)
