from django.apps import AppConfig
from django.db.models.signals import pre_delete

from core import health


class PatientsConfig(AppConfig):
    name = "patients"
    verbose_name = "Patients and dispensing"

    def ready(self):
        # AppConfig.ready: the models cannot be imported while apps load.
        from patients.deletion import refuse_deleting_a_patient_with_decisions  # noqa: PLC0415
        from patients.models import Patient  # noqa: PLC0415

        # Decisions hold their patient by id only (memory sits below patients): a patient who has
        # decisions is refused deletion here, as the foreign key's PROTECT used to.
        pre_delete.connect(refuse_deleting_a_patient_with_decisions, sender=Patient,
                           dispatch_uid="patients.refuse_deleting_a_patient_with_decisions")

        # /health and `manage.py status` show where patient rows live (when health offers sections).
        if hasattr(health, "register_section"):
            # AppConfig.ready: patients.services reads the models, which cannot be imported while apps load.
            from patients.services import residency_section  # noqa: PLC0415

            health.register_section(residency_section)
