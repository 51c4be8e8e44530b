"""Deletion requests in the admin: list, case page, approve / cancel / resume / run now.

Thin: each view parses a form, calls one service and reports.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from core.admin_helpers import CaseAdmin, ConfirmForm, ReasonForm, action_view
from deletions import case, clock
from deletions.models import DeletionRequest
from deletions.store.requests import stage_snapshot
from deletions.users import service


class ApproveForm(forms.Form):
    inventory_digest = forms.CharField(widget=forms.HiddenInput, max_length=64)
    confirm = forms.BooleanField(label="I checked this exact inventory and approve it", required=True)


@admin.register(DeletionRequest)
class DeletionRequestAdmin(CaseAdmin):
    list_display = ("target", "status", "requested_by", "owner", "next_check_at", "retry_count", "created_at")
    list_filter = ("status",)
    search_fields = ("target",)
    date_hierarchy = "created_at"
    ordering = ("-created_at",)
    list_per_page = 100

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("<uuid:pk>/approve/", view(self.approve_view), name="deletions_deletionrequest_approve"),
            path("<uuid:pk>/cancel/", view(self.cancel_view), name="deletions_deletionrequest_cancel"),
            path("<uuid:pk>/resume/", view(self.resume_view), name="deletions_deletionrequest_resume"),
            path("<uuid:pk>/run/", view(self.run_view), name="deletions_deletionrequest_run"),
            *super().get_urls(),
        ]

    def _back(self, pk: Any) -> str:
        return reverse("admin:deletions_deletionrequest_change", args=[pk])

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        req = get_object_or_404(DeletionRequest, pk=object_id)
        if not self.has_view_permission(request, req):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        stages = [stage_snapshot(s) for s in req.stages.all()]
        user = request.user
        can = case.actions(req, user.get_all_permissions())
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Deletion of {req.target}",
            "original": req,
            "req": req,
            "panel": case.panel(req, clock.now()),
            "lanes": case.chain_picture(req.inventory_json, stages),
            "chain": case.chain_order(stages),
            "approvals": list(req.approvals.order_by("approved_at")),
            "decisions": list(req.decisions.all()),
            "can": can,
            "own_request": req.requested_by == user.get_username(),
        }
        return TemplateResponse(request, "admin/deletions/case.html", context)

    def approve_view(self, request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
        req = get_object_or_404(DeletionRequest, pk=pk)
        return action_view(
            request,
            self,
            perm="deletions.approve_deletionrequest",
            obj=req,
            back=self._back(pk),
            title=f"Approve deletion of {req.target}",
            explanation="You approve exactly this inventory. If it changed since you opened this page, "
            "the approval is refused. You cannot approve a request you submitted.",
            details_template="admin/deletions/inventory.html",
            extra={"req": req},
            form_class=ApproveForm,
            initial={"inventory_digest": req.inventory_digest},
            call=lambda form: service.deletion_approve(
                request_id=pk, approved_by=request.user.get_username(), digest=form.cleaned_data["inventory_digest"]
            ),
            success=f"Approved the deletion of {req.target}.",
        )

    def cancel_view(self, request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
        req = get_object_or_404(DeletionRequest, pk=pk)
        return action_view(
            request,
            self,
            perm="deletions.cancel_deletionrequest",
            obj=req,
            back=self._back(pk),
            title=f"Cancel deletion of {req.target}",
            explanation="Before the first stage this cancels outright. Once running, the worker stops at its next "
            "stage boundary; stages already completed stay done and are reported as done.",
            form_class=ReasonForm,
            call=lambda form: service.deletion_cancel(
                request_id=pk, cancelled_by=request.user.get_username(), reason=form.cleaned_data["reason"]
            ),
            success=f"Cancellation of {req.target} recorded.",
        )

    def resume_view(self, request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
        req = get_object_or_404(DeletionRequest, pk=pk)
        return action_view(
            request,
            self,
            perm="deletions.run_deletionrequest",
            obj=req,
            back=self._back(pk),
            title=f"Resume deletion of {req.target}",
            explanation="The failed stage is retried at once by the next worker; its retry count starts again.",
            form_class=ReasonForm,
            call=lambda form: service.deletion_resume(
                request_id=pk, resumed_by=request.user.get_username(), reason=form.cleaned_data["reason"]
            ),
            success=f"Resumed {req.target}.",
        )

    def run_view(self, request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
        req = get_object_or_404(DeletionRequest, pk=pk)
        return action_view(
            request,
            self,
            perm="deletions.run_deletionrequest",
            obj=req,
            back=self._back(pk),
            title=f"Run deletion of {req.target} now",
            explanation="Enqueues a worker run. A worker already holding the lease keeps it; a second run is refused.",
            form_class=ConfirmForm,
            call=lambda form: service.deletion_run_now(request_id=pk, requested_by=request.user.get_username()),
            success=f"Run of {req.target} enqueued.",
        )
