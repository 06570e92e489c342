from django.urls import path

from . import views

app_name = "patients"
urlpatterns = [
    path("exposure/", views.exposure, name="exposure"),
]
