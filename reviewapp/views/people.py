"""The people page, admins only (checked here on the server, MANAGE_PEOPLE): everyone with
an account, their role, whether it is active, their last sign-in; invite someone, change a
role, deactivate or reactivate, issue a new one-time link to set a password. And the page
that link opens, for the person it was made for (no sign-in: they have no password yet)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import permission_required
from django.contrib.auth.views import PasswordResetConfirmView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from reviewapp.accounts.people import (
    ROLES,
    PeopleError,
    password_link,
    people,
    person_active_set,
    person_invite,
    person_role_set,
)
from reviewapp.accounts.roles import MANAGE_PEOPLE, LastAdminError
from reviewapp.forms.people import ActiveForm, InviteForm, OwnPasswordForm, RoleForm
from reviewapp.forms.review import form_errors


def _page(request: HttpRequest, form: InviteForm, link: dict | None = None) -> HttpResponse:
    context = {"people": people(), "form": form, "roles": ROLES, "link": link}
    return render(request, "people/page.html", context)


def _link_of(request: HttpRequest, user, path: str) -> dict:
    return {"username": user.get_username(), "url": request.build_absolute_uri(path)}


@never_cache  # it shows a one-time link: no copy of the page may be kept anywhere
@require_http_methods(["GET", "POST"])
@permission_required(MANAGE_PEOPLE, raise_exception=True)
def people_page(request: HttpRequest) -> HttpResponse:
    """GET: the people; POST: invite one (the page again, with their link)."""
    if request.method == "GET":
        return _page(request, InviteForm())
    form = InviteForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not invited: " + form_errors(form))
        return _page(request, form)
    try:
        user, path = person_invite(
            form.cleaned_data["username"], form.cleaned_data["role"], actor=request.user
        )
    except PeopleError as exc:
        messages.error(request, f"Not invited: {exc}.")
        return _page(request, form)
    messages.success(request, f"{user.get_username()} is invited as {form.cleaned_data['role']}.")
    return _page(request, InviteForm(), _link_of(request, user, path))


@require_POST
@permission_required(MANAGE_PEOPLE, raise_exception=True)
def person_role(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(get_user_model(), pk=user_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Role not changed: " + form_errors(form))
        return redirect("people")
    try:
        person_role_set(person, form.cleaned_data["role"], actor=request.user)
    except LastAdminError:
        messages.error(request, f"Role not changed: {person.get_username()} is the last admin.")
    else:
        messages.success(request, f"{person.get_username()} is now {form.cleaned_data['role']}.")
    return redirect("people")


@require_POST
@permission_required(MANAGE_PEOPLE, raise_exception=True)
def person_active(request: HttpRequest, user_id: int) -> HttpResponse:
    person = get_object_or_404(get_user_model(), pk=user_id)
    form = ActiveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing changed: " + form_errors(form))
        return redirect("people")
    active = bool(form.cleaned_data["active"])
    try:
        person_active_set(person, active, actor=request.user)
    except LastAdminError:
        messages.error(
            request, f"Not deactivated: {person.get_username()} is the last active admin."
        )
    else:
        said = (
            "reactivated" if active else "deactivated: their sessions and API tokens no longer work"
        )
        messages.success(request, f"{person.get_username()} is {said}.")
    return redirect("people")


@never_cache
@require_POST
@permission_required(MANAGE_PEOPLE, raise_exception=True)
def person_link(request: HttpRequest, user_id: int) -> HttpResponse:
    """A new one-time link to set a password (an invitation lost, a password forgotten)."""
    person = get_object_or_404(get_user_model(), pk=user_id)
    try:
        path = password_link(person, actor=request.user)
    except PeopleError as exc:
        messages.error(request, f"No link: {exc}.")
        return redirect("people")
    return _page(request, InviteForm(), _link_of(request, person, path))


class SetPasswordView(PasswordResetConfirmView):
    """Django's own (the token moves from the address into the session at once), for an
    active account only, saving the password alone and recording it; then sign in."""

    form_class = OwnPasswordForm
    template_name = "people/set_password.html"
    success_url = reverse_lazy("login")

    def get_user(self, uidb64):
        user = super().get_user(uidb64)
        return user if user is not None and user.is_active else None

    def form_valid(self, form):
        response = super().form_valid(form)
        messages.success(self.request, "Your password is set: sign in with it.")
        return response
