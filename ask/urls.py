from django.urls import path

from ask import views

app_name = "ask"
urlpatterns = [
    path("ask/", views.ask_screen, name="ask"),
]
