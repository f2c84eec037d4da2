"""What the people pages post: a person to invite, a role, active or not; and the password
a person sets with their one-time link."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import SetPasswordForm
from django.contrib.auth.validators import UnicodeUsernameValidator

from reviewapp.accounts.people import ROLES, password_set_record

ROLE_CHOICES = [(role, role) for role in ROLES]


class InviteForm(forms.Form):
    username = forms.CharField(max_length=150, validators=[UnicodeUsernameValidator()])
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class ActiveForm(forms.Form):
    active = forms.TypedChoiceField(choices=[("0", "deactivate"), ("1", "reactivate")], coerce=int)


class OwnPasswordForm(SetPasswordForm):
    """Django's set-password form, saving the password alone: the app's database role may
    write no other column of an account (reviewapp/infra/roles.py), and it is recorded."""

    def save(self, commit: bool = True):
        self.user.set_password(self.cleaned_data["new_password1"])
        if commit:
            self.user.save(update_fields=["password"])
            password_set_record(self.user)
        return self.user
