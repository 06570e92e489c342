from django.contrib import admin
from django.urls import include, path

import memory.api

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("health", views.health, name="health"),
    path("status", views.status, name="status"),
    path("admin/", admin.site.urls),
    path("memory/", include("memory.urls")),
    path("recalls/", include("recalls.urls")),
    path("patients/", include("patients.urls")),
    path("corrections/", include("corrections.urls")),
    path("worklist/", include("worklist.urls")),
    path("api/ask", memory.api.ask_view, name="api_ask"),
    path("api/decisions/<uuid:public_id>", memory.api.decision_view, name="api_decision"),
]
