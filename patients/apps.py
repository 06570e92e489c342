from django.apps import AppConfig


class PatientsConfig(AppConfig):
    name = "patients"
    verbose_name = "Patients and dispensing"

    def ready(self):
        from django.db.models.signals import pre_delete

        from core import health
        from patients.deletion import refuse_deleting_a_patient_with_decisions
        from patients.models import Patient

        # Decisions hold their patient by id only (memory sits below patients): a patient who has
        # decisions is refused deletion here, as the foreign key's PROTECT used to.
        pre_delete.connect(refuse_deleting_a_patient_with_decisions, sender=Patient,
                           dispatch_uid="patients.refuse_deleting_a_patient_with_decisions")

        # /health and `manage.py status` show where patient rows live (when health offers sections).
        if hasattr(health, "register_section"):
            from patients.services import residency_section

            health.register_section(residency_section)
