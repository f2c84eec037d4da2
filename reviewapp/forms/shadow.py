"""Forms of shadow mode and the gate: putting a candidate in shadow (and backfilling a
window), taking it out, and choosing an action's gate mode."""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from django import forms

from reviewapp.infra.days import MAX_DAYS, Window
from reviewapp.models import GateMode

# "draft", "proposal-<id>" or "version-<number>" (shadow.designations.candidate_choose).
CANDIDATE = re.compile(r"^(draft|proposal-[0-9]{1,12}|version-[0-9]{1,9})$")


class BackfillFields(forms.Form):
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if (since is None) != (until is None):
            self.add_error("until", "Give both days of the window, or neither.")
        elif since and until:
            if since > until:
                self.add_error("until", "The window ends before it starts.")
            elif until - since >= timedelta(days=MAX_DAYS):
                self.add_error("until", f"A window is at most {MAX_DAYS} days.")
            elif until > Window.last(1).until + timedelta(days=1):
                self.add_error("until", "A backfill looks at the past.")
        return data

    @property
    def window(self) -> tuple[date, date] | None:
        since, until = self.cleaned_data.get("since"), self.cleaned_data.get("until")
        return (since, until) if since and until else None


class ShadowStartForm(BackfillFields):
    candidate = forms.CharField(max_length=40)
    reason = forms.CharField(
        max_length=2000, widget=forms.Textarea(attrs={"rows": 2}), help_text="Why, for the record."
    )

    def clean_candidate(self) -> str:
        value = self.cleaned_data["candidate"]
        if not CANDIDATE.match(value):
            raise forms.ValidationError("Choose a draft, a proposal or a published version.")
        return value


class BackfillForm(BackfillFields):
    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not self.errors and self.window is None:
            self.add_error("since", "Choose the days to backfill.")
        return data


class ShadowEndForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False)


class GateModeForm(forms.Form):
    action = forms.CharField(max_length=200)
    mode = forms.ChoiceField(choices=GateMode.Mode.choices)
    reason = forms.CharField(max_length=2000, help_text="Why: which reviewed cases allow it.")
