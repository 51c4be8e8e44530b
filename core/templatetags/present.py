"""Template filters for `core.present`: `{{ t|when }}` renders a relative time with the
absolute time (to the second) on hover and for screen readers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import access, clock, present

register = template.Library()


@register.filter
def when(at: datetime | None) -> SafeString | str:
    if at is None:
        return "-"
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        at.isoformat(timespec="seconds"),  # no microseconds, even for machines
        present.absolute(at),
        present.relative(at, clock.now()),
    )


@register.filter
def at_second(at: datetime | None) -> str:
    return present.absolute(at)


@register.filter
def duration(value: timedelta | float | None) -> str:
    return present.duration(value)


@register.filter
def worker(owner: str | None) -> str:
    return present.worker(owner)


@register.filter
def human(code: str | None) -> str:
    return present.humanize(code)


@register.filter
def labelled(value: Any) -> list[tuple[str, str]]:
    return present.labelled(value)


@register.filter
def get_item(mapping: dict[Any, Any], key: Any) -> Any:
    return mapping.get(key) if mapping else None


@register.simple_tag(takes_context=True)
def shown_words(context: Any, text: str, target: str) -> str:
    """A case's saved words (its open question) as this reader may see them: `{% shown_words
    r.open_question r.target %}` masks the target unless the page's `sees` says they see targets."""
    seen = context.get("sees")
    return text if seen and seen.get(access.TARGETS) else access.mask_in(text, target)


@register.filter
def shown_target(target: str, seen: dict[str, bool] | None) -> str:
    """A target as this user may see it (`core.access`): masked unless they see targets."""
    return target if seen and seen.get(access.TARGETS) else access.mask(target)


PRODUCT_APPS = ("deletions", "retirements", "ops", "api", "core")  # the product's own, in this order


@register.filter
def product_first(app_list: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The admin index's sections: the product's, then the framework's (task queue, logins, users)."""
    ours = sorted(
        (a for a in app_list if a["app_label"] in PRODUCT_APPS), key=lambda a: PRODUCT_APPS.index(a["app_label"])
    )
    return ours, [a for a in app_list if a["app_label"] not in PRODUCT_APPS]
