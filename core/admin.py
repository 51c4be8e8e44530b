"""The admin base both workflows stand on: the case panel, a read-only case admin and
its action views (permission guard, confirmation page, one service call, a message).

Thin by rule: an action view parses a form, calls one service and reports; the
service re-checks the permission and everything else.
"""

from __future__ import annotations

import csv
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, time
from functools import cached_property
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import DateFieldListFilter, helpers
from django.contrib.admin import utils as admin_utils
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.templatetags import admin_list
from django.contrib.admin.utils import quote
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.core.exceptions import (
    EmptyResultSet,
    FieldDoesNotExist,
    ObjectDoesNotExist,
    PermissionDenied,
    ValidationError,
)
from django.core.paginator import Page, Paginator
from django.db import DataError, IntegrityError, connection, models, transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from core import access, clock, present, proofs
from core.authority import Actor
from core.errors import DomainError, shown
from core.present import Offer
from core.store import parse_id


class ReasonForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), max_length=2000)


class PersonForm(ReasonForm):
    person = forms.CharField(max_length=150, help_text="the username of someone on the case's rota")


def custody_actions(*, view: str, assign: str, move: Callable[..., Any]) -> tuple[CaseAction, ...]:
    """Take, assign and hand over, for a workflow whose service is
    `move(actor=, request_id=, how=, person=, reason=)` (the rules are `core.custody`'s)."""

    def call(how: str) -> Callable[[Actor, Any, dict[str, Any]], Any]:
        return lambda actor, obj, data: move(
            actor=actor, request_id=obj.pk, how=how, person=data.get("person", ""), reason=data["reason"]
        )

    return (
        CaseAction(
            name="take",
            perm=view,
            title="Take this case",
            explanation="You become the case's person (its backup stays). You must be on the rota of the people "
            "who answer it now.",
            call=call("take"),
            success="You hold this case now.",
        ),
        CaseAction(
            name="assign",
            perm=assign,
            title="Assign this case",
            explanation="Name the case's person: anyone on the rota of the people who answer it now.",
            form_class=PersonForm,
            call=call("assign"),
            success="Case assigned.",
        ),
        CaseAction(
            name="hand-over",
            perm=view,
            title="Hand over this case",
            explanation="The case's person or its backup gives it to someone else on its rota.",
            form_class=PersonForm,
            call=call("hand over"),
            success="Case handed over.",
        ),
    )


def require(request: HttpRequest, perm: str) -> None:
    """Every state change is checked on the server, whatever the page showed."""
    if not request.user.has_perm(perm):
        raise PermissionDenied(present.not_allowed(perm))


def lens(request: HttpRequest) -> access.Lens:
    """What of a case this user sees (`core.access.Lens`), read once per request."""
    if not hasattr(request, "_lens"):
        request._lens = access.Lens.of(request.user)  # type: ignore[attr-defined]
    return request._lens  # type: ignore[attr-defined, no-any-return]


def sees(request: HttpRequest) -> dict[str, bool]:
    """The same, part by part, for templates."""
    roles = lens(request).roles
    return {what: access.sees(roles, what) for what in access.WHAT}


def actor(request: HttpRequest) -> Actor:
    """The acting staff user; admin views only run for authenticated staff."""
    return Actor.of(request.user)


@dataclass(frozen=True)
class CaseAction:
    """One staff decision on a case page: its URL, permission, confirmation page and service call.

    `title`, `success` and `explanation` may name the case as `{obj}` fields;
    `call(actor, obj, cleaned_data)` calls exactly one service.
    """

    name: str
    perm: str
    title: str
    success: str
    call: Callable[[Actor, Any, dict[str, Any]], Any]
    form_class: type[forms.Form] = ReasonForm
    explanation: str = ""
    details_template: str = ""
    initial: Callable[[Any], dict[str, Any]] | None = None
    context: Callable[[Any], dict[str, Any]] | None = None
    lands_on: Callable[[Any], str] | None = None  # where a success goes, from the service's result


MIN_SEARCH = 3  # characters: a shorter term matches most of a big table, read row by row


def too_short(request: HttpRequest, term: str) -> bool:
    """A search term of 1 or 2 characters matches most of a big table, read row by row: it finds
    nothing and the list says why (an id, 4 characters or more, is always found)."""
    if 0 < len(term.strip()) < MIN_SEARCH:
        messages.info(
            request,
            f"Type at least {MIN_SEARCH} characters to search ({shown(term.strip())} is too short), or paste an id.",
        )
        return True
    return False


@contextmanager
def planned_for_its_values() -> Iterator[None]:
    """The reads inside are planned for their own parameters, never with a prepared statement's
    generic plan (one short transaction: `SET LOCAL` ends with it)."""
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        yield


class IndexedSearch:
    """A list's search (every case list's and the workspaces'): each way a term finds rows is read
    through its own index, planned for the term, and capped."""

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """An id pasted into the search box finds its row, and so does its first 4 to 31 hex digits
        (a range on the primary key); anything else searches the usual fields, and `search_ids`
        adds rows found elsewhere. Each way is read on its own, through its own index, and
        the page is the union of their ids (at most SEARCH_LIMIT each, and the list says when a
        way found more): an OR of them in one query would read the whole table. A term under 3
        characters finds nothing (`too_short`).

        The ways are planned for the term typed (`planned_for_its_values`): a query a connection
        has run five times is prepared, and a prepared statement's generic plan, made without the
        term, reads a LIKE or an id range by walking the list's ordering index or the whole table
        (0.3 ms became 800 ms at a million requests). None is read in the list's order."""
        term = search_term.strip()
        if not term:
            return queryset, False
        if too_short(request, term):
            return queryset.none(), False
        uuid_keys = isinstance(queryset.model._meta.pk, models.UUIDField)
        if uuid_keys:
            try:
                return queryset.filter(pk=parse_id(term.lower())), False
            except DomainError:
                pass
        matches = self.search_matches(request, queryset, search_term)
        ways: list[list[Any]] = []  # each read one past the limit, to know when it found more
        digits = term.lower().replace("-", "")
        with planned_for_its_values():
            if uuid_keys and 4 <= len(digits) < 32 and all(c in "0123456789abcdef" for c in digits):
                low, high = uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))
                in_range = queryset.filter(pk__gte=low, pk__lte=high).order_by("pk")
                ways.append(list(in_range.values_list("pk", flat=True)[: self.SEARCH_LIMIT + 1]))
            ways.append(list(self.search_ids(request, term, self.SEARCH_LIMIT + 1)))
            ways.append(list(matches.order_by().values_list("pk", flat=True)[: self.SEARCH_LIMIT + 1]))
        if any(len(found) > self.SEARCH_LIMIT for found in ways):
            messages.info(
                request,
                f"Over {self.SEARCH_LIMIT:,} {self.model._meta.verbose_name_plural} match {shown(term)}: the "  # type: ignore[attr-defined]
                "list shows only some of them. Type more of it to narrow the search.",
            )
        return queryset.filter(pk__any_of={pk for found in ways for pk in found[: self.SEARCH_LIMIT]}), False

    SEARCH_LIMIT = 250

    def search_matches(self, request: HttpRequest, queryset: QuerySet[Any], search_term: str) -> QuerySet[Any]:
        """The rows the search fields find (Django's search over `search_fields`); a list whose
        readers may not search some of them says so here (`core.access`)."""
        matches, _ = super().get_search_results(request, queryset, search_term)  # type: ignore[misc]
        return matches  # type: ignore[no-any-return]

    def search_ids(self, request: HttpRequest, term: str, limit: int) -> list[Any]:
        """Up to `limit` ids of rows a search term finds outside the search fields (none by default)."""
        return []


class OneIndexPerSort(ChangeList):
    """A list sorted by one column reads one index, whichever way it is sorted: the list's default
    ordering follows as the tiebreak, turned the same way as the column (sorted by deadline,
    newest first breaks ties; by deadline descending, oldest first). Django's own tiebreak keeps
    the default ordering's direction, so a descending sort needed a second index or read the
    whole table. A sort by several columns is left as Django orders it."""

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        chosen = [p for p in str(self.params.get(ORDER_VAR, "")).split(".") if p]
        if any(not self._offered(p) for p in chosen):  # a column the list does not offer to sort by (a typed URL)
            self.params = {k: v for k, v in self.params.items() if k != ORDER_VAR}
            chosen = []
        ordering = super().get_ordering(request, queryset)
        if len(chosen) != 1 or not ordering or not isinstance(ordering[0], str):
            return ordering
        primary = ordering[0]
        name = primary.lstrip("-")
        # Django's own private steps (5.2): the admin's ordering, made total with the primary key.
        default = list(self.model_admin.get_ordering(request) or self._get_default_ordering())  # type: ignore[attr-defined]
        default = self._get_deterministic_ordering(default)  # type: ignore[attr-defined]

        # Turned when the column goes the other way than the default ordering takes it (a column
        # the default does not name counts as ascending there).
        flip = primary.startswith("-") != (f"-{name}" in default)

        def turned(field: str) -> str:
            if not flip:
                return field
            return field[1:] if field.startswith("-") else f"-{field}"

        return [primary, *(turned(f) for f in default if isinstance(f, str) and f.lstrip("-") != name)]

    def _offered(self, param: str) -> bool:
        """`?o=` names a column by its place in the list: one the list offers to sort by."""
        try:
            column = self.list_display[int(param.lstrip("-"))]
        except (ValueError, IndexError):
            return False
        return self.sortable_by is None or column in self.sortable_by


class RowLinksOnce(OneIndexPerSort):
    """Each row's link to its page, with the list's filters (so the page leads back to the same
    list), made once per page and filled in per row. Django reverses every row's URL and then
    resolves it again to add the filters: a fifth of a filtered 50-row page's time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        marker = "0" * 32  # a pk that quote() leaves as it is
        link = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
            args=(marker,),
            current_app=self.model_admin.admin_site.name,
        )
        head, _, tail = link.partition(marker)
        # What Django's add_preserved_filters gives a change page's URL: `?_changelist_filters=...`.
        self._row_link = (head, tail + (f"?{self.preserved_filters}" if self.preserved_filters else ""))
        self.preserved_filters = ""  # added above: the template tag need not resolve each row's URL

    def url_for_result(self, result: Any) -> str:
        head, tail = self._row_link
        return f"{head}{quote(getattr(result, self.pk_attname))}{tail}"


class CellsOnce(RowLinksOnce):
    """Each column's way to its cells worked out once per page, then each row's cells filled in,
    in the markup Django's `items_for_result` writes (`case_rows`). Django looks every column up
    again for each cell: a computed column is first looked for among the model's fields (a
    `FieldDoesNotExist` raised and caught), and each cell goes through `format_html` twice. That
    machinery was most of a 50-row page's rendering."""

    def case_rows(self) -> Iterator[list[SafeString]]:
        """The page's rows, each a list of its cells (a list without `list_editable`)."""
        cells = []
        first = True  # Django links the first column only until a link is written
        for index, name in enumerate(self.list_display):
            linked = self.list_display_links is not None and (
                (first and not self.list_display_links) or name in self.list_display_links
            )
            cells.append(self._cell(index, name, linked, "th" if linked and first else "td"))
            first = first and not linked
        for result in self.result_list:
            yield [cell(result) for cell in cells]

    def _cell(self, index: int, name: Any, linked: bool, tag: str) -> Callable[[Any], SafeString]:
        """One column's cell, as `items_for_result` writes it for `name`."""
        model_admin = self.model_admin
        empty = model_admin.get_empty_value_display()
        field_class = admin_list._coerce_field_name(name, index)  # type: ignore[attr-defined]
        try:
            field: Any = admin_utils._get_non_gfk_field(self.lookup_opts, name)  # type: ignore[attr-defined]
        except (FieldDoesNotExist, admin_utils.FieldIsAForeignKeyColumnName):
            field = None
        getter: Callable[[Any], Any] | None = None
        if field is None:
            if callable(name):
                getter = name
            elif hasattr(model_admin, name) and name != "__str__":
                getter = getattr(model_admin, name)

        def shown(result: Any) -> tuple[Any, list[str]]:
            classes = [f"field-{field_class}"]
            try:
                if field is not None:
                    attr: Any = None
                    value = getattr(result, name)
                elif getter is not None:
                    attr, value = getter, getter(result)
                else:  # a model attribute or property: Django's own lookup, rare in these lists
                    _, attr, value = admin_utils.lookup_field(name, result, model_admin)
            except ObjectDoesNotExist:  # a related row that is gone, as Django shows it
                return empty, classes
            if field is not None and not field.auto_created:
                if isinstance(field.remote_field, models.ManyToOneRel):
                    related = getattr(result, field.name)
                    content = empty if related is None else related
                else:
                    content = admin_utils.display_for_field(value, field, empty, avoid_link=linked)
                if isinstance(field, (models.DateField, models.TimeField, models.ForeignKey)):
                    classes.append("nowrap")
                return content, classes
            if isinstance(value, str) and value.strip() == "":
                value = ""
            if name == "action_checkbox":
                classes = ["action-checkbox"]
            boolean = getattr(attr, "boolean", False)
            if isinstance(attr, property) and hasattr(attr, "fget"):
                boolean = getattr(attr.fget, "boolean", False)
            content = admin_utils.display_for_value(value, getattr(attr, "empty_value_display", empty), boolean)
            if isinstance(value, (date, time)):
                classes.append("nowrap")
            return content, classes

        def cell(result: Any) -> SafeString:
            content, classes = shown(result)
            text: str = conditional_escape(content)
            if linked:
                url = self.url_for_result(result)  # the list's filters in it already (RowLinksOnce)
                opener = ""
                if self.is_popup:
                    key = result.serializable_value(self.to_field or self.pk_attname)
                    opener = format_html(' data-popup-opener="{}"', key)
                text = f'<a href="{conditional_escape(url)}"{opener}>{text}</a>'
            return mark_safe(f'<{tag} class="{" ".join(classes)}">{text}</{tag}>')

        return cell


class IndexedSorts:
    """A model admin whose sorts each read one index (`OneIndexPerSort`); `sortable_by` names the
    columns that have one (index on the column, then the default ordering). Its rows' links are
    made once per page (`RowLinksOnce`), and each column's way to its cells (`CellsOnce`), which
    its change list template writes (`admin/indexed_change_list.html`, or one extending it)."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return CellsOnce


class ReadOnly(admin.ModelAdmin):  # type: ignore[type-arg]
    """A record the product writes and staff only read."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CaseActionsMixin:
    """URLs and views for a model admin's `case_actions`."""

    case_actions: tuple[CaseAction, ...] = ()
    pk_path = "<uuid:pk>"
    model: Any
    admin_site: admin.AdminSite

    def url_name(self, name: str) -> str:
        return f"{self.model._meta.app_label}_{self.model._meta.model_name}_{name.replace('-', '_')}"

    def action_checkbox(self, obj: Any) -> SafeString:
        """The row's selection box, the same markup as Django's, written directly: Django renders it
        through the widget templates, a fifth of a 50-row list page's time."""
        label = format_html(gettext("Select this object for an action - {}"), str(obj))
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            label,
        )

    def offers(self, offers: list[Offer], pk: Any) -> dict[str, Any]:
        """For `admin/case_actions.html`: the actions that can act now, with their URLs, first and
        prominent; then the others folded, each reason said once for the actions it stops."""
        later = present.unavailable(offers)
        return {
            "now": [
                {"offer": o, "url": reverse(f"admin:{self.url_name(o.name)}", args=[pk])} for o in offers if o.enabled
            ],
            "later": [{"why": why, "offers": stopped, "id": f"why-{stopped[0].name}"} for why, stopped in later],
            "later_count": sum(len(stopped) for _, stopped in later),
        }

    def shown(self, request: HttpRequest, obj: Any) -> str:
        """The case as this user may see it named (a workflow masks what its role may not see)."""
        return str(obj)

    def action_back(self, pk: Any) -> str:
        """Where an action returns: the case page."""
        return reverse(f"admin:{self.url_name('change')}", args=[pk])

    def action_object(self, pk: Any) -> Any:
        return get_object_or_404(self.model, pk=pk)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path(f"{self.pk_path}/{a.name}/", view(self._action_view(a)), name=self.url_name(a.name))
            for a in self.case_actions
        ] + super().get_urls()  # type: ignore[misc]

    def _action_view(self, action: CaseAction) -> Callable[..., HttpResponse]:
        def view(request: HttpRequest, pk: Any) -> HttpResponse:
            obj = self.action_object(pk)
            return action_view(
                request,
                self,  # type: ignore[arg-type]
                perm=action.perm,
                obj=obj,
                back=self.action_back(pk),
                title=action.title.format(obj=obj),
                explanation=action.explanation.format(obj=obj),
                details_template=action.details_template,
                form_class=action.form_class,
                initial=action.initial(obj) if action.initial else None,
                extra=action.context(obj) if action.context else None,
                call=lambda form: action.call(actor(request), obj, form.cleaned_data),
                success=action.success.format(obj=obj),
                lands_on=action.lands_on,
            )

        view.__name__ = f"{action.name}_view"
        return view


class EstimatedCountPaginator(Paginator):
    """Django's paginator for lists of big tables, with three changes that keep every page bounded:

    - the count: when the planner expects 10,000 rows or more for the list's query (its
      filters included), its estimate is used instead of reading them all, and the list says
      "about N"; smaller lists are counted exactly;
    - a deep page first finds its rows' ids through the ordering's index (ids only: no joins,
      no per-row subqueries for the rows skipped), then loads those rows whole;
    - pages stop at DEEPEST rows in: skipping rows costs their reading, even through an index
      (page 5,001 of a million deletions is 38 ms, bench/README.md). The list says where the
      offered pages stop and how to reach the rest (sort the other way, filter, search).
    """

    ESTIMATE_FROM = 10_000
    DEEP = 1_000  # rows skipped before a page is found by its ids
    DEEPEST = 250_000  # rows skipped by the last page offered
    estimated = False

    @cached_property
    def num_pages(self) -> int:
        every = Paginator.num_pages.func(self)  # type: ignore[attr-defined]  # Django's count, uncached
        return min(every, self.DEEPEST // self.per_page + 1)

    @property
    def cut_short(self) -> bool:
        """Whether pages past the last one offered hold rows."""
        return self.num_pages * self.per_page < self.count

    @cached_property
    def count(self) -> int:
        rows = getattr(self.object_list, "values_list", None)
        if rows is not None:
            try:
                sql, params = rows("pk").query.sql_with_params()
            except EmptyResultSet:  # a filter no row can match (an id past the column's range)
                return 0
            with connection.cursor() as cur:
                cur.execute("EXPLAIN (FORMAT JSON) " + sql, params)
                plan = cur.fetchone()[0]
            expected = int((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]["Plan Rows"])
            if expected >= self.ESTIMATE_FROM:
                self.estimated = True
                return expected
        return super().count

    def page(self, number: Any) -> Page:
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        if bottom < self.DEEP or not hasattr(self.object_list, "values_list"):
            return super().page(number)
        rows: Any = self.object_list
        ids = list(rows.values_list("pk", flat=True)[bottom : bottom + self.per_page])
        return Page(list(rows.filter(pk__in=ids)), number, self)


class CaseAdmin(IndexedSearch, IndexedSorts, CaseActionsMixin, ReadOnly):
    """A read-only list and case page: every change goes through a `CaseAction` and its service.
    The list exports what its filters and search select as CSV (`csv_fields`)."""

    change_list_template = "admin/case_change_list.html"
    csv_fields: tuple[str, ...] = ("id",)
    show_full_result_count = False  # a filtered list says "N results", without a second count of the whole table
    paginator = EstimatedCountPaginator
    show_facets = admin.ShowFacets.NEVER  # per-option counts would read the whole table at every click

    # The case's signed proof (`core.proofs`): `proof(pk, now)` seals it, `proof_lines` words it.
    proof: Callable[[Any, datetime], dict[str, Any]] | None = None
    proof_lines: Callable[[dict[str, Any]], list[str]] | None = None
    proof_contents: Callable[[dict[str, Any]], str] | None = None  # what its record carries, checked (`core.proofs`)

    def get_urls(self) -> list[URLPattern]:
        export = path("export.csv", self.admin_site.admin_view(self.export_csv), name=self.url_name("export"))
        extra = [export]
        if self.proof is not None:
            extra.append(
                path(f"{self.pk_path}/proof/", self.admin_site.admin_view(self.proof_view), name=self.url_name("proof"))
            )
        return [*extra, *super().get_urls()]

    def proof_offer(self, request: HttpRequest) -> Offer:
        why = "" if sees(request)[access.PROOF] else "only approvers, auditors and superusers read a case's proof"
        return Offer("proof", "Proof", why)

    def proof_view(self, request: HttpRequest, pk: Any) -> HttpResponse:
        """The printable proof, or (`?format=json`) the signed JSON `deletion_record --verify` checks.
        Only for those whose role may read proofs (`core.access`)."""
        if not self.has_view_permission(request) or not sees(request)[access.PROOF]:
            raise PermissionDenied("only approvers, auditors and superusers may read a case's proof")
        obj = self.action_object(pk)
        try:
            proof = self.proof(obj.pk, clock.now())  # type: ignore[misc]
        except DomainError as exc:  # no proof is issued over records that contradict themselves
            return refusal_page(request, exc, status=409, title="No proof is issued")
        if request.GET.get("format") == "json":
            response = HttpResponse(proofs.dumps(proof), content_type="application/json")
            response["Content-Disposition"] = f'attachment; filename="proof-{obj.pk}.json"'
            return response
        lines = self.proof_lines(proof)  # type: ignore[misc]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": lines[0],
            "original": obj,
            "rows": [(line[:10].strip(), line[10:]) for line in lines[1:]],
            "proof": proof,
            "intact": proofs.verify(proof, self.proof_contents) == "",
            "back": self.action_back(obj.pk),
        }
        return TemplateResponse(request, "admin/proof.html", context)

    def export_csv(self, request: HttpRequest) -> HttpResponse:
        """The changelist's own filters and search, every matching row (not just one page)."""
        if not self.has_view_permission(request):
            raise PermissionDenied(
                present.not_allowed(f"{self.model._meta.app_label}.view_{self.model._meta.model_name}")
            )
        try:
            queryset = self.get_changelist_instance(request).get_queryset(request)
        except (IncorrectLookupParameters, ValidationError, ValueError) as exc:
            raise Http404(f"the list's filter is not valid: {exc}") from None
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self.model._meta.model_name}s.csv"'
        writer = csv.writer(response)
        writer.writerow(self.csv_fields)
        shown = self.csv_shown(request)
        for row in self.csv_queryset(queryset).values(*self.csv_fields).iterator(chunk_size=2000):
            seen = shown(row)
            writer.writerow(_csv_safe(seen[name]) for name in self.csv_fields)
        return response

    def csv_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The exported rows, annotated with whatever `csv_fields` names beyond the model's columns."""
        return queryset

    def csv_shown(self, request: HttpRequest) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """How each exported row (`{field: value}`) shows to this user (the access rules may mask some)."""
        return lambda row: row

    def case_object(self, queryset: QuerySet[Any], object_id: str) -> Any:
        """The case a URL names; a malformed or unknown id is a 404 that says so, never a 500."""
        try:
            pk = parse_id(object_id)
        except DomainError as exc:
            raise Http404(exc.message) from None
        obj = queryset.filter(pk=pk).first()
        if obj is None:
            raise Http404(f"no {self.model._meta.verbose_name} with id {pk}")
        return obj


def _csv_safe(value: Any) -> str:
    """Times to the second in ISO form; a cell a spreadsheet would run as a formula is quoted."""
    text = value.isoformat(timespec="seconds") if isinstance(value, datetime) else ("" if value is None else str(value))
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def refusal_page(request: HttpRequest, exception: Exception | None, *, status: int, title: str) -> HttpResponse:
    """403 and 404 inside the admin's own look, naming what was missing."""
    message = str(exception.args[0]) if exception is not None and exception.args else ""
    context = {**admin.site.each_context(request), "title": title, "message": message}
    return TemplateResponse(request, "admin/refusal.html", context, status=status)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return refusal_page(request, exception, status=403, title="You may not do this")


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return refusal_page(request, exception, status=404, title="Not found")


@contextmanager
def refused_as_forbidden() -> Iterator[None]:
    """A change the database refuses (a record that guards itself) is the refusal page with the
    database's one line, never a 500; nothing of it is kept."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as exc:
        raise PermissionDenied(str(exc).splitlines()[0]) from None


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
    initial: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
    lands_on: Callable[[Any], str] | None = None,
) -> HttpResponse:
    """GET shows the confirmation form; POST validates it and calls the service. A refusal shows
    the same form again, with what was typed and the refusal's reason (nothing written); a
    success goes back to the case (or where `lands_on` says, from the service's result)."""
    require(request, perm)
    if request.method == "POST":
        form = form_class(request.POST)
        if form.is_valid():
            reason = str(form.cleaned_data.get("reason", "") or "")
            try:
                result = call(form)
            except DomainError as exc:
                messages.error(request, exc.message)
                form.add_error(None, exc.message)
            else:
                messages.success(request, success)
                model_admin.log_change(request, obj, f"{title}" + (f": {reason}" if reason else ""))
                return HttpResponseRedirect(lands_on(result) if lands_on else back)
    else:
        form = form_class(initial=initial)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        "object": model_admin.shown(request, obj) if isinstance(model_admin, CaseActionsMixin) else obj,
        "req": obj,
        "form": form,
        "back": back,
        "explanation": explanation,
        "details_template": details_template,
        **(extra or {}),
    }
    return TemplateResponse(request, "admin/action_confirm.html", context)


class BadFilterMiddleware:
    """A filter or search value the database cannot take (a NUL byte, a broken regular
    expression, a year past 9999, a malformed date) is a 400 in the admin's look that says
    so, and an id it cannot take (a NUL byte in a django-q2 task id) a 404; never a 500.
    Only for admin GETs: a POST's error is a bug and stays loud. Each is logged."""

    ERRORS = (DataError, ValueError, OverflowError, ValidationError, IncorrectLookupParameters)

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: Any) -> HttpResponse | None:
        """A list's bulk action POSTed with selected ids that are not ids of its rows (any admin
        list: ours, django-q2's, the users'): a 400 before the action runs."""
        model_admin = getattr(view, "model_admin", None)
        if request.method != "POST" or model_admin is None or "_selected_action" not in request.POST:
            return None
        key = model_admin.model._meta.pk
        for raw in request.POST.getlist("_selected_action"):
            try:
                key.to_python(raw)
                if "\x00" in raw:
                    raise ValidationError("a NUL byte")
            except ValidationError:
                logging.getLogger("django.request").warning("bad selection on %s", request.path[:200])
                return refusal_page(
                    request,
                    ValueError(f"the selected rows are not valid: {shown(raw)} is not an id of this list"),
                    status=400,
                    title="Not valid",
                )
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if request.method != "GET" or not request.path.startswith("/admin/"):
            return None
        if not isinstance(exception, self.ERRORS):
            return None
        reason = str(exception).splitlines()[0][:200] if str(exception) else type(exception).__name__
        if not request.GET:  # nothing but the address: its id is what the database could not take
            logging.getLogger("django.request").warning("bad id in %s: %s", request.path[:200], reason)
            return refusal_page(
                request, ValueError(f"the id in this address is not valid: {reason}"), status=404, title="Not found"
            )
        logging.getLogger("django.request").warning(
            "bad filter value on %s: %s", request.path, reason, exc_info=exception
        )  # kept with its traceback: a real bug on such a page still shows in the logs
        return refusal_page(
            request, ValueError(f"a filter or search value is not valid: {reason}"), status=400, title="Not valid"
        )


def date_filter(title: str) -> type[DateFieldListFilter]:
    """Django's date ranges (today, past 7 days, this month, this year) under a title that says
    what the date is; index ranges, where a date hierarchy first reads every distinct date."""

    class Filter(DateFieldListFilter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.title = title

    return Filter


def humanized_filter(field: str, title: str, values: tuple[str, ...]) -> type[admin.SimpleListFilter]:
    """A list filter over a plain code column whose choices read as words (`standard_30_days` →
    "standard 30 days"). The values come from the code, not from a DISTINCT over the table."""

    class Filter(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return [(v, present.humanize(v)) for v in values]

        def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
            return queryset.filter(**{field: self.value()}) if self.value() else queryset

    Filter.title = title
    return Filter
