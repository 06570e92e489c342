from django.contrib import admin
from django.urls import include, path

from api.views import api as api_v1
from api.views import unknown_route
from ask.check_views import check_my_pack
from unsay_site import views

urlpatterns = [
    path("", views.home, name="home"),
    path("health", views.health, name="health"),
    path("status", views.status, name="status"),
    path("metrics", views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("memory/", include("ask.urls")),
    path("recalls/", include("recalls.urls")),
    path("patients/", include("patients.urls")),
    path("corrections/", include("corrections.urls")),
    path("worklist/", include("worklist.urls")),
    path("shelf/", include("worklist.shelf_urls")),
    path("r/", include("replies.urls")),  # the patient's reply page (public, token in the URL)
    path("check", check_my_pack, name="check"),  # check my pack (public, no login)
    path("api/v1/", api_v1.urls),
    path("api/v1/<path:rest>", unknown_route),
]
