from django import forms
from django.utils.translation import gettext_lazy as _

from patients.text import problem
from worklist.models import PatientAnswer

MAX_TEXT = 1000


class ReplyForm(forms.Form):
    answer = forms.ChoiceField(label=_("What have you done with this medicine?"), choices=PatientAnswer.Answer.choices,
                               widget=forms.RadioSelect,
                               error_messages={"required": _("Please choose one answer.")})
    text = forms.CharField(label=_("Your question (optional, up to 1000 characters)"), required=False,
                           max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 5, "maxlength": MAX_TEXT}))

    def clean_text(self):
        text = self.cleaned_data.get("text", "")
        # Line breaks are fine in a question; other controls, bidi overrides and NULs are not.
        if text and problem(text, allowed="\r\n\t"):
            raise forms.ValidationError(_("Please use plain text only."))
        return text.strip()

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("answer") == PatientAnswer.Answer.QUESTION and not cleaned.get("text"):
            self.add_error("text", _("Please write your question, or call the pharmacy."))
        return cleaned
