"""Forms of the review desk: every change to a ticket is posted through one of these. They
check the shape of what was sent (a NUL character, a missing field, a user who does not
exist); whether the change makes sense for the ticket is the service's to say."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from reviewapp.forms.fields import parse_selection, whole_number
from reviewapp.models import Ticket
from reviewapp.review.changes import REVIEWER_CAUSES

MAX_TEXT = 10_000


class TicketChange(forms.Form):
    """A change to one ticket names the revision its author saw. One that cannot be read
    is revision 0, which no ticket has: reported as changed since, never applied."""

    revision = forms.CharField(required=False, max_length=20)

    def clean_revision(self) -> int:
        return whole_number(self.cleaned_data["revision"]) or 0


class AssigneeField(forms.CharField):
    """A username (an active user) or nothing: unassigned."""

    def __init__(self, **kwargs: Any):
        super().__init__(required=False, max_length=150, **kwargs)

    def clean(self, value: Any) -> Any:
        username = super().clean(value)
        if not username:
            return None
        try:
            return get_user_model().objects.get(username=username, is_active=True)
        except get_user_model().DoesNotExist:
            raise forms.ValidationError(f"there is no user {username}") from None


class AssignForm(TicketChange):
    assignee = AssigneeField()


class Closing(forms.Form):
    resolution = forms.ChoiceField(
        choices=Ticket.Resolution.choices,
        error_messages={"required": "close as explained or unexplained"},
    )
    cause = forms.ChoiceField(choices=[("", "—"), *REVIEWER_CAUSES], required=False)
    cause_text = forms.CharField(required=False, max_length=MAX_TEXT, strip=True)


class CloseForm(TicketChange, Closing):
    # The observation marked right (its id, or "none"); empty: not marked.
    right = forms.CharField(required=False, max_length=500)


class CommentForm(forms.Form):
    text = forms.CharField(
        max_length=MAX_TEXT, error_messages={"required": "a comment needs some text"}
    )


class BulkForm(Closing):
    """Assign or close the checked rows, or the whole family as the page showed it."""

    operation = forms.ChoiceField(choices=[("assign", "assign"), ("close", "close")])
    whole_family = forms.CharField(required=False, max_length=64)
    # Every ticket the filters posted with the form select, as the page showed them: the
    # number it showed (the confirmation compares it with the number that match).
    all_matching = forms.IntegerField(required=False, min_value=1)
    seen = forms.CharField(required=False, max_length=100)
    assignee = AssigneeField()
    # Not required here: only a close needs them.
    resolution = forms.ChoiceField(choices=Ticket.Resolution.choices, required=False)

    def selection(self, values: list[str]) -> dict[int, int]:
        return parse_selection(values)


def form_errors(form: forms.Form) -> str:
    """A form's errors as one sentence."""
    return "; ".join(str(message) for messages in form.errors.values() for message in messages)
