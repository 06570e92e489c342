from django.urls import path

from . import views

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
    path("none-found/", views.none_found, name="none_found"),
    path("recall/<path:recall_number>", views.recall, name="recall"),
    path("report.csv/<path:recall_number>", views.report_csv, name="report_csv"),
    path("report/<path:recall_number>", views.report, name="report"),
]
