"""The form of an erasure request: the value, and why."""

from __future__ import annotations

from django import forms


class ErasureForm(forms.Form):
    value = forms.CharField(max_length=2000, strip=False, widget=forms.PasswordInput)
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
