"""What the alerts page posts: a new destination, and a destination's subscriptions."""

from __future__ import annotations

from django import forms

from reviewapp.alerts.kinds import KINDS
from reviewapp.models import AlertDestination

KIND_CHOICES = list(KINDS.items())


class DestinationForm(forms.Form):
    name = forms.CharField(max_length=100)
    channel = forms.ChoiceField(choices=AlertDestination.Channel.choices, initial="webhook")
    url = forms.CharField(max_length=500, required=False, label="Webhook URL")
    # Never rendered back (render_value=False): a secret is not shown after saving.
    secret = forms.CharField(
        max_length=200, required=False, strip=False, widget=forms.PasswordInput
    )
    emails = forms.CharField(
        max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 2})
    )
    kinds = forms.MultipleChoiceField(
        choices=KIND_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )


class SubscriptionsForm(forms.Form):
    kinds = forms.MultipleChoiceField(
        choices=KIND_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )
    active = forms.BooleanField(required=False)
    secret = forms.CharField(
        max_length=200, required=False, strip=False, widget=forms.PasswordInput
    )
