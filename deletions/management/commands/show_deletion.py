import dataclasses
from datetime import datetime
from typing import Any

from django.core.management.base import CommandParser

from core import access, clock, present
from core.commands import ServiceCommand, acting, add_token_argument
from deletions import proposal
from deletions.reading import case_view
from deletions.selectors import get_request

# The digest where the reader's lens withholds it (`core.access.DIGEST_KEYS`).
NOT_SHOWN = "(not shown to you: computed over the full target)"


class Command(ServiceCommand):
    help = "Show a request, its approvals and its stage chain (previous_stage_id order)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("request_id")
        parser.add_argument("--json", action="store_true", help="print JSON instead of text")
        parser.add_argument("--by", metavar="USER", help="show it as this user may see it (support: the target masked)")
        add_token_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        reader = acting(options, "--by", decides=False) if options["by"] is not None else None
        lens = access.Lens.of(reader.user) if reader else access.Lens(frozenset(access.ROLES))
        now = clock.now()
        data = case_view(options["request_id"], lens=lens, now=now)
        if options["json"]:
            self.print_json(data)
            return
        req = get_request(options["request_id"])
        told = data["story"]  # `case.story`, through the reader's lens
        r = data["request"]

        def w(line: str) -> None:
            self.stdout.write(present.terminal(line))

        w(f"request   {r['id']}  {r['target']}  status={r['status']}")
        for fault in data["evidence_faults"]:  # what differs: the values for a reader who may see evidence
            w(f"INTEGRITY FAULT: the saved evidence does not match its receipt: {fault['evidence'] or fault['fault']}")
        w(f"requested {r['requested_by']} at {r['created_at']}; digest {r['inventory_digest'] or NOT_SHOWN}")
        w(f"status    {told['status_words']}")
        if data["reapplied"]:
            w(f"restored  {data['reapplied']}")
        if told["open_question"]:
            w(f"question  {told['open_question']}")
        w(f"owner     {told['owner']}")
        next_check = told["next_check_at"]
        w(f"next check {present.absolute(datetime.fromisoformat(next_check)) if next_check else '-'}")
        w(f"deadline  {told['deadline']} (received {present.absolute(req.received_at)})")
        w(f"case      last action: {r['last_action'] or '-'}")
        w(
            f"lease     owner={r['lease_owner'] or '-'} generation={r['lease_generation']} "
            f"expires={r['lease_expires_at'] or '-'} heartbeat={r['heartbeat_at'] or '-'}"
        )
        w(
            f"retry     count={r['retry_count']} next_attempt={r['next_attempt_at'] or '-'} "
            f"error={r['last_error'] or '-'}"
        )
        if r["cancel_requested_at"]:
            w(f"cancel    by {r['cancel_requested_by']} at {r['cancel_requested_at']}: {r['cancel_reason']}")
        proposed = dataclasses.replace(proposal.of_request(req), digest=data["proposal"]["digest"] or NOT_SHOWN)
        for line in lens.data(proposal.lines(proposed), target=req.target):
            w(f"proposal  {line}")
        w(f"approvals ({len(data['approvals'])})")
        for a in data["approvals"]:
            w(f"  {a['approved_by']} at {a['approved_at']} digest {a['inventory_digest'] or NOT_SHOWN}")
        w(f"decisions ({len(data['decisions'])})")
        for d in data["decisions"]:
            w(f"  {d['at']} {d['by']} {d['action']}" + (f": {d['reason']}" if d["reason"] else ""))
        for x in data["withdrawals"]:
            told = (
                f"acknowledged at {x['acknowledged_at']} by {x['acknowledged_where']}"
                if x["acknowledged_at"]
                else f"NOT YET acknowledged ({x['attempts']} attempts; {x['last_error'] or 'not sent yet'})"
            )
            w(f"withdrawn epoch {x['epoch']}: {x['cause']} at {x['created_at']}; {told}")
        w(f"stages    ({len(data['stages'])}; each result as its receipt says)")
        for s in data["stages"]:
            meta = s["metadata_json"]
            decision = (meta.get("decision") or {}).get("transition", "-")
            mark = "*" if s["is_current"] else " "
            w(
                f" {mark}{s['stage']:<13} {s['target_community_id'] or '-':<36} {s['status']:<9} "
                f"result={meta.get('result')} decision={decision} started={s['started_at'] or '-'}"
            )
