from django import forms

from .models import ContactAttempt, Step


class StepForm(forms.Form):
    recall_number = forms.CharField(max_length=40, widget=forms.HiddenInput)
    step = forms.ChoiceField(choices=Step.choices, widget=forms.HiddenInput)
    note = forms.CharField(max_length=2000, required=False, widget=forms.TextInput(attrs={"size": 40}))


class NoneFoundForm(forms.Form):
    recall_number = forms.CharField(max_length=40, widget=forms.HiddenInput)
    note = forms.CharField(max_length=2000, required=False, widget=forms.TextInput(attrs={"size": 40}),
                           label="What was checked")


class ContactForm(forms.Form):
    recall_number = forms.CharField(max_length=40, widget=forms.HiddenInput)
    method = forms.ChoiceField(choices=ContactAttempt.Method.choices)
    outcome = forms.ChoiceField(choices=ContactAttempt.Outcome.choices)
    note = forms.CharField(max_length=2000, required=False, widget=forms.TextInput(attrs={"size": 30}))


class OpenRecallForm(forms.Form):
    recall = forms.CharField(max_length=40, label="Open a recall by number")


class ShelfFilterForm(forms.Form):
    """The shelf page's filters: a site the person holds, a recall with a shelf task there (blank: all)."""

    site = forms.ChoiceField(required=False, label="Site")
    recall = forms.ChoiceField(required=False, label="Recall")

    def __init__(self, data, *, sites, recalls):
        super().__init__(data)
        self.fields["site"].choices = [("", "All my sites"), *((s, s) for s in sites)]
        self.fields["recall"].choices = [("", "All recalls"), *((r, r) for r in recalls)]
        self.fields["site"].error_messages["invalid_choice"] = (
            "“%(value)s” is not one of your sites; ask an operator to grant it (Admin › Shelf › Staff sites).")
        self.fields["recall"].error_messages["invalid_choice"] = "No recall “%(value)s” has a shelf task at your sites."
