"""The admin's pages for other systems: each staff user's own personal tokens (made, named, scoped
and revoked there; the token shown once), webhook subscribers, and the delivery log."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from api.models import WebhookDelivery, WebhookSubscriber
from core import clock, tokens
from core.admin import ReadOnly, refused_as_forbidden
from core.models import ApiToken, TokenScope


class TokenForm(forms.ModelForm):  # type: ignore[type-arg]
    days = forms.IntegerField(
        min_value=1,
        max_value=tokens.MAX_DAYS,
        initial=lambda: settings.TOKEN_DAYS,
        help_text="it stops working after this many days",
    )

    class Meta:
        model = ApiToken
        fields = ["name", "scope"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """A staff user's own tokens (a superuser sees everyone's, to revoke one). Never edited, never
    deleted: a token is revoked, and the row stays as evidence of who could act."""

    form = TokenForm
    list_display = ["name", "user", "scope", "prefix_shown", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["scope"]
    actions = ["revoke"]
    readonly_fields = ["user", "name", "scope", "prefix", "created_at", "expires_at", "last_used_at", "revoked_at"]

    @admin.display(description="token")
    def prefix_shown(self, obj: ApiToken) -> str:
        return f"{obj.prefix}…"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        rows = super().get_queryset(request).select_related("user")
        return rows if request.user.is_superuser else rows.filter(user=request.user)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else []

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else ["name", "scope", "days"]

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        raw = tokens.issue(
            request.user,
            name=form.cleaned_data["name"],
            scope=form.cleaned_data["scope"] or TokenScope.READ,
            days=form.cleaned_data["days"],
        )
        saved = ApiToken.objects.get(digest=tokens.digest(raw))
        obj.pk, obj.prefix = saved.pk, saved.prefix
        messages.warning(request, f"Your new token (shown this once; copy it now): {raw}")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        now = clock.now()
        done = sum(tokens.revoke(t.pk, now=now) for t in queryset)
        messages.success(request, f"{done} token(s) revoked; {queryset.count() - done} were already revoked.")


class SubscriberForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = WebhookSubscriber
        fields = ["name", "url", "secret", "active"]
        widgets = {"secret": forms.PasswordInput(render_value=True)}
        field_classes = {"url": forms.URLField}

    url = forms.URLField(assume_scheme="https", max_length=500)


@admin.register(WebhookSubscriber)
class WebhookSubscriberAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = SubscriberForm
    list_display = ["name", "url", "active", "created_at"]

    def save_model(self, request: HttpRequest, obj: WebhookSubscriber, form: Any, change: bool) -> None:
        if obj.created_at is None:
            obj.created_at = clock.now()
        super().save_model(request, obj, form, change)

    # What a subscriber was told stays (its final deliveries): one told anything is made inactive instead.
    def delete_model(self, request: HttpRequest, obj: WebhookSubscriber) -> None:
        with refused_as_forbidden():
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WebhookSubscriber]) -> None:
        with refused_as_forbidden():
            super().delete_queryset(request, queryset)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    """The delivery log: what was told to whom, how often it was tried and what came back."""

    list_display = ["created_at", "subscriber", "event", "case_id", "status", "attempts", "last_status", "last_error"]
    list_filter = ["status", "subscriber"]
    show_full_result_count = False
    list_select_related = ["subscriber"]
