"""django-q2's admin, made truthful for staff: tasks link to their case, a failed stage
is listed under failed tasks (`deletions.tasks.StageFailed`), and the schedules the
product relies on cannot be deleted here (they are also recreated at start)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django_q import admin as q_admin
from django_q.models import Failure, OrmQ, Schedule, Success

from core import present
from core.admin import ReadOnly
from core.errors import DomainError
from core.store import parse_id
from core.templatetags.present import when
from ops.models import RecordsHold, RetentionRun, Tombstone
from ops.schedules import SCHEDULES

CASE_URLS = {
    "deletions.tasks.run_deletion": "admin:deletions_deletionrequest_change",
    "retirements.tasks.watcher_step": "admin:retirements_retirementrequest_change",
}


def case_link(func: Any, args: Any) -> str:
    """The case a task worked on, from its first argument (an id)."""
    url_name = CASE_URLS.get(str(func))
    args = args or ()
    if url_name is None or not args:
        return "-"
    try:
        pk = parse_id(str(args[0]))
    except DomainError:
        return "-"
    if url_name.startswith("admin:retirements"):
        return format_html("watcher {}", str(pk)[:8])
    return format_html('<a href="{}">case {}</a>', reverse(url_name, args=[pk]), str(pk)[:8])


for model in (Success, Failure, Schedule):
    admin.site.unregister(model)
if admin.site.is_registered(OrmQ):  # only with the ORM broker
    admin.site.unregister(OrmQ)

    @admin.register(OrmQ)
    class QueuedAdmin(q_admin.QueueAdmin):
        list_display = ("id", "func", "case", "lock")  # the task's name and id are in its page

        @admin.display(description="case")
        def case(self, queued: Any) -> str:
            task = queued.task
            return case_link(task.get("func"), task.get("args"))


class CaseColumn:
    """A task list's "case" column."""

    @admin.display(description="case")
    def case(self, task: Any) -> str:
        return case_link(task.func, task.args)


class TimeColumns:
    """A task's start and its duration as every product page shows them (to the second, no microseconds)."""

    @admin.display(description="started", ordering="started")
    def started_at(self, task: Any) -> str:
        return when(task.started)

    @admin.display(description="took")
    def took(self, task: Any) -> str:
        return present.duration(task.stopped - task.started) if task.stopped and task.started else "-"


@admin.register(Success)
class SuccessAdmin(CaseColumn, TimeColumns, q_admin.TaskAdmin):
    list_display = ("func", "case", "started_at", "took")
    change_list_template = "admin/django_q/success_list.html"  # says where succeeded stage runs are recorded


@admin.register(Failure)
class FailureAdmin(CaseColumn, TimeColumns, q_admin.FailAdmin):
    list_display = ("func", "case", "started_at", "took", "result")


@admin.register(Schedule)
class ScheduleAdmin(q_admin.ScheduleAdmin):
    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        """django-q2's split date/time inputs carry no labels of their own: name them for screen readers."""
        form = super().get_form(request, obj, change=change, **kwargs)
        widget = form.base_fields["next_run"].widget if "next_run" in form.base_fields else None
        for part, words in zip(getattr(widget, "widgets", []), ("next run: date", "next run: time"), strict=False):
            part.attrs["aria-label"] = words
        return form

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and obj.name in SCHEDULES:
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # a bulk delete would take the product's schedules too
        return actions


@admin.register(RetentionRun)
class RetentionRunAdmin(ReadOnly):
    list_display = ("id", "started", "dry_run", "stopped_early", "counts")
    ordering = ("-started_at",)

    @admin.display(description="started", ordering="started_at")
    def started(self, run: RetentionRun) -> str:
        return when(run.started_at)


@admin.register(Tombstone)
class TombstoneAdmin(ReadOnly):
    list_display = ("case_kind", "case_id", "outcome", "closed", "proof_digest")
    list_filter = ("case_kind", "outcome")
    ordering = ("-made_at",)

    @admin.display(description="closed", ordering="closed_at")
    def closed(self, stone: Tombstone) -> str:
        return when(stone.closed_at)


@admin.register(RecordsHold)
class RecordsHoldAdmin(ReadOnly):
    list_display = ("case_kind", "case_id", "reason", "placed_by", "placed", "released_at")
    ordering = ("-placed_at",)

    @admin.display(description="placed", ordering="placed_at")
    def placed(self, hold: RecordsHold) -> str:
        return when(hold.placed_at)
