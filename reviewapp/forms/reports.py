"""What the tallies page posts: closing or reopening a month, with a reason."""

from __future__ import annotations

from django import forms

MAX_REASON = 2000


class MonthClosingForm(forms.Form):
    """Why a month is closed by hand (optional) or reopened (the service requires one)."""

    reason = forms.CharField(required=False, max_length=MAX_REASON, strip=True)
