from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from unsay_site.models import User

admin.site.register(User, UserAdmin)
admin.site.site_header = "Unsay administration"
