from django.apps import AppConfig


class PatientsConfig(AppConfig):
    name = "patients"
    verbose_name = "Patients and dispensing"

    def ready(self):
        from core import health

        # /health and `manage.py status` show where patient rows live (when health offers sections).
        if hasattr(health, "register_section"):
            from patients.services import residency_section

            health.register_section(residency_section)
