from django.urls import path

from . import views

app_name = "recalls"
urlpatterns = [
    path("ops/", views.ops, name="ops"),
]
