"""How values read on a page: relative times with the absolute time beside them,
durations, humanized codes and labelled values instead of dict reprs. Pure."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from wire import evidence


def terminal(text: Any) -> str:
    """Text as a terminal may print it: control characters (an escape sequence, a NUL) shown
    escaped, never acted on; line breaks and tabs kept."""
    import unicodedata

    value = "" if text is None else str(text)
    return "".join(c if c in "\n\t" or unicodedata.category(c)[0] != "C" else repr(c)[1:-1] for c in value)


def span(seconds: float) -> str:
    """A length of time in at most two units: "3 s", "4 min 10 s", "3 h 4 min", "2 d 5 h"."""
    s = int(abs(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, r = divmod(s, 60)
        return f"{m} min {r} s" if r else f"{m} min"
    if s < 86400:
        h, r = divmod(s, 3600)
        return f"{h} h {r // 60} min" if r // 60 else f"{h} h"
    d, r = divmod(s, 86400)
    return f"{d} d {r // 3600} h" if r // 3600 else f"{d} d"


def relative(at: datetime | None, now: datetime) -> str:
    """ "12 s ago", "in 3 h 4 min", "now"; "-" for no time."""
    if at is None:
        return "-"
    seconds = (at - now).total_seconds()
    if abs(seconds) < 1:
        return "now"
    return f"in {span(seconds)}" if seconds > 0 else f"{span(seconds)} ago"


def absolute(at: datetime | None) -> str:
    """To the second, in UTC, as every time in this product is stored."""
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(value: timedelta | float | None) -> str:
    if value is None:
        return "-"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return f"{seconds:.1f} s" if seconds < 60 else span(seconds)


def worker(owner: str | None) -> str:
    """An executor id as people read it: 'q:vm:14628' is "worker on host vm (process 14628)"."""
    if not owner:
        return "no worker"
    parts = owner.split(":")
    kinds = {"q": "worker", "purge": "purge worker", "cli": "run_deletion"}
    if len(parts) >= 3 and parts[-1].isdigit():
        kind = kinds.get(parts[0], parts[0])
        return f"{kind} on host {parts[-2]} (process {parts[-1]})"
    if len(parts) == 2 and parts[-1].isdigit():
        return f"run_deletion on host {parts[0]} (process {parts[1]})"
    return owner


def humanize(code: str | None) -> str:
    """`deletion_pending` → "deletion pending"."""
    return "-" if not code else str(code).replace("_", " ")


def labelled(value: Any) -> list[tuple[str, str]]:
    """A result dict as (label, value) pairs for a small table, never a repr."""
    if not isinstance(value, dict):
        return [] if value in (None, "") else [("value", str(value))]
    out = []
    for key, item in value.items():
        if key == "receipt":
            shown = receipt(item)
        elif isinstance(item, bool):
            shown = "yes" if item else "no"
        elif isinstance(item, dict):
            shown = ", ".join(f"{humanize(k)} {v}" for k, v in item.items())
        elif isinstance(item, list):
            shown = ", ".join(str(i) for i in item) or "none"
        else:
            shown = _time_or_text(item)
        out.append((humanize(key), shown))
    return out


def _time_or_text(item: Any) -> str:
    """A value as text; an ISO time (evidence saved by a target) to the second, in UTC."""
    text = str(item)
    if len(text) >= 19 and text[4:5] == "-" and text[10:11] == "T":
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            return text
        if at.tzinfo is not None:
            return absolute(at.astimezone(UTC))
    return text


def count(n: int, one: str, many: str = "") -> str:
    """ "1 community", "2 communities": `many` when the plural is not `one` + "s"."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


@dataclass(frozen=True)
class CasePanel:
    """What every case page shows first (SPEC 5.1)."""

    what: str
    status: str
    status_label: str
    open_question: str
    next_check_at: datetime | None
    owner: str
    last_action: str
    attempt: str
    deadline: str = ""  # the legal deadline, where the workflow has one
    closed: bool = False  # nothing more will happen: no question, and no system at work either


@dataclass(frozen=True)
class Story:
    """What every face says of a case first, built by one function per workflow
    (`deletions.case.story`, `retirements.case.story`): the case page's panel, the inbox, the
    operations overview, `show_deletion` / `show_retirement` and the API read these words and
    times, and none builds its own."""

    status: str  # the saved status code
    status_words: str  # what it means now: "running", "effect unknown", "cancelled: nothing deleted"
    question: str  # what the case asks now ("" when nothing)
    owner: str  # who acts next, in words
    person: str | None  # the named person (username), None when nobody is named
    backup: str | None
    rota: str | None  # the rota whose person acts next; None while the system runs it or once it ended
    why_nobody: str  # why nobody is named ("" when a person is)
    next_check_at: datetime | None
    deadline: str  # in words ("" where the workflow has none)
    deadline_at: datetime | None
    closed: bool  # nothing more will happen

    def as_json(self) -> dict[str, Any]:
        return {
            "status_words": self.status_words,
            "open_question": self.question or None,
            "owner": self.owner,
            "responsible": self.person,
            "backup": self.backup,
            "rota": self.rota,
            "responsible_why": self.why_nobody or None,
            "next_check_at": self.next_check_at.isoformat() if self.next_check_at else None,
            "deadline": self.deadline or None,
            "deadline_at": self.deadline_at.isoformat() if self.deadline_at else None,
            "closed": self.closed,
        }

    def waits_on(self, username: str, rotas: Collection[str]) -> str:
        """How the case waits on `username` (on `rotas`): "person", "backup", "rota" (nobody named
        yet on a rota they are on), or "" when it does not wait on them."""
        if self.closed:
            return ""
        if self.person is not None and self.person == username:
            return "person"
        if self.backup is not None and self.backup == username:
            return "backup"
        if self.person is None and self.rota is not None and self.rota in rotas:
            return "rota"
        return ""


@dataclass(frozen=True)
class Offer:
    """One action a case page shows: offered when it can act now, else disabled with the reason."""

    name: str
    label: str
    why_not: str = ""

    @property
    def enabled(self) -> bool:
        return not self.why_not


def receipt(token: Any) -> str:
    """A receiver's signed copy of its evidence (a JWS), as a person reads it: who signed it, not its text."""
    return f"signed by the receiver (key {evidence.key_id(token) or 'unreadable'})"


def unavailable(offers: list[Offer]) -> list[tuple[str, list[Offer]]]:
    """The actions that cannot act now, grouped by their reason in the order first met: each reason
    is said once, for every action it stops."""
    groups: dict[str, list[Offer]] = {}
    for o in offers:
        if not o.enabled:
            groups.setdefault(o.why_not, []).append(o)
    return list(groups.items())


def permission_words(perm: str) -> str:
    """A permission as people say it: 'deletions.approve_deletionrequest' is 'approve deletion
    requests', 'retirements.retry_notices_retirementrequest' 'retry notices of retirement requests'."""
    from django.apps import apps

    app, _, codename = perm.partition(".")
    try:
        models = list(apps.get_app_config(app).get_models())
    except LookupError:
        models = []
    for model in models:
        suffix = f"_{model._meta.model_name}"
        if codename.endswith(suffix):
            verb = codename[: -len(suffix)].replace("_", " ")
            noun = str(model._meta.verbose_name_plural)
            return f"{verb} of {noun}" if " " in verb else f"{verb} {noun}"
    return codename.replace("_", " ")


def not_allowed(perm: str) -> str:
    """Why an action is refused for want of a permission, in words (the code is for logs)."""
    return f"only staff allowed to {permission_words(perm)} can do this"


def offer(name: str, label: str, *, perm: str, perms: set[str], why_not: str = "") -> Offer:
    """Missing permission first (it is what the user can least change), then the case's own reason."""
    if perm not in perms:
        return Offer(name, label, not_allowed(perm))
    return Offer(name, label, why_not)
