from django.urls import path

from . import shelf, views

app_name = "worklist"
# Recall numbers go in as `path:` so a number with "/" (seen in real data) still routes and reverses.
urlpatterns = [
    path("", views.home, name="home"),
    path("status.json", views.status_json, name="status_json"),
    path("follow-up/", views.follow_up, name="follow_up"),
    path("history/", views.history, name="history"),
    path("patient/<uuid:code>/", views.patient_trail, name="patient_trail"),
    path("contact/<uuid:code>/", views.log_contact, name="log_contact"),
    path("step/", views.step, name="step"),
    path("task/<uuid:code>/", views.complete_task, name="complete_task"),
    path("none-found/", views.none_found, name="none_found"),
    path("shelf/<uuid:code>/quarantine/", shelf.shelf_quarantine, name="shelf_quarantine"),
    path("shelf/<uuid:code>/return/", shelf.shelf_return, name="shelf_return"),
    path("shelf/<uuid:code>/destroy/", shelf.shelf_destroy, name="shelf_destroy"),
    path("shelf-panel/<path:recall_number>", shelf.shelf_panel, name="shelf_panel"),
    path("recall/<path:recall_number>", views.recall, name="recall"),
    path("report.csv/<path:recall_number>", views.report_csv, name="report_csv"),
    path("replies.csv/<path:recall_number>", views.effectiveness_csv, name="effectiveness_csv"),
    path("glance.csv/<path:recall_number>", views.glance_csv, name="glance_csv"),
    path("report/<path:recall_number>", views.report, name="report"),
]
