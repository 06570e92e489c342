from django.urls import path

from . import shelf_page

app_name = "shelf_page"
urlpatterns = [
    path("", shelf_page.shelf_home, name="home"),
    path("stock.csv", shelf_page.shelf_csv, name="csv"),
]
