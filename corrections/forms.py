from django import forms


class EditForm(forms.Form):
    final_text = forms.CharField(widget=forms.Textarea(attrs={"rows": 8, "cols": 80}), label="Message to send",
                                 max_length=5000)


class RejectForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 80}), label="Why reject?",
                             max_length=2000)


class BulkApproveForm(forms.Form):
    confirm = forms.BooleanField(label="Yes, approve every current draft of this recall")
