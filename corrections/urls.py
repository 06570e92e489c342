from django.urls import path

from . import views

app_name = "corrections"
urlpatterns = [
    path("review/", views.queue, name="queue"),
    path("review/<uuid:code>/approve/", views.approve, name="approve"),
    path("review/<uuid:code>/edit/", views.edit, name="edit"),
    path("review/<uuid:code>/reject/", views.reject, name="reject"),
    path("review/recall/<path:recall_number>/approve-all/", views.bulk_approve, name="bulk_approve"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("sweeps/_hx/", views.sweep_runs_hx, name="sweep_runs_hx"),
]
