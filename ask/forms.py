from django import forms

from patients.models import Patient


class AskForm(forms.Form):
    patient = forms.UUIDField(widget=forms.HiddenInput, error_messages={"required": "Pick a patient first."})
    question = forms.CharField(max_length=1000, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}))
    subject = forms.CharField(max_length=200, required=False,
                              help_text="Optional: the medicine, if the question doesn't name it.")

    def clean_patient(self):
        try:
            return Patient.objects.get(public_id=self.cleaned_data["patient"])
        except Patient.DoesNotExist:
            raise forms.ValidationError("That patient no longer exists.") from None
