"""Forms of the replay pages: freezing fixture sets, starting replays, exporting."""

from __future__ import annotations

from django import forms

from reviewapp.forms.fields import whole_number

SOURCES = [
    ("ticket", "a ticket"),
    ("family", "a family"),
    ("queue", "a queue filter"),
    ("settled", "a version's settled tickets"),
]
EXPORT_PARTS = [
    ("bundle", "zip: records, policy, expected verdicts, manifest"),
    ("records", "records (JSON Lines)"),
    ("expected", "expected verdicts (JSON Lines)"),
    ("policy", "policy (JSON)"),
]


class FreezeForm(forms.Form):
    """Runs to freeze from the desk: one of the sources, with what names it."""

    source = forms.ChoiceField(choices=SOURCES)
    ticket = forms.IntegerField(required=False, min_value=1)
    family = forms.CharField(required=False, max_length=64)
    # The queue's URL parameters, as its address shows them ("reason=partial-result&…").
    queue = forms.CharField(required=False, max_length=2000)
    version = forms.IntegerField(required=False, min_value=1)
    name = forms.CharField(
        required=False, max_length=200, help_text="Left empty, a name is made from the source."
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def clean(self) -> dict:
        data = super().clean() or {}
        needed = {"ticket": "ticket", "family": "family", "settled": "version"}.get(
            data.get("source", "")
        )
        if needed and not data.get(needed):
            self.add_error(needed, "Say which.")
        return data


class FileFixtureForm(forms.Form):
    file = forms.FileField(
        help_text="A trace (JSON Lines, .gz, OpenTelemetry JSON) or a fixture bundle (.zip) "
        "exported here or elsewhere."
    )
    name = forms.CharField(max_length=200)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class SharedFixtureForm(forms.Form):
    shared = forms.CharField(max_length=200)
    name = forms.CharField(required=False, max_length=200)


class ReplayForm(forms.Form):
    """What to replay under: "draft", "v3" (or "3"), "proposal-12"."""

    policy = forms.CharField(max_length=40)

    def choice(self) -> tuple[str, int | None]:
        text = self.cleaned_data["policy"].strip().lower()
        if text == "draft":
            return "draft", None
        if text.startswith("proposal-") and (number := whole_number(text[9:])) is not None:
            return "proposal", number
        number = whole_number(text.removeprefix("v"))
        if number is not None:
            return "version", number
        raise forms.ValidationError("draft, a version (v3) or a proposal (proposal-12)")


class ExportForm(forms.Form):
    part = forms.ChoiceField(choices=EXPORT_PARTS, initial="bundle")
    version = forms.IntegerField(
        min_value=0,
        help_text="The version the expected verdicts are under (0: the built-in default).",
    )
    redact = forms.CharField(
        required=False,
        max_length=1000,
        help_text="Keys whose values are replaced by tokens, e.g. email, customerId, orderId.",
    )
    # The records (and the bundle holding them) are the traces' own: read on purpose, with
    # the raw data permission (replay.exports.raw_export_check).
    reason = forms.CharField(
        required=False,
        max_length=500,
        help_text="Records and bundles hold raw traces: say why you export them (recorded).",
    )
