"""The sign-in page (a password, throttled: accounts/sign_in.py) and, when OIDC_RP_CLIENT_ID
is set, sign-in with the organisation's identity provider (accounts/identity_provider.py):
a link to the provider, and the callback it sends the browser back to. Off, both answer 404."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import LoginView
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_GET
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from reviewapp.accounts.identity_provider import NO_ANSWER, configuration_checked
from reviewapp.accounts.sign_in import ThrottledAuthenticationForm


class SignInView(LoginView):
    authentication_form = ThrottledAuthenticationForm

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["identity_provider"] = settings.OIDC_PROVIDER_NAME if settings.OIDC_ENABLED else ""
        return context


class IdentityProviderCallbackView(OIDCAuthenticationCallbackView):
    def login_failure(self) -> HttpResponse:
        # Back to the sign-in page, saying why (the backend leaves the reason on the request).
        reason = getattr(self.request, "identity_provider_refusal", NO_ANSWER)
        messages.error(self.request, reason)
        return HttpResponseRedirect(reverse("login"))


def _only_when_on(view: Any) -> Any:
    @login_not_required
    @require_GET
    def when_on(request: HttpRequest) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("sign-in with an identity provider is not set up")
        configuration_checked()
        return view(request)

    return when_on


identity_provider_start = _only_when_on(OIDCAuthenticationRequestView.as_view())
identity_provider_callback = _only_when_on(IdentityProviderCallbackView.as_view())
