"""The app's routes, and one that fails, as a page and as the API: for the headers of a 500
(tests/security/test_headers.py)."""

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from reviewapp.urls import urlpatterns as app_urls


@login_not_required
def boom(request):
    raise RuntimeError("a test's deliberate failure")


urlpatterns = [*app_urls, path("boom/", boom), path("api/v1/boom", boom)]
