"""Forms of authority decisions: proposing, deciding, publishing, importing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django import forms

from reviewapp.engine.normalize import NORMALIZER_KINDS
from reviewapp.forms.fields import whole_number
from reviewapp.models import RuleProposal

NORMALIZER_CHOICES = [("", "—")] + [(kind, kind) for kind in NORMALIZER_KINDS]
# The source choice that means "the one typed in `source`".
ANOTHER_SOURCE = ""


def _words(text: str) -> list[str]:
    return [item.strip() for item in text.replace("\n", ",").split(",") if item.strip()]


class ProposalForm(forms.Form):
    kind = forms.ChoiceField(choices=[c for c in RuleProposal.Kind.choices if c[0] != "document"])
    field = forms.CharField(
        max_length=200, help_text='The decision field, or "*" for every field (rules only).'
    )
    # The motivating tickets' sources, offered as choices (the form's `sources`); any other
    # is typed in `source`. Either way the decision names one source, checked as before.
    source_choice = forms.CharField(max_length=200, required=False, widget=forms.RadioSelect)
    source = forms.CharField(
        max_length=200,
        required=False,
        help_text="The source that owns the field.",
        widget=forms.TextInput(attrs={"list": "source-options"}),
    )
    actions = forms.CharField(
        required=False, help_text="Comma-separated actions this applies to; empty means any action."
    )
    unless_values = forms.CharField(
        required=False, help_text="Comma-separated values for which the owner does not decide."
    )
    revision_domain = forms.CharField(max_length=200, required=False)
    normalize_kind = forms.ChoiceField(choices=NORMALIZER_CHOICES, required=False)
    case_insensitive = forms.BooleanField(required=False)
    collapse_whitespace = forms.BooleanField(required=False)
    aliases = forms.CharField(
        required=False, help_text='JSON object, e.g. {"erstattet": "refunded"}.'
    )
    error_code = forms.CharField(max_length=200, required=False)
    rationale = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), help_text="Why this is right."
    )
    tickets = forms.CharField(required=False, widget=forms.HiddenInput)
    family = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offer_sources(())

    def offer_sources(self, sources: Sequence[str]) -> None:
        """Offer these sources (the motivating tickets') as choices, beside another one."""
        choices = [(source, source) for source in sources]
        self.fields["source_choice"].widget.choices = choices + [(ANOTHER_SOURCE, "another source")]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if chosen := data.get("source_choice"):
            data["source"] = chosen
        kind = data.get("kind")
        if kind == "authoritative-source" and not data.get("source"):
            self.add_error("source", "Name the source that owns the field.")
        if kind == "harmless-error" and not data.get("error_code"):
            self.add_error("error_code", "Name the error code.")
        if kind in ("normalizer", "harmless-error") and data.get("field") == "*":
            self.add_error("field", "Name one field.")
        if kind == "normalizer" and not data.get("normalize_kind"):
            self.add_error("normalize_kind", "Choose how values are compared.")
        if data.get("aliases"):
            try:
                aliases = json.loads(data["aliases"])
            except ValueError:
                aliases = None
            if not isinstance(aliases, dict):
                self.add_error("aliases", 'Give a JSON object, e.g. {"erstattet": "refunded"}.')
            else:
                data["aliases_parsed"] = aliases
        return data

    def change(self) -> tuple[str, dict[str, Any]]:
        """The proposal's kind and change document, from cleaned data."""
        data = self.cleaned_data
        kind = data["kind"]
        change: dict[str, Any] = {"field": data["field"].strip()}
        actions = _words(data.get("actions", ""))
        if actions and kind in ("authoritative-source", "higher-source-revision", "require-review"):
            change["actions"] = actions
        if kind == "authoritative-source":
            change["source"] = data["source"].strip()
            if unless := _words(data.get("unless_values", "")):
                change["unlessValues"] = unless
        elif kind == "higher-source-revision" and data.get("revision_domain"):
            change["revisionDomain"] = data["revision_domain"].strip()
        elif kind == "normalizer":
            normalize: dict[str, Any] = {"kind": data["normalize_kind"]}
            if data["normalize_kind"] in ("enum", "text") and data.get("case_insensitive"):
                normalize["caseInsensitive"] = True
            if data["normalize_kind"] == "text" and data.get("collapse_whitespace"):
                normalize["collapseWhitespace"] = True
            if data["normalize_kind"] == "enum" and data.get("aliases_parsed"):
                normalize["aliases"] = data["aliases_parsed"]
            change["normalize"] = normalize
        elif kind == "harmless-error":
            change["code"] = data["error_code"].strip()
        return kind, change

    def ticket_ids(self) -> list[int]:
        """The motivating tickets, read from what was posted (valid or not)."""
        found = (whole_number(item) for item in _words(self.data.get("tickets", "")))
        return [ticket_id for ticket_id in found if ticket_id is not None][:MAX_MOTIVATING_TICKETS]


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class PublishForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), help_text="Why this version, now."
    )


# A policy document is a few kilobytes; anything near this is not one.
MAX_POLICY_FILE_BYTES = 1024 * 1024


# Motivating tickets a proposal keeps (a family's prefill offers as many).
MAX_MOTIVATING_TICKETS = 500


class ImportForm(forms.Form):
    document = forms.FileField(
        help_text="A policy document (JSON), as exported.",
        # The page shows no <label>: the input is named for assistive technology here.
        widget=forms.ClearableFileInput(attrs={"aria-label": "Policy document (JSON)"}),
    )
    rationale = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))

    def clean_document(self):
        document = self.cleaned_data["document"]
        if document.size > MAX_POLICY_FILE_BYTES:
            raise forms.ValidationError(
                f"a policy file is at most {MAX_POLICY_FILE_BYTES:,} bytes; this one is "
                f"{document.size:,}",
                code="too_large",
            )
        return document
