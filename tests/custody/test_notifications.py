"""People are told when they must act: each occurrence once per person, at least once (a sender
killed between send and save sends once more after its claim), never twice for nothing; digests
and "off" follow each person's preference, deadlines come whatever it says."""

from __future__ import annotations

import email
import email.policy
import json
import signal
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
import time_machine
from django.core import mail
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.authority import named
from deletions.models import DeletionRequest, Status
from deletions.services import deletion_approve, deletion_submit
from ops import notify
from ops.models import Notification, NotificationPreference
from tests.conftest import manage_argv, subprocess_env
from tests.support import force, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def received(folder: Path) -> list[tuple[str, str]]:
    """(recipient, subject) of every message the file backend wrote: what the mail server got."""
    out = []
    for path in sorted(folder.iterdir()):
        for raw in path.read_text().split("\n" + "-" * 79 + "\n"):
            if raw.strip():
                msg = email.message_from_string(raw.strip(), policy=email.policy.default)
                out.append((str(msg["To"]).strip(), " ".join(str(msg["Subject"]).split())))
    return out


def mail_env(folder: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend", EMAIL_FILE_PATH=str(folder), **extra
    )


def test_two_senders_at_once_tell_each_person_once(tmp_path, observe) -> None:
    reqs = [deletion_submit(target=f"demo:tell-{i}", actor=named("operator-a")) for i in range(4)]
    procs = [
        subprocess.Popen(manage_argv("send_notifications"), env=mail_env(tmp_path), stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for proc in procs:
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    got = received(tmp_path)
    # Each approval waiting goes to its person and its backup (never its submitter): 4 x 2 messages.
    assert len(got) == 8 and len(set(got)) == 8, got
    assert {to for to, _ in got} == {"operator-b@hq.example", "operator-c@hq.example"}
    for submitted in reqs:
        req: Any = DeletionRequest.objects.select_related("assignee", "backup").get(id=submitted.id)
        about = f"[back-office] Approval waiting: deletion {str(req.id)[:8]}"
        told = sorted(to for to, subject in got if subject.startswith(about))
        assert told == sorted([req.assignee.email, req.backup.email]), (about, got)
    assert set(Notification.objects.values_list("status", "attempts")) == {("sent", 1)}
    # Nothing new happened: another pass tells nobody anything.
    assert notify.tick()["sent"] == 0 and len(received(tmp_path)) == 8
    observe("2 send_notifications processes over 4 approvals waiting: 8 messages, each person once per case")


def test_a_sender_killed_between_send_and_save_sends_once_more_after_its_claim(tmp_path) -> None:
    req: Any = deletion_submit(target="demo:crash", actor=named("operator-a"))
    NotificationPreference.objects.create(user=req.backup, delivery="off")  # only the person is told
    proc = subprocess.run(
        manage_argv("send_notifications"), env=mail_env(tmp_path, CRASH_AT="notification-sent"), timeout=120
    )
    assert proc.returncode == -signal.SIGKILL
    assert [to for to, _ in received(tmp_path)] == [req.assignee.email]  # sent, and the sender died
    row = Notification.objects.get()
    assert row.status == "sending" and row.claim_expires_at is not None
    notify.send_due(timezone.now())  # the claim stands: nobody sends it again yet
    assert mail.outbox == []
    with time_machine.travel(row.claim_expires_at, tick=False):
        assert notify.send_due(timezone.now()) == 1  # the sender is gone: at least once, sent again
    with time_machine.travel(row.claim_expires_at + timedelta(hours=1), tick=False):
        assert notify.tick()["sent"] == 0
    assert [m.to for m in mail.outbox] == [[req.assignee.email]]
    row.refresh_from_db()
    assert (row.status, row.attempts) == ("sent", 2)


def _sender(folder: Path, pause_at: str) -> tuple[subprocess.Popen[str], Any]:
    """A `send_notifications` process that stops (SIGSTOP) at a pause point; returned once stopped."""
    proc = subprocess.Popen(
        manage_argv("send_notifications"),
        env=mail_env(folder, PAUSE_AT=pause_at),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watched = psutil.Process(proc.pid)
    ended = (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
    wait_for(lambda: watched.status() in ended, what=f"the sender paused at {pause_at}")
    if watched.status() != psutil.STATUS_STOPPED:
        raise AssertionError(f"the sender ended before {pause_at}: {proc.communicate()}")
    return proc, watched


def _take_over(folder: Path, row: Notification) -> Notification:
    """The paused sender's claim runs out (forced past), and another sender process takes it over."""
    force(Notification.objects.filter(id=row.id), claim_expires_at=timezone.now() - timedelta(seconds=1))
    second = subprocess.run(manage_argv("send_notifications"), env=mail_env(folder), capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    return Notification.objects.get(id=row.id)


@pytest.mark.slow
def test_a_sender_paused_holding_its_claim_stands_down_once_it_was_taken_over(tmp_path, observe) -> None:
    """Issue 51 item 5. A sender process stopped after its claim, before its send; its claim runs
    out and a second sender process takes it over (the next generation), sends and saves; the first,
    continued, re-checks its claim just before the send, sends nothing, saves nothing, and says it
    stood down: the person got one mail."""
    req: Any = deletion_submit(target="demo:fenced", actor=named("operator-a"))
    NotificationPreference.objects.create(user=req.backup, delivery="off")  # one message: the person's
    first, _ = _sender(tmp_path, "notification-claimed")
    try:
        held = Notification.objects.get()
        assert (held.status, held.claim_generation, received(tmp_path)) == ("sending", 1, [])
        taken = _take_over(tmp_path, held)
        assert (taken.status, taken.claim_generation, taken.attempts) == ("sent", 2, 2)
        assert [to for to, _ in received(tmp_path)] == [req.assignee.email]
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    said = next(line for line in err.splitlines() if "stood down" in line)
    assert f"notification id={held.id} not sent, stood down: its claim (generation 1) was taken over" in said
    assert json.loads(out)["sent"] == 0
    assert [to for to, _ in received(tmp_path)] == [req.assignee.email]  # one mail
    row = Notification.objects.get()
    assert (row.status, row.claim_generation, row.sent_at, row.claimed_by) == (
        "sent", 2, taken.sent_at, taken.claimed_by
    )  # fmt: skip
    observe(
        f"sender SIGSTOPped holding its claim (generation 1); a second sender took generation 2 and sent; "
        f"the first, continued, logged '{said.split(' ', 3)[-1][:90]}'; {len(received(tmp_path))} mail"
    )


@pytest.mark.slow
def test_the_window_left_a_sender_stalled_between_its_send_and_its_save_repeats_and_its_save_changes_nothing(
    tmp_path,
) -> None:
    """The one window the fence leaves (past the check): a sender that stalls after its send, past
    its claim, sends the message again by its replacement; its late save is refused and changes
    nothing, so the row says what the replacement did."""
    req: Any = deletion_submit(target="demo:window", actor=named("operator-a"))
    NotificationPreference.objects.create(user=req.backup, delivery="off")
    first, _ = _sender(tmp_path, "notification-sent")
    try:
        held = Notification.objects.get()
        assert held.claim_generation == 1 and len(received(tmp_path)) == 1  # sent, not yet saved
        taken = _take_over(tmp_path, held)
        assert (taken.status, taken.claim_generation) == ("sent", 2)
    finally:
        first.send_signal(signal.SIGCONT)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert f"notification id={held.id} sent; its save refused: its claim (generation 1) was taken over" in err
    assert json.loads(out)["sent"] == 0
    assert [to for to, _ in received(tmp_path)] == [req.assignee.email] * 2  # at least once: the window
    row = Notification.objects.get()
    assert (row.status, row.claim_generation, row.sent_at, row.claimed_by) == (
        "sent", 2, taken.sent_at, taken.claimed_by
    )  # fmt: skip


def test_the_database_refuses_a_claim_that_does_not_take_the_next_generation() -> None:
    req: Any = deletion_submit(target="demo:generation", actor=named("operator-a"))
    NotificationPreference.objects.create(user=req.backup, delivery="off")
    assert notify.record(notify.deletion_occurrences(timezone.now()), timezone.now()) == 1
    row = Notification.objects.get()
    with connection.cursor() as cur:
        for move in (
            "status = 'sending', claimed_by = 'intruder'",  # a claim without a new generation
            "status = 'sending', claimed_by = 'intruder', claim_generation = 5",  # one that skips
            "claim_generation = 1",  # a generation moved by no claim
        ):
            with pytest.raises(IntegrityError, match="a claim takes the next generation"), transaction.atomic():
                cur.execute(f"UPDATE ops_notifications SET {move} WHERE id = %s", [row.id])
    assert Notification.objects.get().claim_generation == 0
    assert notify.send_due(timezone.now()) == 1  # the sender's own claim takes generation 1
    assert Notification.objects.get().claim_generation == 1


def test_a_new_occurrence_is_told_again_and_preferences_are_kept() -> None:
    early = timezone.now().replace(hour=5, minute=0) + timedelta(days=1)  # before the digest hour (07:00)
    with time_machine.travel(early, tick=False):
        req: Any = deletion_submit(target="demo:rounds", actor=named("operator-a"))
        person, backup = req.assignee, req.backup
        NotificationPreference.objects.create(user=backup, delivery="digest")
        notify.tick()
        assert [m.to for m in mail.outbox] == [[person.email]]  # the backup waits for the digest
        assert Notification.objects.get(recipient=backup).status == "digest"
        # Approved, then back in review: a second round of "approval waiting" is a new occurrence.
        deletion_approve(request_id=req.id, actor=named(person.username), digest=req.inventory_digest)
        force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_REVIEW)
        notify.tick()
        notify.tick()
        assert len([m for m in mail.outbox if "Approval waiting" in m.subject]) == 2
    # The digest goes out from its hour, once a day, listing both rounds.
    with time_machine.travel(early + timedelta(hours=3), tick=False):
        notify.tick()
        notify.tick()
    digests = [m for m in mail.outbox if "Your digest" in m.subject]
    assert len(digests) == 1 and digests[0].to == [backup.email]
    assert digests[0].body.count("Approval waiting") == 2
    rows = Notification.objects.filter(recipient=backup, event="approval_waiting")
    assert set(rows.values_list("status", flat=True)) == {"digested"}


def test_deadlines_reach_the_person_the_backup_and_then_the_group_even_when_off() -> None:
    received_at = timezone.now() - timedelta(days=40)
    req = deletion_submit(target="demo:late", actor=named("operator-a"), received_at=received_at)
    for who in ("operator-a", "operator-b", "operator-c"):
        NotificationPreference.objects.create(user=named(who).user, delivery="off")
    notify.tick()
    passed = sorted(m.to[0] for m in mail.outbox if "Deadline passed" in m.subject)
    # The approvers' rota (not the submitter) is the group: person, backup, and anyone else on it.
    assert passed == ["operator-b@hq.example", "operator-c@hq.example"]
    assert not [m for m in mail.outbox if "Approval waiting" in m.subject]  # off: only deadlines
    assert "Open the case: http" in mail.outbox[0].body and str(req.id) in mail.outbox[0].body


def test_a_person_chooses_how_they_are_told_on_my_notifications(client) -> None:
    from django.urls import reverse

    user = named("operator-c").user
    client.force_login(user)
    page = client.get(reverse("notification-preferences"))
    assert page.status_code == 200 and "Nothing yet." in page.content.decode()
    saved = client.post(reverse("notification-preferences"), {"delivery": "digest"}, follow=True)
    assert "Saved: one digest a day." in [str(m) for m in saved.context["messages"]]
    assert NotificationPreference.objects.get(user=user).delivery == "digest"
    refused = client.post(reverse("notification-preferences"), {"delivery": "hourly"})
    assert refused.status_code == 200 and NotificationPreference.objects.get(user=user).delivery == "digest"


def test_a_message_that_cannot_be_sent_is_tried_again_then_given_up_with_its_reason() -> None:
    req: Any = deletion_submit(target="demo:no-address", actor=named("operator-a"))
    NotificationPreference.objects.create(user=req.backup, delivery="off")
    person = req.assignee
    person.email = ""
    person.save(update_fields=["email"])
    at = timezone.now()
    for attempt in range(1, notify.MAX_ATTEMPTS + 1):
        with time_machine.travel(at, tick=False):
            notify.tick()
        row = Notification.objects.get(recipient=person)
        assert row.attempts == attempt and "has no email address" in row.last_error
        if row.status == "failed":
            break
        retry_at = row.next_attempt_at
        assert row.status == "pending" and retry_at is not None and retry_at > at  # after its backoff
        at = retry_at
    assert (row.status, row.attempts) == ("failed", notify.MAX_ATTEMPTS)
    assert mail.outbox == []


def test_an_approval_expiring_within_a_day_tells_the_approvers_once() -> None:
    req = deletion_submit(target="demo:expiring", actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    approval = req.approvals.get()
    with time_machine.travel(approval.expires_at - timedelta(hours=30), tick=False):
        notify.tick()
    assert not [m for m in mail.outbox if "Approval expiring" in m.subject]
    with time_machine.travel(approval.expires_at - timedelta(hours=12), tick=False):
        notify.tick()
        notify.tick()
    told = sorted(m.to[0] for m in mail.outbox if "Approval expiring" in m.subject)
    assert told == ["operator-b@hq.example", "operator-c@hq.example"]  # the approvers' rota, not the submitter


def test_needs_attention_a_missed_check_and_a_retirement_alarm_reach_whoever_holds_them(cmd) -> None:
    from retirements.models import Alarm, RetirementRequest

    req = deletion_submit(target="demo:stuck", actor=named("operator-a"))
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    force(DeletionRequest.objects.filter(id=req.id), status=Status.NEEDS_ATTENTION, owner="operators on call",
          open_question="failed 10 times", next_check_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    assert cmd("create_workspace", "--slug", "alarm-ws", "--name", "A", "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", "alarm-ws", "--requested-by", "operator-c", "--reason", "gone",
              "--confirm", "alarm-ws")  # fmt: skip
    assert ran.code == 0, ran.err
    retirement: Any = RetirementRequest.objects.select_related("owner", "backup").get(workspace__slug="alarm-ws")
    Alarm.objects.create(
        request=retirement, kind="watcher_stalled", message="watcher stalled", created_at=timezone.now()
    )
    notify.tick()
    held: Any = DeletionRequest.objects.select_related("assignee", "backup").get(id=req.id)
    by_event: dict[str, set[str]] = {}
    for m in mail.outbox:
        by_event.setdefault(m.subject.split(":")[0].removeprefix("[back-office] "), set()).add(m.to[0])
    people = {held.assignee.email, held.backup.email}
    assert by_event["Needs attention"] == people and by_event["Next check passed"] == people
    assert by_event["Alarm"] == {retirement.owner.email, retirement.backup.email}
    notify.tick()  # nothing new: nobody is told twice
    assert sum(len(v) for v in by_event.values()) == len(mail.outbox)


# A notification is one more face of a case: it tells those its story waits on (`Story.waits_on`),
# in its story's words (`deletions.reading.story_of`, `retirements.selectors.story`), the person
# masked in them as in every mail.


def mailed(case_id: Any, subject: str) -> dict[str, str]:
    """Who was mailed `subject` about the case: username -> the body they got."""
    from django.contrib.auth.models import User

    about = f"[back-office] {subject}: "
    emails = {str(email): str(username) for email, username in User.objects.values_list("email", "username")}
    return {
        emails[m.to[0]]: str(m.body)
        for m in mail.outbox
        if m.subject.startswith(about) and str(case_id)[:8] in m.subject
    }


def waited_on(told: Any, rotas_of: Any, *, submitter: int | None = None) -> dict[str, str]:
    """Everyone the story waits on (never a deletion's submitter: four eyes), and how (the inbox's words)."""
    from django.contrib.auth.models import User

    from deletions.reading import WAITS

    people = User.objects.filter(is_active=True, is_staff=True).exclude(pk=submitter or 0)
    return {u.username: WAITS[how] for u in people if (how := told.waits_on(u.username, rotas_of(u)))}


def the_story_said(told: Any, body: str, *, target: str = "", you: str) -> None:
    """The story's status words, open question, who acts next, next check and deadline, each a line
    of the body as the story says it (the person masked), and why the reader was told."""
    from core import access, present

    def seen(text: str) -> str:
        return access.mask_in(text, target)

    lines = body.splitlines()
    said = [
        f"Status: {seen(told.status_words)}",
        *([f"Open question: {seen(told.question)}"] if told.question else []),
        f"Who acts next: {seen(told.owner)}",
        f"Next check: {present.absolute(told.next_check_at)}",
        *([f"Deadline: {seen(told.deadline)}"] if told.deadline else []),
        f"You: {you}",
    ]
    missing = [line for line in said if line not in lines]
    assert not missing, f"not said: {missing}\nthe body:\n{body}"
    if target:
        assert target not in body


def test_an_effect_unknown_case_is_told_to_whom_its_story_waits_on_in_its_words(cmd, settings) -> None:
    from core import clock
    from deletions import reading
    from deletions import services as deletion_services
    from tests.conftest import submit_and_approve
    from tests.deletions.helpers import crash_at, take_over

    req = submit_and_approve("demo:told-unknown@example.com")
    crashed = crash_at("after-submit-mark", req.id)  # a real worker, SIGKILLed right after it submitted
    settings.RECEIVER_TEST_LOOKUP_LAG_SECONDS = 3600  # its replacement's lookup cannot settle it: an alarm
    assert take_over(cmd, crashed).code == 1
    assert crashed.lease_expires_at is not None
    with time_machine.travel(crashed.lease_expires_at + timedelta(seconds=2), tick=False):
        notify.tick()
        case: Any = DeletionRequest.objects.select_related("assignee", "backup").get(id=req.id)
        told = reading.story_of(case, clock.now())
    assert told.status_words == "effect unknown" and told.person is not None and told.question
    got = mailed(req.id, "Effect unknown")
    expected = waited_on(told, deletion_services.rotas_of, submitter=case.requested_by_user_id)
    assert set(got) == set(expected) and got, (got.keys(), expected)
    for who, body in got.items():
        the_story_said(told, body, target=case.target, you=expected[who])


def test_a_waiting_approval_is_told_to_whom_its_story_waits_on_named_or_not(settings) -> None:
    from django.contrib.auth.models import User

    from core import clock
    from deletions import reading
    from deletions import services as deletion_services

    with time_machine.travel(timezone.now(), tick=False):
        for target in ("demo:told-named@example.com", "demo:told-unnamed@example.com"):
            if "unnamed" in target:  # one approver left beside the submitter: nobody is named
                User.objects.filter(username="operator-c").update(is_active=False)
            req = deletion_submit(target=target, actor=named("operator-a"))
            notify.tick()
            case: Any = DeletionRequest.objects.select_related("assignee", "backup").get(id=req.id)
            told = reading.story_of(case, clock.now())
            assert told.status_words == "waiting for approval"
            got = mailed(req.id, "Approval waiting")
            expected = waited_on(told, deletion_services.rotas_of, submitter=case.requested_by_user_id)
            assert set(got) == set(expected) and got, (req.target, got.keys(), expected)
            for who, body in got.items():
                the_story_said(told, body, target=case.target, you=expected[who])
    assert told.person is None and set(got) == {"operator-b"}  # the rota, as its story says: nobody named yet


def test_a_held_retirement_is_told_to_whom_its_story_waits_on_in_its_words(cmd, settings) -> None:
    from django.contrib.auth.models import User

    from core import clock
    from core import custody as rota_rules
    from core.authority import Actor
    from retirements import selectors as retirement_selectors
    from retirements import watcher
    from retirements.contract import ROTA
    from retirements.models import RetirementRequest
    from retirements.services import HOLD, retirement_hold

    assert cmd("create_workspace", "--slug", "told-ws", "--name", "T", "--disabled").code == 0
    ran = cmd("request_retirement", "--workspace", "told-ws", "--requested-by", "operator-a", "--reason", "closed",
              "--confirm", "told-ws")  # fmt: skip
    assert ran.code == 0, ran.err
    req = RetirementRequest.objects.get(workspace__slug="told-ws")
    retirement_hold(actor=Actor.of(User.objects.get(username="operator-a")), request_id=req.id, reason="legal")
    held = RetirementRequest.objects.get(id=req.id)
    assert held.held_at is not None
    review = held.held_at + timedelta(days=settings.RETIREMENT_HOLD_ALARM_DAYS)
    with time_machine.travel(review + timedelta(minutes=1), tick=False):
        assert watcher.age_alarms(now=clock.now())  # held past its review: an alarm
        notify.tick()
        fresh = RetirementRequest.objects.select_related("workspace", "owner", "backup", "watcher").get(id=req.id)
        told = retirement_selectors.story(fresh, clock.now())
    assert told.status_words == "on hold" and told.deadline.startswith("hold review") and told.person
    on_rota = {u.pk for u in rota_rules.rota(ROTA, HOLD)}
    got = mailed(req.id, "Alarm")
    expected = waited_on(told, lambda u: [ROTA] if u.pk in on_rota else [])
    assert set(got) == set(expected) and got, (got.keys(), expected)
    for who, body in got.items():
        the_story_said(told, body, you=expected[who])
        assert "\nAlarm raised " in body and "release or cancel it" in body


def test_what_to_tell_is_read_in_queries_that_do_not_grow_with_the_cases(cmd) -> None:
    """Each case's story is read with the case (`selectors.for_stories`, a retirement's with its
    watcher, claim and purge job): finding what to tell about 8 cases of each kind takes the same
    statements as about 2."""
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    from retirements.models import Alarm, RetirementRequest

    def cases(n: int) -> None:
        for _ in range(n):
            i = DeletionRequest.objects.count()
            req = deletion_submit(target=f"demo:count-{i}", actor=named("operator-a"))
            if i % 2:
                attention = {"status": Status.NEEDS_ATTENTION, "owner": "operators on call", "open_question": "failed"}
                force(DeletionRequest.objects.filter(id=req.id), **attention)
            assert cmd("create_workspace", "--slug", f"count-{i}", "--name", "C", "--disabled").code == 0
            ran = cmd("request_retirement", "--workspace", f"count-{i}", "--requested-by", "operator-c",
                      "--reason", "gone", "--confirm", f"count-{i}")  # fmt: skip
            assert ran.code == 0, ran.err
            retirement = RetirementRequest.objects.get(workspace__slug=f"count-{i}")
            Alarm.objects.create(
                request=retirement, kind="watcher_stalled", message="stalled", created_at=timezone.now()
            )

    def read() -> int:
        with CaptureQueriesContext(conn) as seen:
            found = notify.deletion_occurrences(timezone.now()) + notify.retirement_occurrences(timezone.now())
        assert {o.case_kind for o in found} == {"deletion", "retirement"}
        return len(seen.captured_queries)

    cases(2)
    read()  # warm: the rotas' permissions
    few = read()
    cases(6)
    assert read() == few
