from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser

from core import present
from core.commands import ServiceCommand
from retirements.selectors import describe, get


class Command(ServiceCommand):
    help = "Show a retirement: status, workspace, eligibility, next wake, notices, watchers, purge job, decisions."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        d = describe(get(options["request_id"]))
        if options["json"]:
            self.print_json(d)
            return

        def w(line: str) -> None:
            self.stdout.write(present.terminal(line))

        ws = d["workspace"]
        told = d["story"]  # `retirements.case.story`, as every face gives it
        w(f"request    {d['id']}  status={d['status']}")
        w(f"status     {told['status_words']}")
        if told["open_question"]:
            w(f"question   {told['open_question']}")
        w(f"owner      {told['owner']}")
        w(f"next check {_at(told['next_check_at'])}")
        w(f"deadline   {told['deadline'] or '-'}")
        w(f"workspace  {ws['slug']}  lifecycle={ws['lifecycle']}  legal_hold={ws['legal_hold']}")
        w(f"requested  by {d['requested_by']} at {d['requested_at']}: {d['reason']}")
        w(f"eligible   {d['eligible_at']} ({d['eligibility_policy']})  next wake {d['next_wake_at'] or '-'}")
        w(f"case       last action: {d['last_action'] or '-'}")
        if d["hold"]:
            w(f"hold       since {d['hold']['held_at']}: {d['hold']['reason']}")
        if d["blocker"]:
            w(f"blocker    {d['blocker']['reason']} (until {d['blocker']['until']})")
        if d["conclusion"]:
            w(f"conclusion {d['conclusion']}")
        w("notices")
        for n in d["notices"]:
            gating = "gating" if n["gating"] else "      "
            err = f"  last error: {n['last_error']}" if n["last_error"] else ""
            err += f"  moved: {n['moved_because']}" if n["moved_because"] else ""
            w(f"  {n['kind']:<20} due {n['due_at']}  {gating}  {n['status']:<10} attempts={n['attempts']}{err}")
        w("watchers")
        for wt in d["watchers"]:
            mark = "*" if wt["authoritative"] else " "
            w(f" {mark}{wt['id']}  {wt['status']:<10} heartbeat={wt['heartbeat_at'] or '-'}  {wt['conclusion'] or ''}")
        job = d["purge_job"]
        w(f"purge job  {job['operation_id'] + ' ' + job['status'] if job else '-'}")
        w("decisions")
        for dec in d["decisions"]:
            w(f"  {dec['at']}  {dec['actor']:<12} {dec['action']:<20} {dec['reason']}")
        for a in d["alarms"]:
            w(f"ALARM      {a['kind']}: {a['message']}{' (resolved)' if a['resolved'] else ''}")


def _at(iso: str | None) -> str:
    return present.absolute(datetime.fromisoformat(iso)) if iso else "-"
