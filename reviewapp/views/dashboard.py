from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from reviewapp.policies import active_policy


def dashboard(request: HttpRequest) -> HttpResponse:
    return render(request, "dashboard.html", {"policy": active_policy().policy})
