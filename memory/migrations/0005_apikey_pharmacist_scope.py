from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0004_premises_inputs_scopes")]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="pharmacist_scope",
            field=models.BooleanField(default=False, help_text="May read recall exposure for its client."),
        ),
        migrations.AddConstraint(
            model_name="apikey",
            constraint=models.CheckConstraint(condition=models.Q(pharmacist_scope=False) | models.Q(kind="pharmacy"),
                                              name="apikey_pharmacist_scope_pharmacy_only"),
        ),
    ]
