"""What the privacy pages post: a redaction rule set and why; an erasure request."""

from __future__ import annotations

from django import forms

MAX_DOCUMENT = 100_000


class RedactionRulesForm(forms.Form):
    document = forms.CharField(max_length=MAX_DOCUMENT, widget=forms.Textarea(attrs={"rows": 14}))
    reason = forms.CharField(max_length=2000, strip=True)


class ErasureForm(forms.Form):
    value = forms.CharField(max_length=2000, strip=False, widget=forms.PasswordInput)
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
