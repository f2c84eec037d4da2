"""Forms of the ingest pages: uploads and API tokens."""

from __future__ import annotations

from django import forms


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files; an empty one is let through so that the page can name it and go on
    with the others (a plain FileField refuses the whole form for it)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            if not data and self.required:
                raise forms.ValidationError(self.error_messages["required"], code="required")
            return [single(item, initial) for item in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(  # type: ignore[assignment]  # a field named like Form.files
        help_text="JSON Lines, .jsonl.gz, or OpenTelemetry JSON; several at once.",
        # The page shows no <label>: the input is named for assistive technology here.
        widget=MultipleFileInput(attrs={"aria-label": "Trace files to ingest"}),
    )


class TokenForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="What uses it, e.g. “nightly export from prod”."
    )
