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
