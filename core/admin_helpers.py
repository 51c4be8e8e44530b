"""Thin admin plumbing: permission guard, service call with messages, confirmation pages."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from core.errors import DomainError


def require(request: HttpRequest, perm: str) -> None:
    """Every state change is checked on the server, whatever the page showed."""
    if not request.user.has_perm(perm):
        raise PermissionDenied(f"this action needs the permission {perm}")


def perform(request: HttpRequest, call: Callable[[], Any], *, success: str, back: str) -> HttpResponse:
    """Call one service; a refusal becomes an error message, never a 500."""
    try:
        call()
    except DomainError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, success)
    return HttpResponseRedirect(back)


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000)


class ConfirmForm(forms.Form):
    pass


def action_page(
    request: HttpRequest,
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    *,
    obj: Any,
    title: str,
    form: forms.Form,
    back: str,
    explanation: str = "",
    details_template: str = "",
    extra: dict[str, Any] | None = None,
) -> TemplateResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "object": obj,
        "form": form,
        "back": back,
        "explanation": explanation,
        "details_template": details_template,
        **(extra or {}),
    }
    return TemplateResponse(request, "admin/action_confirm.html", context)


def action_view(
    request: HttpRequest,
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    *,
    perm: str,
    obj: Any,
    title: str,
    back: str,
    form_class: type[forms.Form],
    call: Callable[[forms.Form], Any],
    success: str,
    explanation: str = "",
    details_template: str = "",
    extra: dict[str, Any] | None = None,
    initial: dict[str, Any] | None = None,
) -> HttpResponse:
    """GET shows the confirmation form; POST validates it and calls the service."""
    require(request, perm)
    if request.method == "POST":
        form = form_class(request.POST)
        if form.is_valid():
            return perform(request, lambda: call(form), success=success, back=back)
    else:
        form = form_class(initial=initial)
    return action_page(
        request,
        model_admin,
        obj=obj,
        title=title,
        form=form,
        back=back,
        explanation=explanation,
        details_template=details_template,
        extra=extra,
    )


class CaseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A read-only list and case page: every change goes through an action view and its service."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """An id pasted into the search box finds its case; anything else searches the usual fields."""
        try:
            return queryset.filter(id=uuid.UUID(search_term.strip())), False
        except ValueError:
            return super().get_search_results(request, queryset, search_term)
