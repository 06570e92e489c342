from django.contrib.auth.models import AbstractUser

from core.roles import PHARMACIST


class User(AbstractUser):
    """Custom user from day one so pharmacist profile fields can be added without a painful swap."""

    @property
    def is_pharmacist(self) -> bool:
        return self.is_superuser or self.groups.filter(name=PHARMACIST).exists()

