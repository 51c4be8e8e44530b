"""`{% case_result_list cl %}`: Django's `{% result_list %}` with each row's cells written by the
list's `core.admin.CellsOnce` (the same markup, each column worked out once per page)."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.admin.templatetags import admin_list
from django.contrib.admin.templatetags.base import InclusionAdminNode

register = template.Library()


def case_result_list(cl: Any) -> dict[str, Any]:
    """What Django's `result_list` gives its template, the rows from `cl.case_rows()` (an editable
    list's rows, with their forms, from Django's)."""
    if cl.formset is not None:
        return admin_list.result_list(cl)
    headers = list(admin_list.result_headers(cl))
    return {
        "cl": cl,
        "result_hidden_fields": list(admin_list.result_hidden_fields(cl)),
        "result_headers": headers,
        "num_sorted_fields": sum(1 for h in headers if h["sortable"] and h["sorted"]),
        "results": [admin_list.ResultList(None, row) for row in cl.case_rows()],
    }


@register.tag(name="case_result_list")
def case_result_list_tag(parser: Any, token: Any) -> InclusionAdminNode:
    return InclusionAdminNode(
        parser, token, func=case_result_list, template_name="change_list_results.html", takes_context=False
    )
