from django.urls import path

from . import views

app_name = "replies"
urlpatterns = [
    # Short, for SMS: /r/<22-character token>.
    path("<str:token>", views.reply, name="reply"),
]
