"""Workspaces and retirements in the admin: request, hold, release, cancel, resume; case page.

Thin: each view parses a form, calls one service and reports.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from core import clock
from core import custody as rota_rules
from core.admin import (
    CaseAction,
    CaseActionsMixin,
    CaseAdmin,
    EstimatedCountPaginator,
    IndexedSearch,
    IndexedSorts,
    ReasonForm,
    custody_actions,
    date_filter,
    humanized_filter,
)
from core.errors import DomainError
from core.templatetags.present import when
from retirements import case, policy, selectors, services
from retirements import proof as retirement_proof
from retirements.contract import CLOSED_BY_A_PERSON
from retirements.models import RequestStatus, RetirementRequest, Workspace


class RequestRetirementForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000)
    confirmation = forms.CharField(label="Type the workspace slug to confirm", max_length=100)


class ProtectForm(forms.Form):
    legal_hold = forms.BooleanField(required=False, label="Legal hold")
    protected_reason = forms.CharField(required=False, max_length=200, label="Protected because (empty: not protected)")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000)


class CloseAlarmForm(ReasonForm):
    kind = forms.ChoiceField(
        choices=[(k, k.replace("_", " ")) for k in CLOSED_BY_A_PERSON],
        help_text="the alarm you looked into; the reason says what you found",
    )


class WorkspaceForm(forms.ModelForm):  # type: ignore[type-arg]
    """The same limits as the command line: a name of 1-200 printable characters. The legal hold
    and the protection change only through their own action (permission, reason, decision row)."""

    class Meta:
        model = Workspace
        fields = ("name",)

    def clean_name(self) -> str:
        try:
            return services.workspace_name(self.cleaned_data["name"])
        except DomainError as exc:
            raise forms.ValidationError(exc.message) from None


@admin.register(Workspace)
class WorkspaceAdmin(IndexedSearch, IndexedSorts, CaseActionsMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    form = WorkspaceForm
    change_list_template = "admin/indexed_change_list.html"  # its rows written by core.admin.CellsOnce
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    list_per_page = 50  # as the case lists: 100 rows were 35 ms of cell rendering alone
    show_facets = admin.ShowFacets.NEVER
    pk_path = "<int:pk>"
    case_actions = (
        CaseAction(
            name="request-retirement",
            perm=services.REQUEST,
            title="Request retirement of {obj.slug}",
            explanation="The workspace waits 30 days (1 day if never activated) with staff notices before it is "
            "deleted. Hold, release or cancel until the point of no return.",
            form_class=RequestRetirementForm,
            call=lambda actor, ws, data: services.retirement_request(
                actor=actor, slug=ws.slug, reason=data["reason"], confirmation=data["confirmation"]
            ),
            success="Retirement of {obj.slug} requested.",
            lands_on=lambda request: reverse("admin:retirements_retirementrequest_change", args=[request.pk]),
        ),
        CaseAction(
            name="protect",
            perm=services.PROTECT,
            title="Save the legal hold and protection of {obj.slug}",
            explanation="While a legal hold or a protection stands, a retirement of this workspace closes without "
            "purge at its point of no return. Each change is recorded with your name and reason.",
            form_class=ProtectForm,
            initial=lambda ws: {"legal_hold": ws.legal_hold, "protected_reason": ws.protected_reason},
            call=lambda actor, ws, data: services.workspace_protect(
                actor=actor,
                slug=ws.slug,
                legal_hold=data["legal_hold"],
                protected_reason=data["protected_reason"],
                reason=data["reason"],
            ),
            success="Protections of {obj.slug} saved.",
        ),
    )
    list_display = ("slug", "retire", "name", "state", "legal_hold", "is_disposable_test")
    list_filter = ("lifecycle", "legal_hold", "is_disposable_test")
    search_fields = ("slug", "name")
    readonly_fields = (
        "slug",
        "state",
        "activated",
        "created_at",
        "kind",
        "legal_hold_words",
        "protected_reason",
        "protections",
        "retire",
    )
    fields = (
        "slug",
        "name",
        "state",
        "activated",
        "legal_hold_words",
        "protected_reason",
        "protections",
        "kind",
        "retire",
    )

    @admin.display(description="activated")
    def activated(self, ws: Workspace) -> str:
        return when(ws.activated_at) if ws.activated_at else "never activated (a retirement waits 1 day)"

    @admin.display(description="legal hold")
    def legal_hold_words(self, ws: Workspace) -> str:
        return "yes: a retirement closes without purge while it stands" if ws.legal_hold else "no legal hold"

    @admin.display(description="kind")
    def kind(self, ws: Workspace) -> str:
        return "disposable test workspace (short wait, never in production)" if ws.is_disposable_test else "regular"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="lifecycle", ordering="lifecycle")
    def state(self, ws: Workspace) -> str:
        return ws.get_lifecycle_display()

    @admin.display(description="change protections")
    def protections(self, ws: Workspace) -> str:
        url = reverse("admin:retirements_workspace_protect", args=[ws.pk])
        return format_html('<a href="{}">set or lift the legal hold or protection</a>', url)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Workspace]:
        # The workspace's latest retirement, for the rows on the page only (correlated subqueries).
        latest = RetirementRequest.objects.filter(workspace=OuterRef("pk")).order_by("-requested_at", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                retirement_id=Subquery(latest.values("id")[:1]), retirement_status=Subquery(latest.values("status")[:1])
            )
        )

    @admin.display(description="retirement")
    def retire(self, ws: Workspace) -> str:
        """Its retirement, linked, when it has one; else the way to request one (a disabled workspace)."""
        rid = getattr(ws, "retirement_id", None)
        status = getattr(ws, "retirement_status", None)
        if rid is not None and (status in ("waiting", "held", "executing", "completed") or ws.lifecycle != "disabled"):
            url = reverse("admin:retirements_retirementrequest_change", args=[rid])
            return format_html('<a href="{}">retirement ({})</a>', url, RequestStatus(str(status)).label.lower())
        if ws.lifecycle != "disabled":
            return "-"
        url = reverse("admin:retirements_workspace_request_retirement", args=[ws.pk])
        return format_html('<a href="{}">request retirement</a>', url)

    def action_back(self, pk: Any) -> str:
        return reverse("admin:retirements_workspace_changelist")


class WaitingForMe(admin.SimpleListFilter):
    """The retirements the user owns or backs up (`?view=mine`, as on the deletions' list)."""

    title = "saved views"
    parameter_name = "view"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("mine", "waiting for me")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "mine":
            return queryset.filter(id__in=selectors.waiting_for(request.user).values("id"))
        return queryset


@admin.register(RetirementRequest)
class RetirementRequestAdmin(CaseAdmin):
    list_display = ("workspace", "state", "eligible", "next_check", "owner", "backup", "requested_by", "requested")
    # Each sort offered reads one index at any size (core.admin.OneIndexPerSort); by workspace or by a
    # person it would join and sort every row: find those with the search and the filters.
    sortable_by = ("state", "eligible", "next_check", "requested")
    csv_fields = (
        "id",
        "workspace__slug",
        "status",
        "requested_by__username",
        "owner__username",
        "backup__username",
        "reason",
        "eligible_at",
        "concluded_at",
        "next_wake_at",
        "requested_at",
    )
    list_select_related = ("workspace", "requested_by", "owner", "backup")
    list_filter = (
        WaitingForMe,
        "status",
        humanized_filter("eligibility_policy", "eligibility policy", policy.ELIGIBILITY_POLICIES),
        ("requested_at", date_filter("requested")),
    )
    search_fields = ("workspace__slug", "workspace__name")
    ordering = ("-requested_at",)
    list_per_page = 50  # 100 rows took the page past 50 ms in cell rendering alone (bench/README.md)
    proof = staticmethod(retirement_proof.of)
    proof_lines = staticmethod(retirement_proof.lines)
    case_actions = (
        *custody_actions(view=services.VIEW, assign=services.ASSIGN, move=services.retirement_custody),
        CaseAction(
            name="hold",
            perm=services.HOLD,
            title="Hold this retirement",
            explanation="Nothing is sent or deleted while held. Releasing extends eligibility by the time on hold.",
            success="Retirement held.",
            call=lambda actor, req, data: services.retirement_hold(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="release",
            perm=services.HOLD,
            title="Release the hold",
            explanation="Eligibility moves by the time spent on hold; pending notices are re-planned.",
            success="Hold released; eligibility extended.",
            call=lambda actor, req, data: services.retirement_release(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="cancel",
            perm=services.CANCEL,
            title="Cancel this retirement",
            explanation="The workspace returns to disabled and pending notices are suppressed.",
            success="Retirement cancelled.",
            call=lambda actor, req, data: services.retirement_cancel(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="retry-notices",
            perm=services.RETRY_NOTICES,
            title="Retry failed notices",
            explanation="Notices that failed all their attempts get a fresh budget and are sent at the next step.",
            success="Failed notices re-armed.",
            call=lambda actor, req, data: services.retirement_retry_notices(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="retry-purge",
            perm=services.RESUME,
            title="Retry the refused purge",
            explanation="The purge runs again; its boundary rechecks the requester's authority, the fencing token "
            "and the operation with the effect. Refused while the requester still lacks request_retirement.",
            success="Purge queued again.",
            call=lambda actor, req, data: services.retirement_retry_purge(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="close-refused",
            perm=services.CANCEL,
            title="Close without purge",
            explanation="Nothing was purged: the request closes without purge and the workspace returns to disabled.",
            success="Request closed without purge; the workspace is disabled again.",
            call=lambda actor, req, data: services.retirement_close_refused(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
        CaseAction(
            name="close-alarm",
            perm=services.RESUME,
            title="Close the alarm of a late purge executor",
            explanation="A late purge executor was rejected at the receiving boundary (nothing was purged twice); "
            "close its alarm once you have found why that worker paused past its lease, and say what you found. "
            "It is a decision on the case, which the alarm names; it changes nothing else. Alarms a move answers "
            "close with that move (a refused purge, a stalled watcher, a failed notice, a hold).",
            form_class=CloseAlarmForm,
            call=lambda actor, req, data: services.retirement_close_alarm(
                actor=actor, request_id=req.id, kind=data["kind"], reason=data["reason"]
            ),
            success="Alarm closed; your decision is on the case.",
        ),
        CaseAction(
            name="resume",
            perm=services.RESUME,
            title="Resume the watcher",
            explanation="A new watcher replaces the current one: only one that missed its wake-up by 15 minutes "
            "or settled without concluding the request. It never releases a hold, shortens eligibility or "
            "satisfies a notice.",
            success="Watcher replaced.",
            call=lambda actor, req, data: services.retirement_resume(
                actor=actor, request_id=req.id, reason=data["reason"]
            ),
        ),
    )

    @admin.display(description="status", ordering="status")
    def state(self, req: RetirementRequest) -> str:
        return format_html('<span class="status-badge status-{}">{}</span>', req.status, req.get_status_display())

    @admin.display(description="eligible", ordering="eligible_at")
    def eligible(self, req: RetirementRequest) -> str:
        return when(req.eligible_at)

    @admin.display(description="next check", ordering="next_wake_at")
    def next_check(self, req: RetirementRequest) -> str:
        due, _ = selectors.custody_times(req)  # the story's next check (`selectors.story`)
        return "-" if due is None else when(due)

    @admin.display(description="requested", ordering="requested_at")
    def requested(self, req: RetirementRequest) -> str:
        return when(req.requested_at)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        req = self.case_object(
            RetirementRequest.objects.select_related(
                "workspace", "requested_by", "owner", "backup", "watcher", "held_by"
            ),
            object_id,
        )
        if not self.has_view_permission(request, req):
            raise PermissionDenied
        now = clock.now()
        notices = list(req.notices.order_by("due_at", "id"))
        decisions = list(req.decisions.order_by("created_at", "id"))
        stalled = selectors.stall_reason(req, now)
        refused = selectors.purge_refusal(req)
        alarms = list(req.alarms.all())
        told = selectors.story(req, now)
        perms = request.user.get_all_permissions()
        offers = [
            *case.actions(
                req,
                perms,
                failed_notices=any(n.status == "failed" for n in notices),
                now=now,
                stalled=stalled,
                alive_until=selectors.alive_until(req),
                purge_refused=bool(refused),
                open_alarms=[a.kind for a in alarms if a.resolved_at is None],
            ),
            *case.custody_offers(
                req,
                perms,
                me=request.user.get_username(),
                on_rota=any(m.pk == request.user.pk for m in rota_rules.rota(services.ROTA, services.HOLD)),
                rota=services.ROTA,
            ),
            self.proof_offer(request),
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Retirement of {req.workspace.slug}",
            "original": req,
            "req": req,
            "panel": case.panel(told, req),
            "timeline": case.timeline(req, notices, decisions, now),
            "timeline_narrow": case.timeline(req, notices, decisions, now, width=360),
            "notices": notices,
            "decisions": decisions,
            "watchers": list(req.watchers.order_by("created_at")),
            "purge_job": getattr(req, "purge_job", None),
            "alarms": alarms,
            "offers": self.offers(offers, req.pk),
        }
        return TemplateResponse(request, "admin/retirements/case.html", context)
