"""What the redaction page posts: a rule set document and why."""

from __future__ import annotations

from django import forms

MAX_DOCUMENT = 100_000


class RedactionRulesForm(forms.Form):
    document = forms.CharField(max_length=MAX_DOCUMENT, widget=forms.Textarea(attrs={"rows": 14}))
    reason = forms.CharField(max_length=2000, strip=True)
