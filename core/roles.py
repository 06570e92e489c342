"""Who may do what. This table is the single source; a post_migrate receiver (unsay_site.apps)
creates the groups and grants what it lists after every migrate, so a new model's permission is
granted by adding it here, with no data migration.
"""

import functools

from django.core.exceptions import PermissionDenied

PHARMACIST = "Pharmacist"
PHARMACY_STAFF = "Pharmacy staff"

# app_label -> codenames (model-level perms: add/change/delete/view_<model>)
GROUP_PERMISSIONS = {
    PHARMACY_STAFF: {
        "patients": ["add_patient", "change_patient", "view_patient",
                     "add_dispensingrecord", "change_dispensingrecord", "view_dispensingrecord"],
        "memory": ["view_fact"],
        "corrections": ["view_sweeprun"],
        "recalls": ["view_ingestrun", "view_quarantinedrecord"],
        "shelf": ["view_unit"],  # the shelf page of the sites they work at (shelf.StaffSite)
    },
    PHARMACIST: {
        "patients": ["add_patient", "change_patient", "view_patient",
                     "add_dispensingrecord", "change_dispensingrecord", "view_dispensingrecord",
                     "view_exposure"],
        "memory": ["view_fact", "view_decision", "view_readset", "view_readsetmember", "ask_for_patient"],
        "corrections": ["view_correction", "review_correction", "view_outboxmessage", "view_sweeprun",
                        "view_auditevent", "view_redecision"],
        "recalls": ["view_ingestrun", "view_quarantinedrecord"],
        # Certificates only: erasing needs privacy.erase_patient, granted to named people, not the group.
        "privacy": ["view_erasurecertificate"],
        "shelf": ["view_unit"],
    },
}


def sync_group_permissions(apps, extra: dict | None = None, *, using: str = "default"):
    """Create the groups (if missing) and grant what GROUP_PERMISSIONS (plus `extra`) lists that exists."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    table = {g: {a: list(c) for a, c in apps_.items()} for g, apps_ in GROUP_PERMISSIONS.items()}
    for group_name, apps_ in (extra or {}).items():
        for app_label, codenames in apps_.items():
            table.setdefault(group_name, {}).setdefault(app_label, []).extend(codenames)
    for group_name, apps_ in table.items():
        group, _ = Group.objects.using(using).get_or_create(name=group_name)
        for app_label, codenames in apps_.items():
            perms = Permission.objects.using(using).filter(content_type__app_label=app_label, codename__in=codenames)
            group.permissions.add(*perms)



# One permission per screen, checked one way (requires_permission). The home page offers a link only
# to someone who holds its screen's permission.
ASK_SCREEN = "memory.ask_for_patient"
REVIEW_SCREEN = "corrections.review_correction"  # review queue, recall worklist
EXPOSURE_SCREEN = "patients.view_exposure"
OPERATIONS_SCREEN = "recalls.view_ingestrun"
SHELF_SCREEN = "shelf.view_unit"  # the shelf page of the sites a person holds


def requires_permission(permission: str, refusal: str):
    """A view decorator: anonymous users go to the login page; a user without `permission` gets a 403
    page that says `refusal`. Checked on every request (no cached role)."""
    # Django start-up: unsay_site.models (the user model) imports this module, and django.contrib.auth.views
    # builds its forms from the user model when imported, so it is imported when a view is decorated.
    from django.contrib.auth.views import redirect_to_login  # noqa: PLC0415

    def decorator(view):
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not request.user.has_perm(permission):
                raise PermissionDenied(refusal)
            return view(request, *args, **kwargs)
        return wrapper
    return decorator
