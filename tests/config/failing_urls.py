"""A URL that fails, for the logging test."""

from django.http import HttpRequest, HttpResponse
from django.urls import path


def boom(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(1 / 0))


urlpatterns = [path("boom", boom)]
