"""No oracle for a masked reader: a marker person with real cases, and each face asked by every role
that sees targets masked (support, staff in no group, an intake system's account), with the right
guess of the person's address and with a wrong guess of the same length and shape.

(a) Neither the full target nor its account part (in any letter case) appears in any answer, nor
    the inventory digest (an unkeyed SHA-256 over the full target: a guess is checked against it
    offline), nor any other planted free text naming the person.
(b) Where a face takes a guess (the admin list's search, the CSV export, the duplicate submission),
    the answers to the right and to the wrong guess are indistinguishable. The only thing made
    equal before comparing is what the reader typed themselves and what differs on every request
    anyway (`same`): the guess, echoed back as typed (raw, HTML-escaped, URL-encoded once and twice, in the
    search box, the result line and the links that keep the search) becomes `<guess>`, and Django's CSRF token
    (a fresh mask on every page) becomes `<csrf>`. Time stands still while a pair is asked, so no
    relative time differs. A refused duplicate reads the same whichever case it collides with (ids,
    statuses and targets of the two cases differ; nothing is normalised there).

The faces: the admin list (plain and searched), the CSV export (plain and searched), each case page
and the reveal confirmation page, `show_deletion` text and --json, the API list and detail, the API's
duplicate submission, the notifications mailed, and the webhook deliveries' bodies."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, quote_plus
from uuid import uuid5

import pytest
import time_machine
from django.contrib.auth.models import Group, User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from api.models import WebhookDelivery, WebhookSubscriber
from core import access, clock, tokens
from core.authority import named
from deletions import worker
from deletions.models import DeletionRequest
from deletions.services import deletion_approve, deletion_cancel, deletion_submit
from deletions.store.requests import inventory_digest
from deletions.targets import manual
from ops import notify

pytestmark = pytest.mark.django_db

ACCOUNT = "zz.marker7731@example.com"
MARKER = f"demo:{ACCOUNT}"
BY_HAND = f"manual:crm/{ACCOUNT}"  # the same person in a system deleted in by hand
# Wrong guesses: the same length and shape, the same first and last two characters (the same mask).
WRONG_ACCOUNT = "zz.mbrker7731@example.com"
GUESSES = [  # (right, wrong)
    (MARKER, f"demo:{WRONG_ACCOUNT}"),
    (BY_HAND, f"manual:crm/{WRONG_ACCOUNT}"),
    (ACCOUNT, WRONG_ACCOUNT),
    (ACCOUNT.upper(), WRONG_ACCOUNT.upper()),
    ("marker7731", "mbrker7731"),  # a piece of it, as one rebuilds a masked target character by character
    ("zz.marker", "zz.mbrker"),
]
# Free text naming the person, planted in the cases' decisions (the account alone, in another case too).
SAID = "customer ZZ.Marker7731@Example.com wrote in (ticket 4410)"
STOP = f"{ACCOUNT.upper()} asked us to stop (ticket 4411)"
MASKED_ROLES = {  # role -> its staff group; staff in no group hold no view permission (see the last test)
    "support": "support (read-only)",
    "intake": "intake",
}


def reader(role: str) -> User:
    user = User.objects.create_user(f"reader-{role}", email="r@hq.example", is_staff=True)
    user.groups.add(Group.objects.get(name=MASKED_ROLES[role]))
    assert not access.Lens.of(user).targets, role
    return user


@pytest.fixture
def planted() -> dict[str, Any]:
    """The marker's cases: one cancelled (a cancel reason naming them), one completed (evidence, an
    approval bound to the digest), one open (awaiting approval), and one at a target deleted by hand,
    waiting for an operator (an open question, an alarm and a notification naming the target)."""
    WebhookSubscriber.objects.create(name="portal", url="http://127.0.0.1:9/", secret="s", created_at=clock.now())
    cancelled = deletion_submit(target=MARKER, actor=named("operator-a"), reason=SAID)
    deletion_cancel(request_id=cancelled.id, actor=named("operator-a"), reason=STOP)
    done = deletion_submit(target=MARKER, actor=named("operator-a"), reason=SAID)
    deletion_approve(request_id=done.id, actor=named("operator-b"), digest=done.inventory_digest)
    worker.run(done.id, executor_id="worker-a")
    waiting = deletion_submit(target=MARKER, actor=named("operator-a"), reason=SAID)
    by_hand = deletion_submit(target=BY_HAND, actor=named("operator-a"), reason=SAID)
    deletion_approve(request_id=by_hand.id, actor=named("operator-b"), digest=by_hand.inventory_digest)
    worker.run(by_hand.id, executor_id="worker-a")
    other = deletion_submit(target="demo:yy.someone4242@example.org", actor=named("operator-a"), reason="ticket 77")
    cases = {c.id: c for c in DeletionRequest.objects.filter(id__in=[cancelled.id, done.id, waiting.id, by_hand.id])}
    assert [cases[c.id].status for c in (cancelled, done, waiting, by_hand)] == [
        "cancelled",
        "completed",
        "submitted",
        "needs_attention",
    ]
    assert BY_HAND in cases[by_hand.id].open_question  # the hand-over names the target
    # The digest is a function of the target alone (and what the target system lists): a guess is
    # checked against it offline, so it is never shown to a masked reader.
    inv = cases[done.id].inventory_json
    assert inventory_digest(json.loads(json.dumps(inv).replace(ACCOUNT, WRONG_ACCOUNT))) != done.inventory_digest
    return {"cases": list(cases.values()), "other": other}


def named_in(face: str, text: str, cases: list[Any]) -> list[str]:
    """(a): what in `text` names the marker or lets a guess be checked against it (nothing, we hope)."""
    folded = text.lower()
    found = [f"{face}: the full target" for t in {c.target.lower() for c in cases} if t in folded]
    found += [f"{face}: the account part" for _ in [1] if ACCOUNT.lower() in folded]
    found += [f"{face}: a piece of the account" for _ in [1] if "marker7731" in folded]
    found += [f"{face}: the inventory digest" for d in {c.inventory_digest[:12] for c in cases} if d in folded]
    # An id computed from the target (as the manual target's account id once was) is a digest too.
    computed = {str(uuid5(manual.ACCOUNT, c.target)) for c in cases}
    found += [f"{face}: an id computed from the target" for i in computed if i in folded]
    return found


def never_named(face: str, text: str, cases: list[Any]) -> None:
    found = named_in(face, text, cases)
    assert not found, found


def same(text: str, guess: str) -> str:
    """What one answer says once the reader's own guess and the CSRF token are made equal."""
    once = quote(guess, safe="")
    for form in {guess, html.escape(guess), quote(guess), quote_plus(guess), once, quote(once, safe="")}:
        text = text.replace(form, "<guess>")
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', 'name="csrfmiddlewaretoken" value="<csrf>"', text)


@pytest.fixture
def still() -> Iterator[None]:
    with time_machine.travel(timezone.now(), tick=False):
        yield


ADMIN = "admin:deletions_deletionrequest"


@pytest.mark.parametrize("role", list(MASKED_ROLES))
def test_a_right_guess_and_a_wrong_guess_read_the_same_in_the_list_and_the_csv(role, planted, still) -> None:
    web = Client()
    web.force_login(reader(role))
    problems = []
    for right, wrong in GUESSES:
        for face, url in (("list", reverse(f"{ADMIN}_changelist")), ("csv", reverse(f"{ADMIN}_export"))):
            answers = {}
            for guess in (right, wrong):
                got = web.get(url, {"q": guess})
                assert got.status_code == 200, (face, guess, got.status_code)
                answers[guess] = same(got.content.decode(), guess)
                problems += named_in(f"{face} ?q={guess}", answers[guess], planted["cases"])
            if answers[right] != answers[wrong]:
                problems.append(f"{face}: ?q={right} and ?q={wrong} read differently (an oracle)")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("role", list(MASKED_ROLES))
def test_a_masked_reader_finds_a_case_by_its_id_or_its_masked_form(role, planted) -> None:
    web = Client()
    web.force_login(reader(role))
    done = next(c for c in planted["cases"] if c.status == "completed")
    by_id = web.get(reverse(f"{ADMIN}_export"), {"q": str(done.id)}).content.decode()
    assert str(done.id) in by_id and len(by_id.strip().splitlines()) == 2
    by_mask = web.get(reverse(f"{ADMIN}_export"), {"q": access.mask(MARKER)}).content.decode()
    rows = by_mask.strip().splitlines()[1:]
    assert len(rows) == 3 and all(access.mask(MARKER) in r for r in rows)  # the three demo: cases
    assert access.mask(MARKER) in web.get(reverse(f"{ADMIN}_changelist"), {"q": access.mask(MARKER)}).content.decode()


@pytest.mark.parametrize("role", list(MASKED_ROLES))
def test_no_face_names_the_person_or_shows_the_digest(role, planted, cmd) -> None:
    user = reader(role)
    cases = planted["cases"]
    web = Client()
    web.force_login(user)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.issue(user, name='faces', scope='read')}")
    shown: dict[str, str] = {
        "list": web.get(reverse(f"{ADMIN}_changelist")).content.decode(),
        "csv": web.get(reverse(f"{ADMIN}_export")).content.decode(),
        "api list": api.get("/api/v1/deletions").content.decode(),
    }
    for case in cases:
        page = web.get(reverse(f"{ADMIN}_change", args=[case.id]))
        assert page.status_code == 200
        shown[f"case page {case.status}"] = page.content.decode()
        shown[f"reveal page {case.status}"] = web.get(reverse(f"{ADMIN}_reveal", args=[case.id])).content.decode()
        detail = api.get(f"/api/v1/deletions/{case.id}")
        assert detail.status_code == 200
        shown[f"api detail {case.status}"] = detail.content.decode()
        for flags in ((), ("--json",)):
            ran = cmd("show_deletion", str(case.id), *flags, "--by", user.username)
            assert ran.code == 0, ran.err
            shown[f"show_deletion {' '.join(flags)} {case.status}"] = ran.out
    leaks = [leak for face, text in shown.items() for leak in named_in(face, text, cases)]
    assert not leaks, "\n".join(leaks)
    # The faces agree on the reasons: each shows them, with the person masked in them.
    masked_said, masked_stop = "customer zz…om wrote in (ticket 4410)", "zz…om asked us to stop (ticket 4411)"
    for face in ("csv", "case page completed", "show_deletion  completed"):
        assert masked_said in html.unescape(shown[face]), face
    for face in ("case page cancelled", "show_deletion  cancelled"):
        assert masked_stop in html.unescape(shown[face]), face
    for face in ("api detail completed", "show_deletion --json completed"):
        assert masked_said in [d["reason"] for d in json.loads(shown[face])["decisions"]], face


def test_mails_and_webhooks_never_name_the_person(planted) -> None:
    notify.tick(clock.now())
    bodies = [f"{m.subject}\n{m.body}" for m in mail.outbox]
    assert bodies, "somebody was told of the cases"
    assert any("apply gate_user" in b for b in bodies)  # the hand-over, masked in the mail
    payloads = [json.dumps(d.payload, sort_keys=True) for d in WebhookDelivery.objects.all()]
    assert payloads
    leaks = [leak for body in bodies for leak in named_in("mail", body, planted["cases"])]
    leaks += [leak for body in payloads for leak in named_in("webhook", body, planted["cases"])]
    assert not leaks, leaks


@pytest.mark.parametrize("role", list(MASKED_ROLES))
def test_a_refused_duplicate_says_only_what_the_caller_may_know(role, planted) -> None:
    """The intake submits: a duplicate is refused without the case's id, status or target, and reads
    the same whichever open case it met. Support may not submit: refused the same for the right guess
    and the wrong one."""
    user = reader(role)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.issue(user, name='intake', scope='decide')}")

    def submit(target: str) -> tuple[int, str]:
        got = api.post("/api/v1/deletions", {"target": target}, content_type="application/json")
        return got.status_code, got.content.decode()

    if role == "support":
        assert submit(MARKER) == submit(f"demo:{WRONG_ACCOUNT}")
        assert submit(MARKER)[0] == 403
        return
    status, said = submit(MARKER)
    assert status == 409, said
    never_named("duplicate refusal", said, planted["cases"])
    open_case = next(c for c in planted["cases"] if c.status == "submitted")
    assert str(open_case.id) not in said and "submitted" not in said
    assert submit(planted["other"].target) == (status, said)
    # Those who see targets keep the details.
    operator = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.issue(named('operator-a').user, name='t', scope='decide')}")
    full = operator.post("/api/v1/deletions", {"target": MARKER}, content_type="application/json")
    assert full.status_code == 409 and MARKER in full.content.decode() and str(open_case.id) in full.content.decode()


def test_staff_in_no_group_are_refused_alike_for_any_guess(planted, still) -> None:
    """Staff in no group see what support sees (`core.access`) but hold no view permission: every
    face refuses them before reading a case, in the same words for the right and the wrong guess."""
    web = Client()
    web.force_login(User.objects.create_user("reader-none", is_staff=True))
    for right, wrong in GUESSES:
        for url in (reverse(f"{ADMIN}_changelist"), reverse(f"{ADMIN}_export")):
            answers = [web.get(url, {"q": guess}) for guess in (right, wrong)]
            assert [a.status_code for a in answers] == [403, 403]
            assert same(answers[0].content.decode(), right) == same(answers[1].content.decode(), wrong)


def test_the_masked_form_finds_exactly_the_targets_shown_so_and_free_text_masks_the_person() -> None:
    """`mask_pattern` (the masked reader's search, run by PostgreSQL over the upper-cased targets) holds
    a target exactly when `mask` shows it as the term; `mask_in` masks the target and its account."""
    targets = [MARKER, BY_HAND, f"demo:{WRONG_ACCOUNT}", "demo:bob", "demo:", "demo:zz:om", "a:b:zzxom", "zzabcom"]
    for shown in {access.mask(t) for t in targets} | {"demo:zz...om", "zz…", "demo:z…om", "…"}:
        pattern = access.mask_pattern(shown)
        for t in targets:
            same_mask = access.mask(t).upper() == shown.replace("...", "…").upper()
            assert bool(pattern and re.fullmatch(pattern, t.upper())) == same_mask, (shown, t)
    assert access.mask_pattern(MARKER) is None and access.mask_pattern(ACCOUNT) is None
    assert access.mask_in(f"{SAID}; {MARKER}", BY_HAND) == "customer zz…om wrote in (ticket 4410); demo:zz…om"
    assert access.mask_in(STOP, MARKER) == "zz…om asked us to stop (ticket 4411)"


@pytest.mark.parametrize("role", list(MASKED_ROLES))
def test_a_masked_reader_cannot_sort_by_what_the_mask_hides(role, planted) -> None:
    def target_header(user: User) -> str:
        web = Client()
        web.force_login(user)
        listed = web.get(reverse(f"{ADMIN}_changelist")).content.decode()
        return listed.split('class="column-shown_target')[1].split("</th>")[0]

    # The order of masked rows would tell the characters the mask hides: no sorting by it for them.
    header = target_header(reader(role))
    assert "<span>Target</span>" in header and "?o=" not in header, header
