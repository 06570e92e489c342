from django.urls import path

from patients import views

app_name = "patients"
urlpatterns = [
    path("exposure/", views.exposure, name="exposure"),
]
