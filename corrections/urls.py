from django.urls import path

from . import views

app_name = "corrections"
urlpatterns = [
    path("review/", views.queue, name="queue"),
    path("review/<uuid:code>/approve/", views.approve, name="approve"),
    path("review/<uuid:code>/edit/", views.edit, name="edit"),
    path("review/<uuid:code>/reject/", views.reject, name="reject"),
    path("review/<uuid:code>/use-current-contact/", views.use_current_contact, name="use_current_contact"),
    path("review/more/<path:recall_number>", views.more_hx, name="more_hx"),
    path("review/recall/<path:recall_number>/approve-all/", views.bulk_approve, name="bulk_approve"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("sweeps/_hx/", views.sweep_runs_hx, name="sweep_runs_hx"),
]
