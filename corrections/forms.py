from django import forms


class EditForm(forms.Form):
    final_text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 80}), label="Message to send",
                                 max_length=5000)

    def __init__(self, *args, sms_limit: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if sms_limit:
            # The server's hard limit for an SMS; the browser shows a live count against the same number.
            field = self.fields["final_text"]
            field.max_length = sms_limit
            field.validators = [v for v in field.validators if not hasattr(v, "limit_value")]
            field.validators.append(forms.fields.validators.MaxLengthValidator(sms_limit))
            field.widget.attrs.update({"data-sms-limit": sms_limit, "rows": 4})
            field.label = f"SMS to send (at most {sms_limit} characters)"


class RejectForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), label="Why reject?",
                             max_length=2000)


class BulkApproveForm(forms.Form):
    confirm = forms.BooleanField(label="Yes, approve every current draft of this recall")
