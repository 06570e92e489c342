from django.urls import path

from . import views

app_name = "memory"
urlpatterns = [
    path("ask/", views.ask_screen, name="ask"),
]
