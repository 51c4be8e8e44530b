"""Deletion requests in the admin: list, case page, approve / cancel / resume / run now.

Thin: each view parses a form, calls one service and reports.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from core import clock
from core.admin import CaseAction, CaseAdmin, ConfirmForm, actor
from deletions import case, services
from deletions.models import DeletionRequest
from deletions.store.requests import stage_snapshot


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
    case_actions = (
        CaseAction(
            name="approve",
            perm=services.APPROVE,
            title="Approve deletion of {obj.target}",
            explanation="You approve exactly this inventory. If it changed since you opened this page, "
            "the approval is refused. You cannot approve a request you submitted.",
            details_template="admin/deletions/inventory.html",
            form_class=ApproveForm,
            initial=lambda req: {"inventory_digest": req.inventory_digest},
            call=lambda actor, req, data: services.deletion_approve(
                actor=actor, request_id=req.id, digest=data["inventory_digest"]
            ),
            success="Approved the deletion of {obj.target}.",
        ),
        CaseAction(
            name="cancel",
            perm=services.CANCEL,
            title="Cancel deletion of {obj.target}",
            explanation="Before the first stage this cancels outright. Once running, the worker stops at its next "
            "stage boundary; stages already completed stay done and are reported as done.",
            call=lambda actor, req, data: services.deletion_cancel(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
            success="Cancellation of {obj.target} recorded.",
        ),
        CaseAction(
            name="resume",
            perm=services.RUN,
            title="Resume deletion of {obj.target}",
            explanation="The failed stage is retried at once by the next worker; its retry count starts again.",
            call=lambda actor, req, data: services.deletion_resume(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
            success="Resumed {obj.target}.",
        ),
        CaseAction(
            name="run",
            perm=services.RUN,
            title="Run deletion of {obj.target} now",
            explanation="Enqueues a worker run. A worker already holding the lease keeps it; a second run is refused.",
            form_class=ConfirmForm,
            call=lambda actor, req, data: services.deletion_run_now(actor=actor, request_id=req.id),
            success="Run of {obj.target} enqueued.",
        ),
    )

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        req = self.case_object(DeletionRequest.objects.all(), object_id)
        if not self.has_view_permission(request, req):
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
            "own_request": services.submitted_by(req, actor(request)),
        }
        return TemplateResponse(request, "admin/deletions/case.html", context)
