"""Deletion requests in the admin: list (progress, next check, CSV export, bulk cancel),
submit, case page and its actions.

Thin: each view parses a form, calls one service and reports; the services check the
permission again and everything else.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Upper
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core import access, clock, present
from core import custody as rota_rules
from core.admin import (
    CaseAction,
    CaseAdmin,
    ReasonForm,
    actor,
    custody_actions,
    date_filter,
    lens,
    refused_as_forbidden,
    require,
    sees,
)
from core.errors import DomainError
from core.present import Offer
from core.templatetags.present import when
from deletions import case, evidence, proposal, reading, selectors, services, targets
from deletions import proof as deletion_proof
from deletions.contract import FAULT_ALARMS, agents_left
from deletions.models import (
    DeletionApproval,
    DeletionDecision,
    DeletionRequest,
    LeaseEvent,
    StageAttempt,
    StageHistory,
    Status,
    TargetSystem,
)
from deletions.rules.inventory import validate_target
from deletions.rules.workflow import stage_count
from deletions.selectors import COMMUNITY_COUNT, UNSETTLED, stage_snapshot
from deletions.store.requests import inventory_digest
from deletions.targets.base import TargetUnreachable, supervised


class ApproveForm(forms.Form):
    inventory_digest = forms.CharField(widget=forms.HiddenInput, max_length=64)
    confirm = forms.BooleanField(label="I checked this exact inventory and approve it", required=True)


class SettleForm(ReasonForm):
    confirm = forms.BooleanField(label="I checked the target system: the operation was not applied", required=True)


class RecordEffectForm(forms.Form):
    outcome = forms.ChoiceField(
        choices=[("applied", "I applied it by hand"), ("not_applied", "I did not (or could not) apply it")],
        widget=forms.RadioSelect,
    )
    evidence = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        max_length=2000,
        help_text="what you did or saw in the vendor's console: ticket, counts, screen",
    )
    has_agents = forms.ChoiceField(
        choices=[("", "(not purge_db)"), ("yes", "agents are left"), ("no", "no agents are left")],
        required=False,
        label="purge_db: agents left",
    )


class CorrectEffectForm(RecordEffectForm, ReasonForm):
    """An approver's correction of the latest record of an effect applied by hand (both are kept)."""

    outcome = forms.ChoiceField(
        choices=[("applied", "it was applied"), ("not_applied", "it was not applied")],
        widget=forms.RadioSelect,
        label="what was in fact done",
    )


class CloseAlarmForm(ReasonForm):
    kind = forms.ChoiceField(
        choices=[(k, k.replace("_", " ")) for k in FAULT_ALARMS],
        help_text="the fault you looked into; the reason says what you found",
    )


class SubmitForm(forms.Form):
    target = forms.CharField(
        max_length=255, help_text="demo:NAME, or manual:SYSTEM/ACCOUNT for a system deleted in by hand"
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000, help_text="ticket or why"
    )

    def clean_target(self) -> str:
        target = self.cleaned_data["target"].strip()
        try:
            targets.for_target(validate_target(target))  # a registered system takes it
            return target
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from None


class ExtendForm(ReasonForm):
    until = forms.DateField(
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="the new due date (at the time of day the request was received, UTC); at most "
        "three months after receipt",
    )


def _until(req: DeletionRequest, day: Any) -> Any:
    return datetime.combine(day, req.received_at.timetz())


class BulkCancelForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000)


class RevokeForm(ReasonForm):
    withdrawn = forms.BooleanField(
        label="The requester withdrew the request (the case then advises cancelling it, not approving again)",
        required=False,
    )


def _proposal(req: DeletionRequest) -> dict[str, Any]:
    """The inventory proposed, and why it was submitted (the submitter's own words)."""
    submitted = req.decisions.filter(action="submit").values_list("reason", flat=True).first()
    return {"proposal": proposal.of_request(req), "submit_reason": submitted or ""}


def _operation_in_question(req: DeletionRequest, heading: str) -> dict[str, Any]:
    """The current stage's submitted operation, where to check it and what the target last answered."""
    return {
        "heading": heading,
        "operation": req.stages.filter(is_current=True, submitted_at__isnull=False).first(),
        "where": targets.for_target(req.target).where(),
    }


def _by_hand(target: str) -> bool:
    """Whether effects at this target wait for a person (as its receiver declares); a receiver that does
    not answer now offers nothing by hand (the service asks again, and says why it refuses)."""
    try:
        return supervised(targets.for_target(target).capabilities)
    except TargetUnreachable:
        return False


def _custody_offers(request: HttpRequest, told: Any, perms: set[str], cannot_act: str) -> list[Any]:
    """Take, assign, hand over: offered by the rules the service applies (`core.custody`), to the
    rota and people the story names (`case.story`); Take not to one who could not then act."""
    perm = services.ROTA_PERMISSION.get(told.rota or "", services.VIEW)
    members = rota_rules.rota(told.rota, perm) if told.rota else []
    return rota_rules.offers(
        rota_name=told.rota,
        why_nobody=told.why_nobody,
        person=told.person,
        backup=told.backup,
        me=request.user.get_username(),
        on_rota=any(m.pk == request.user.pk for m in members),
        perms=perms,
        rota_perm=services.VIEW,
        assign_perm=services.ASSIGN,
        cannot_act=cannot_act,
    )


class DeadlineFilter(admin.SimpleListFilter):
    """Open requests by their legal deadline: passed, due within the warning days, or later."""

    title = "deadline"
    parameter_name = "deadline"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        days = settings.DELETION_DEADLINE_WARNING_DAYS
        return [("passed", "passed"), ("soon", f"due within {days} days"), ("later", "later")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if not self.value():
            return queryset
        now = clock.now()
        soon = now + timedelta(days=settings.DELETION_DEADLINE_WARNING_DAYS)
        open_ = queryset.exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
        ranges = {
            "passed": Q(due_at__lte=now),
            "soon": Q(due_at__gt=now, due_at__lte=soon),
            "later": Q(due_at__gt=soon),
        }
        return open_.filter(ranges.get(self.value() or "", Q(pk__in=[])))


class SavedViews(admin.SimpleListFilter):
    """Shareable links (`?view=…`) for the three questions staff ask first. "Overdue" is the case
    panel's own rule (`case.overdue`) over the open cases whose saved check passed."""

    title = "saved views"
    parameter_name = "view"
    OVERDUE_CANDIDATES = 1000
    FAILED_CANDIDATES = 1000

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("mine", "waiting for me"), ("overdue", "overdue"), ("failed-week", "failed this week")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = clock.now()
        user = request.user
        if self.value() == "mine":
            waiting = reading.waiting_for(user, services.rotas_of(user), now, self.OVERDUE_CANDIDATES)
            return queryset.filter(id__in=[r.id for r, _, _ in waiting])  # as the inbox: the stories say
        if self.value() == "overdue":
            unsettled = StageHistory.objects.filter(UNSETTLED, request=OuterRef("pk"))
            due = (
                DeletionRequest.objects.exclude(status__in=[Status.COMPLETED, Status.CANCELLED])
                .filter(Q(next_check_at__lt=now - case.OVERDUE_GRACE) | Q(next_attempt_at__lt=now - case.OVERDUE_GRACE))
                .annotate(unsettled=Exists(unsettled))
                .order_by("next_check_at")[: self.OVERDUE_CANDIDATES]
            )
            return queryset.filter(id__in=[r.id for r in due if case.overdue(r, now, bool(r.unsettled))])
        if self.value() == "failed-week":
            # The week's failed attempts through their own (partial) index, at most FAILED_CANDIDATES
            # cases: a list of them, never a scan of every attempt for each case on the page.
            failed = (
                StageAttempt.objects.filter(
                    outcome__in=StageAttempt.FAILED_OUTCOMES, started_at__gte=now - timedelta(days=7)
                )
                .order_by("-started_at")
                .values_list("request_id", flat=True)[: self.FAILED_CANDIDATES]
            )
            return queryset.filter(id__in=list(failed))
        return queryset


# The case page's context that carries the case's own words and rows (everything else is ours).
LENSED = (
    "req",
    "original",
    "submit_reason",
    "proposal",
    "panel",
    "progress",
    "lanes",
    "chain",
    "attempts",
    "approvals",
    "withdrawals",
    "timeline",
    "alarms",
    "evidence_faults",
)


@admin.register(DeletionRequest)
class DeletionRequestAdmin(CaseAdmin):
    list_display = (
        "shown_target",
        "state",
        "progress",
        "responsible",
        "deadline",
        "next_check",
        "created",
    )
    # Submitted today / in the past 7 days / this month / this year: index ranges, where a date
    # hierarchy would first scan every row for its distinct dates.
    list_filter = (SavedViews, DeadlineFilter, "status", ("created_at", date_filter("submitted")))
    # and an id or its first hex digits (CaseActionsMixin), and any decision's reason (below)
    search_fields = ("target", "=requested_by")
    ordering = ("-created_at",)
    list_per_page = 50  # 100 rows took the page past 50 ms in cell rendering alone (bench/README.md)
    actions = ("cancel_selected",)
    csv_fields = (
        "id",
        "target",
        "status",
        "requested_by",
        "reason",
        "assignee__username",
        "backup__username",
        "approver",
        "approved_at",
        "received_at",
        "due_at",
        "completed_at",
        "next_check_at",
        "retry_count",
        "created_at",
    )
    proof = staticmethod(deletion_proof.of)
    proof_lines = staticmethod(deletion_proof.lines)
    proof_contents = staticmethod(deletion_proof.receipts_fault)
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
            context=_proposal,
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
            name="settle",
            perm=services.RUN,
            title="Confirm the effect was not applied ({obj.target})",
            explanation="A worker submitted the current stage's operation and stopped before it learned the outcome. "
            "Confirm only after checking the target system: the next attempt then submits the same operation id "
            "again. Refused when the target system has a record of it.",
            form_class=SettleForm,
            details_template="admin/deletions/operation_in_question.html",
            context=lambda req: _operation_in_question(req, "The operation to check"),
            call=lambda actor, req, data: services.deletion_resume(
                actor=actor, request_id=req.id, reason=data["reason"], effect_not_applied=True
            ),
            success="Recorded: the operation was not applied; the next attempt submits it again.",
        ),
        CaseAction(
            name="record",
            perm=services.RUN,
            title="Record the effect applied by hand ({obj.target})",
            explanation="This target cannot enforce anything itself, so the current stage was handed to a person "
            "(the open question names it and its operation id). Apply it in the vendor's console, then record what "
            "you did: your record is the stage's only evidence, and the request resumes at once.",
            form_class=RecordEffectForm,
            details_template="admin/deletions/operation_in_question.html",
            context=lambda req: _operation_in_question(req, "The effect waiting for you"),
            call=lambda actor, req, data: services.deletion_record_effect(
                actor=actor,
                request_id=req.id,
                applied=data["outcome"] == "applied",
                evidence=data["evidence"],
                has_agents=agents_left(data["has_agents"]),
            ),
            success="Recorded; the request resumes with your record as the stage's evidence.",
        ),
        CaseAction(
            name="correct",
            perm=services.APPROVE,
            title="Correct the record of an effect applied by hand ({obj.target})",
            explanation="A record of an effect applied by hand is final: a correction is a new record, linked to "
            "the case's latest one and kept beside it, made by an approver who did not make that record. The case "
            "does not move: a run not yet made reads the correction; an open alarm stays open.",
            form_class=CorrectEffectForm,
            call=lambda actor, req, data: services.deletion_correct_effect(
                actor=actor,
                request_id=req.id,
                applied=data["outcome"] == "applied",
                evidence=data["evidence"],
                reason=data["reason"],
                has_agents=agents_left(data["has_agents"]),
            ),
            success="Correction recorded beside the record it corrects.",
        ),
        CaseAction(
            name="close-alarm",
            perm=services.APPROVE,
            title="Close an alarm of {obj.target}",
            explanation="An integrity fault, or an effect applied by hand after its approval was withdrawn, is "
            "closed only by a person, with what they found: the decision is on the case, and health stops "
            "counting it. Closing it approves or completes nothing (a case with an effect applied after "
            "withdrawal is cancelled, never completed).",
            form_class=CloseAlarmForm,
            call=lambda actor, req, data: services.deletion_close_alarm(
                actor=actor, request_id=req.id, kind=data["kind"], reason=data["reason"]
            ),
            success="Alarm closed; your decision is on the case.",
        ),
        CaseAction(
            name="revoke",
            perm=services.APPROVE,
            title="Revoke the approval of {obj.target}",
            explanation="Nothing more is applied under the current approval; the receiver refuses the next stage "
            "and the case goes back to the approvers.",
            form_class=RevokeForm,
            call=lambda actor, req, data: services.deletion_revoke_approval(
                actor=actor, request_id=req.id, reason=data["reason"], withdrawn=data["withdrawn"]
            ),
            success="Approval of {obj.target} revoked.",
        ),
        *custody_actions(view=services.VIEW, assign=services.ASSIGN, move=services.deletion_custody),
        CaseAction(
            name="extend-deadline",
            perm=services.EXTEND,
            title="Extend the deadline of {obj.target}",
            explanation="A request may be extended by up to two further months where it is complex or one of "
            "many (GDPR Art. 12(3)); say why: the requester must be told within the first month.",
            form_class=ExtendForm,
            call=lambda actor, req, data: services.deletion_extend_deadline(
                actor=actor, request_id=req.id, until=_until(req, data["until"]), reason=data["reason"]
            ),
            success="Deadline of {obj.target} extended.",
        ),
        CaseAction(
            name="reveal",
            perm=services.VIEW,
            title="Reveal the full target of this deletion",
            explanation="Support sees targets masked. Say why you need the full identifier: the reveal is "
            "recorded on the case (who, when, why) and shown once, here.",
            call=lambda actor, req, data: services.deletion_reveal(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
            success="The full target is {obj.target}; your reveal is recorded on the case.",
        ),
        CaseAction(
            name="run",
            perm=services.RUN,
            title="Run deletion of {obj.target} now",
            explanation="Enqueues a worker run. Refused while a worker holds the lease, a retry is not due, "
            "or a cancellation is recorded.",
            call=lambda actor, req, data: services.deletion_run_now(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
            success="Run of {obj.target} enqueued.",
        ),
    )

    # -- list -------------------------------------------------------------------------------

    def search_matches(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> QuerySet[Any]:
        """For a reader who sees targets, the target and the submitter (`search_fields`); for one who
        sees them masked, only what they see: the masked form exactly as shown (`core.access`), read
        through the target's trigram index; never the target itself. (The case id: `IndexedSearch`.)"""
        if lens(request).targets:
            return super().search_matches(request, queryset, search_term)
        pattern = access.mask_pattern(search_term)
        if pattern is None:
            return queryset.none()
        return queryset.alias(upper_target=Upper("target")).filter(upper_target__regex=pattern)

    def search_ids(self, request: HttpRequest, term: str, limit: int) -> list[Any]:
        """The cases whose decisions' words (the submitter's reason and ticket, a revoke's or a
        cancel's reason) hold the term: trigram-indexed, as the target is. Not for a reader who sees
        targets masked: the words may name the person (`core.access`)."""
        if len(term) < 3 or not lens(request).targets:
            return []
        said = DeletionDecision.objects.filter(reason__icontains=term).order_by().values_list("request_id", flat=True)
        return list(said[:limit])

    def get_queryset(self, request: HttpRequest) -> QuerySet[DeletionRequest]:
        # Correlated subqueries: computed for the rows on the page only (a join with GROUP BY
        # would read every request and every stage row before the page is cut).
        current = StageHistory.objects.filter(request=OuterRef("pk"), is_current=True).values("stage")[:1]
        done = (
            StageHistory.objects.filter(request=OuterRef("pk"), status="completed")
            .order_by()
            .values("request")
            .annotate(n=Count("*"))
            .values("n")
        )
        unsettled = StageHistory.objects.filter(UNSETTLED, request=OuterRef("pk"))
        return (
            super()
            .get_queryset(request)
            .select_related("assignee", "backup")
            .defer("inventory_json")  # read where a page shows it (the case page: one query more)
            .annotate(
                stages_done=Coalesce(Subquery(done), 0),
                current_stage=Subquery(current),
                unsettled=Exists(unsettled),
                communities=COMMUNITY_COUNT,
            )
        )

    @admin.display(description="status", ordering="status")
    def state(self, req: DeletionRequest) -> str:
        return format_html('<span class="status-badge status-{}">{}</span>', req.status, req.get_status_display())

    @staticmethod
    def told(req: DeletionRequest) -> Any:
        """The row's story (`case.story`), from the columns `get_queryset` annotates."""
        done = getattr(req, "stages_done", 0)
        return case.story(req, clock.now(), bool(getattr(req, "unsettled", False)), applied=done)

    @admin.display(description="progress")
    def progress(self, req: DeletionRequest) -> str:
        told = self.told(req)
        if told.closed:
            return told.status_words  # its outcome, never "5 of about 5"
        total = stage_count(cast(Any, req).communities)  # annotated by get_queryset (COMMUNITY_COUNT)
        done = getattr(req, "stages_done", 0)
        now = getattr(req, "current_stage", None)
        return f"{done} of about {total}" + (f" · {present.humanize(now)}" if now and req.status == "running" else "")

    @admin.display(description="responsible")
    def responsible(self, req: DeletionRequest) -> str:
        told = self.told(req)
        if told.person is None:
            return told.owner
        late = " (next check overdue)" if told.owner.endswith("(next check overdue)") else ""
        return format_html("{}{}<br><small>backup: {}</small>", told.person, late, told.backup or "none on the rota")

    @admin.display(description="target", ordering="target")
    def shown_target(self, req: DeletionRequest) -> str:
        return access.mask(req.target)  # replaced per request by what the user may see (below)

    def shown(self, request: HttpRequest, obj: Any) -> str:
        return f"{lens(request).target(obj.target)} ({obj.get_status_display().lower()})"

    def history_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> HttpResponse:
        """Django's history names the case by its target: only for those who see targets."""
        if not sees(request)[access.TARGETS]:
            raise PermissionDenied("the history names the full target: reveal it on the case page instead")
        return super().history_view(request, object_id, extra_context)

    def get_list_display(self, request: HttpRequest) -> Any:
        """The target as this user may see it (`core.access`): masked for support."""
        seen = lens(request)

        # Sorted by the full target only for those who see it: the order of masked rows would tell
        # what the mask hides (the characters between `ja` and `om`).
        @admin.display(description="target", ordering="target" if seen.targets else None)
        def shown_target(req: DeletionRequest) -> str:
            return seen.target(req.target)

        return tuple(shown_target if f == "shown_target" else f for f in self.list_display)

    @admin.display(description="deadline", ordering="due_at")
    def deadline(self, req: DeletionRequest) -> str:
        if req.status in (Status.COMPLETED, Status.CANCELLED):
            return "-"
        left = case.days_left(req, clock.now())
        return f"{left} d left" if left > 0 else f"passed, {-left} d late"

    def csv_queryset(self, queryset: QuerySet[DeletionRequest]) -> QuerySet[DeletionRequest]:
        """The approver and approval time of the latest approval, and the submitter's reason."""
        latest = DeletionApproval.objects.filter(request=OuterRef("pk")).order_by("-approved_at")
        reason = DeletionDecision.objects.filter(request=OuterRef("pk"), action="submit").values("reason")[:1]
        return queryset.annotate(
            approver=Subquery(latest.values("approved_by")[:1]),
            approved_at=Subquery(latest.values("approved_at")[:1]),
            reason=Subquery(reason),
        )

    def csv_shown(self, request: HttpRequest) -> Any:
        seen = lens(request)
        return lambda row: seen.data(row, target=row["target"])  # the target and the reason, as the page shows them

    @admin.display(description="next check", ordering="next_check_at")
    def next_check(self, req: DeletionRequest) -> str:
        due = self.told(req).next_check_at
        return "-" if due is None else when(due)

    @admin.display(description="submitted", ordering="created_at")
    def created(self, req: DeletionRequest) -> str:
        return when(req.created_at)

    @admin.action(description="Cancel the selected requests…", permissions=["cancel"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[DeletionRequest]) -> HttpResponse | None:
        """One reason, a confirmation page listing the requests, one service call each."""
        require(request, services.CANCEL)
        chosen = list(queryset.order_by("created_at"))
        if "confirm" in request.POST:
            form = BulkCancelForm(request.POST)
            if form.is_valid():
                done, refused = 0, []
                for req in chosen:
                    try:
                        services.deletion_cancel(
                            actor=actor(request), request_id=req.id, reason=form.cleaned_data["reason"]
                        )
                    except DomainError as exc:
                        refused.append(exc.message)
                    else:
                        done += 1
                        self.log_change(request, req, f"Cancelled (bulk): {form.cleaned_data['reason']}")
                if done:
                    messages.success(request, f"Cancellation recorded for {done} request{'s' if done != 1 else ''}.")
                for message in refused:
                    messages.error(request, message)
                return None
        else:
            form = BulkCancelForm()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Cancel {len(chosen)} deletion request{'s' if len(chosen) != 1 else ''}",
            "requests": chosen,
            "form": form,
            "action": "cancel_selected",
        }
        return TemplateResponse(request, "admin/deletions/bulk_cancel.html", context)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(services.CANCEL))

    # -- submit (the add view) -----------------------------------------------------------------

    def has_add_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(services.SUBMIT))

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Target and reason, then a confirmation page with the inventory it will propose."""
        require(request, services.SUBMIT)
        form = SubmitForm(request.POST or None)
        preview = None
        if request.method == "POST" and form.is_valid():
            target = form.cleaned_data["target"]
            inv = services.deletion_inventory(target)
            if request.POST.get("confirm") == inventory_digest(inv):
                try:
                    req = services.deletion_submit(
                        actor=actor(request), target=target, reason=form.cleaned_data["reason"]
                    )
                except DomainError as exc:
                    messages.error(request, exc.message)
                else:
                    self.log_addition(request, req, f"Submitted: {form.cleaned_data['reason']}")
                    messages.success(
                        request, f"Submitted the deletion of {target}; an approver (not you) must approve it."
                    )
                    return HttpResponseRedirect(reverse("admin:deletions_deletionrequest_change", args=[req.pk]))
            preview = proposal.build(target, inv, inventory_digest(inv))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Confirm the deletion request" if preview else "Submit a deletion request",
            "form": form,
            "proposal": preview,
        }
        return TemplateResponse(request, "admin/deletions/submit.html", context)

    # -- case page ---------------------------------------------------------------------------

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        req = self.case_object(DeletionRequest.objects.all(), object_id)
        if not self.has_view_permission(request, req):
            raise PermissionDenied
        now = clock.now()
        stages = [stage_snapshot(s) for s in req.stages.all()]
        checked = evidence.of_case(req, stages, now)  # before the alarms are read: a mismatch raises one
        stages = checked.shown(stages)  # what each receipt says, never the saved copy
        open_alarms = list(req.alarms.filter(resolved_at__isnull=True).order_by("created_at"))
        perms = request.user.get_all_permissions()
        unsettled = selectors.unsettled(req.id)
        effect_unknown = case.effect_unknown(req, now, unsettled)
        faults = selectors.faults(req.id)
        seen = sees(request)
        by_hand = _by_hand(req.target)
        told = reading.story_of(req, now, unsettled=unsettled)
        actions = case.actions(
            req,
            perms,
            now=now,
            submitter=services.submitted_by(req, actor(request)),
            effect_unknown=effect_unknown,
            by_hand=by_hand,
            open_faults=faults.open,
            applied_after=faults.applied_after,
            recorded=req.operator_records.exists(),
        )
        offers = [
            *actions,
            *_custody_offers(request, told, perms, case.cannot_act(req, actions, by_hand=by_hand)),
            case.deadline_offer(req, perms),
            Offer("reveal", "Reveal target", "" if not seen[access.TARGETS] else "you see the full target already"),
            self.proof_offer(request),
        ]
        events = list(LeaseEvent.objects.filter(request=req).order_by("at", "id"))
        attempt_rows = list(req.attempts.select_related("stage").order_by("started_at", "attempt"))
        decisions = list(req.decisions.order_by("created_at", "id"))
        shown_target = lens(request).target(req.target)
        said = _proposal(req)
        panel = case.panel(told, req, target=shown_target)
        if not seen[access.TARGETS]:
            said["proposal"] = dataclasses.replace(said["proposal"], target=shown_target)
        context = {
            **self.admin_site.each_context(request),
            **said,
            "sees": seen,
            "shown_target": shown_target,
            "opts": self.model._meta,
            "title": f"Deletion of {shown_target}",
            "original": req,
            "req": req,
            "now": now,
            "panel": dataclasses.replace(
                panel,
                open_question=lens(request).data(panel.open_question, target=req.target),  # a manual step names it
            ),
            "progress": "" if told.closed else case.progress(stages, req.inventory_json),
            "lanes": case.chain_picture(
                req.inventory_json, stages, request_status=req.status, effect_unknown=effect_unknown
            ),
            "chain": case.shown_chain(stages, request_status=req.status, effect_unknown=effect_unknown),
            "attempts": case.attempts_by_stage(attempt_rows),
            "approvals": case.with_revocations(
                list(req.approvals.order_by("approved_at")), [d for d in decisions if d.action == "revoke_approval"]
            ),
            "withdrawals": list(req.withdrawals.order_by("epoch")),
            "timeline": case.timeline(decisions, events, attempt_rows, by_hand=by_hand),
            "alarms": [  # each said once: an alarm that repeats the open question points to it
                (
                    a,
                    case.alarm_words(a.kind, by_hand=by_hand),
                    lens(request).data(case.alarm_said(a.message, req.open_question), target=req.target),
                )
                for a in open_alarms
            ],
            "inventory_changed": inventory_digest(req.inventory_json) != req.inventory_digest,
            "evidence_faults": [f.words(values=seen[access.EVIDENCE]) for f in checked.faults],
            "reapplied": case.reapplied_words(list(req.reapplications.values_list("answer", flat=True))),
            "faulted": {f.stage_id for f in checked.faults},
            "offers": self.offers(offers, req.pk),
            "live": req.status in ("approved", "running", "retry_wait"),
            "by_hand": by_hand,  # a person applies its effects: an attempt that handed one over says so
        }
        # What the page renders of the case, through the reader's lens once (`core.access.Lens`): any
        # free text with the person masked, the digest and target evidence withheld, as the table says.
        context.update(lens(request).data({k: context[k] for k in LENSED if k in context}, target=req.target))
        template = "admin/deletions/case_live.html" if request.htmx else "admin/deletions/case.html"  # type: ignore[attr-defined]
        return TemplateResponse(request, template, context)


@admin.register(TargetSystem)
class TargetSystemAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The receivers effects are sent to: a target whose name starts with a system's prefix is deleted
    there, believed only on evidence signed by one of its keys."""

    list_display = ("name", "prefix", "base_url", "registered_at", "unanswered_since")
    readonly_fields = ("registered_at", "unanswered_since", "unanswered_reason")

    # A key that saved evidence cites is kept (the database refuses otherwise): said on the refusal page.
    def save_model(self, request: HttpRequest, obj: TargetSystem, form: Any, change: bool) -> None:
        with refused_as_forbidden():
            super().save_model(request, obj, form, change)

    def delete_model(self, request: HttpRequest, obj: TargetSystem) -> None:
        with refused_as_forbidden():
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[TargetSystem]) -> None:
        with refused_as_forbidden():
            super().delete_queryset(request, queryset)
