"""The dataset receiver on the second sample application (samples/shop: composite keys, a partitioned
table, a self-referencing thread, tables in no shop, an e-mail held without a key, invoices kept by law,
people who left shops): mistakes in the file refused at `check` in one line, a rehearsal that changes
nothing, and deletions through the receiver as its own process that complete only when nothing of the
person remains but what the file keeps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from core import clock
from core.authority import named
from deletions import proof, targets
from deletions.models import DeletionRequest, StageHistory
from deletions.services import deletion_approve, deletion_submit
from samples.shop.seed import seed
from tests.conftest import ROOT, run_command
from tests.receiver.completeness import dump, scratch_database
from tests.receiver.conftest import Receiver, free_port
from tests.receiver.test_dataset import receiver_cli, rows

pytestmark = [pytest.mark.django_db(transaction=True)]
DATASET = ROOT / "samples" / "shop" / "dataset.yaml"


@pytest.fixture
def shop() -> Iterator[tuple[str, list[str]]]:
    """A fresh shop database, seeded: its URL and the handles (the first has every shape)."""
    with scratch_database("shop") as url:
        with psycopg.connect(url) as conn:
            handles = seed(conn, people=30, organisations=4, seed=11)
        yield url, handles


def _installed(url: str) -> None:
    ran = receiver_cli(url, "install", str(DATASET))
    assert ran.returncode == 0 and "installed" in ran.stdout, ran.stderr


def _nothing_installed(url: str) -> bool:
    return rows(url, "SELECT count(*) FROM pg_namespace WHERE nspname = 'receiver'") == [(0,)]


_text = DATASET.read_text()
PERSON_ACTION = _text[_text.index("  action:                      # the account itself") : _text.index("identities:")]
BAD = [
    # (what is replaced in the file, by what, what the one line must say)
    (
        "  sessions:\n    person: account_id\n    action: delete\n",
        "",
        "tables.sessions: sessions reaches accounts directly",
    ),
    (
        "  invoice_lines:",
        "  invoice_linez:",
        "tables.invoice_linez: no table invoice_linez",
    ),
    ("      birth_date: null", '      birth_date: "someday"', "person.action: accounts.birth_date is date"),
    ("        ip: null\n", '        ip: "somewhere"\n', "tables.audit_log.action: audit_log.ip is inet"),
    (
        '      status: "erased"',
        '      status: "gone"',
        "person.action: breaks the CHECK constraint accounts_status_check",
    ),
    ("      email: tombstone", '      email: "erased@example.com"', "accounts_email_lower (an expression index)"),
    ('      settings: "{}"', '      settings: "{not json"', "person.action: accounts.settings is jsonb"),
    (
        '      anonymize:\n        author_id: null\n        body: "[deleted]"',
        "      delete",
        "tables.comments: ",
    ),
    (PERSON_ACTION, "  action: delete\n", "person.action: the person's own row is anonymized, never deleted"),
    (
        "    anonymize:\n        author_id: null\n        title:",
        "    anonymize:\n        rating: tombstone\n        title:",
        "tables.reviews.action: reviews.rating is smallint: a tombstone",
    ),
]


@pytest.mark.parametrize("old, new, says", BAD, ids=[b[2][:40] for b in BAD])
def test_check_refuses_each_mistake_in_one_line_naming_the_entry_and_installs_nothing(
    shop: tuple[str, list[str]], tmp_path: Path, old: str, new: str, says: str
) -> None:
    url, _ = shop
    text = DATASET.read_text()
    assert old in text, old
    bad = tmp_path / "dataset.yaml"
    bad.write_text(text.replace(old, new, 1))
    for command in ("check", "install"):
        ran = receiver_cli(url, command, str(bad))
        assert ran.returncode == 1 and ran.stderr.count("\n") == 1 and ran.stderr.startswith("refused: "), ran.stderr
        assert says in ran.stderr, ran.stderr
    assert _nothing_installed(url)


def test_a_table_two_keys_away_is_named_or_refused(shop: tuple[str, list[str]], tmp_path: Path) -> None:
    url, _ = shop
    text = DATASET.read_text()
    start = text.index("  invoice_lines:")
    bad = tmp_path / "dataset.yaml"
    bad.write_text(text[:start] + text[text.index("  reviews:", start) :])
    ran = receiver_cli(url, "check", str(bad))
    assert ran.returncode == 1 and ran.stderr.count("\n") == 1, ran.stderr
    assert "tables.invoice_lines: invoice_lines reaches accounts 2 keys away" in ran.stderr
    assert "invoice_lines.invoice_id -> invoices then invoices.customer_id -> accounts" in ran.stderr


def test_the_rehearsal_runs_the_deletion_for_real_people_and_changes_nothing(shop: tuple[str, list[str]]) -> None:
    url, _ = shop
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        before = dump(cur)
    ran = receiver_cli(url, "check", str(DATASET), "--rehearse", "4")
    assert ran.returncode == 0, ran.stderr
    said = ran.stdout
    assert "rehearsed for 4 people (rolled back; nothing changed)" in said
    for table in ("orders", "order_items", "events", "favourites", "addresses"):
        assert f"  {table}: " in said and " deleted" in said.split(f"  {table}: ")[1].splitlines()[0], said
    assert "  invoices: " in said and " kept" in said.split("  invoices: ")[1].splitlines()[0]
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        assert dump(cur) == before
    assert _nothing_installed(url)


@pytest.fixture
def served(shop: tuple[str, list[str]], settings: Any) -> Iterator[tuple[str, list[str], Receiver]]:
    url, handles = shop
    _installed(url)
    settings.RECEIVER_IN_PROCESS = ""
    r = Receiver(port=free_port())
    r.start(RECEIVER_DATABASE_URL=url, RECEIVER_DATASET=str(DATASET), RECEIVER_LOCK_TIMEOUT_MS="1500")
    targets.register(name="shop", prefix="shop:", base_url=r.url, keys={r.key_id: r.public()})
    yield url, handles, r
    r.stop()
    if r.log is not None:
        r.log.close()


def _person(url: str, handle: str) -> int:
    return int(rows(url, "SELECT id FROM accounts WHERE handle = %(h)s", h=handle)[0][0])


def _submitted_and_approved(handle: str) -> DeletionRequest:
    req = deletion_submit(target=f"shop:{handle}", actor=named("operator-a"), reason="shop sample")
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    return req


def test_a_shop_deletion_visits_every_shop_of_theirs_and_their_own_records_last_and_proves_what_is_kept(
    served: tuple[str, list[str], Receiver],
) -> None:
    url, handles, r = served
    handle = handles[0]
    uid = _person(url, handle)
    left = rows(
        url,
        "SELECT DISTINCT o.org_id FROM orders o WHERE o.customer_id = %(u)s AND NOT EXISTS "
        "(SELECT 1 FROM memberships m WHERE m.account_id = %(u)s AND m.org_id = o.org_id)",
        u=uid,
    )
    assert left, "the sample's first account has orders in a shop it left"
    req = deletion_submit(target=f"shop:{handle}", actor=named("operator-a"), reason="shop sample")
    roles = [c["role"] for c in req.inventory_json["communities"]]
    assert roles[-1] == "own_records" and "not_a_member" in roles, roles
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err + r.logged()
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    for table, column in (("orders", "customer_id"), ("events", "account_id"), ("favourites", "account_id")):
        assert rows(url, f"SELECT count(*) FROM {table} WHERE {column} = %(u)s", u=uid) == [(0,)], table
    kept = rows(url, "SELECT count(*) FROM invoices WHERE customer_id = %(u)s", u=uid)[0][0]
    assert rows(url, "SELECT handle, status FROM accounts WHERE id = %(u)s", u=uid) == [(f"deleted-{uid}", "erased")]
    said = "\n".join(proof.lines(proof.of(req.id, clock.now())))
    assert "remains   invoices: " in said and "kept: Invoices are kept for 10 years" in said, said
    if kept:
        assert f"remains   invoices: {kept} reference(s)" in said
    last = StageHistory.objects.filter(request_id=req.id).order_by("-finished_at").first()
    assert last is not None and str(last.target_community_id) == req.inventory_json["communities"][-1]["id"]


def test_data_in_a_table_added_after_install_refuses_the_last_effect_and_the_case_is_never_completed(
    served: tuple[str, list[str], Receiver],
) -> None:
    url, handles, _ = served
    handle = handles[1]
    uid = _person(url, handle)
    req = _submitted_and_approved(handle)
    with psycopg.connect(url) as conn:  # the application ships a migration the dataset file does not know
        conn.execute("CREATE TABLE wishlists (id bigserial PRIMARY KEY, owner_id bigint REFERENCES accounts (id))")
        conn.execute("INSERT INTO wishlists (owner_id) VALUES (%s), (%s)", [uid, uid])
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 1, ran.out + ran.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_attention" and req.completed_at is None, req.status
    assert "data remains" in req.open_question and "wishlists" in req.open_question, req.open_question
    # Nothing of that last effect was applied: their row and their own records are as they were.
    assert rows(url, "SELECT handle FROM accounts WHERE id = %(u)s", u=uid) == [(handle,)]
    assert rows(url, "SELECT count(*) FROM wishlists WHERE owner_id = %(u)s", u=uid) == [(2,)]


def test_rules_changed_after_the_approval_send_the_case_back_to_review_before_anything_is_deleted(
    served: tuple[str, list[str], Receiver], tmp_path: Path
) -> None:
    url, handles, r = served
    handle = handles[0]
    uid = _person(url, handle)
    req = _submitted_and_approved(handle)
    before = rows(url, "SELECT count(*) FROM orders WHERE customer_id = %(u)s", u=uid)
    # The organisation changes its rules (sessions: delete -> keep) and installs them while the case waits.
    text = DATASET.read_text().replace("version: 1", "version: 2", 1)
    old = "  sessions:\n    person: account_id\n    action: delete\n"
    assert old in text
    changed = tmp_path / "dataset.yaml"
    changed.write_text(
        text.replace(old, "  sessions:\n    person: account_id\n    action: keep\n    reason: security logs, 90 days\n")
    )
    r.stop()
    ran = receiver_cli(url, "install", str(changed))
    assert ran.returncode == 0, ran.stderr
    r.start(RECEIVER_DATABASE_URL=url, RECEIVER_DATASET=str(changed))
    refused = run_command("run_deletion", str(req.id))
    assert refused.code == 1, refused.out + refused.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_review", (req.status, req.open_question)
    assert "the deletion rules changed: v1 → v2" in req.open_question, req.open_question
    assert rows(url, "SELECT count(*) FROM orders WHERE customer_id = %(u)s", u=uid) == before
    # Approved again, over a new preview read under the new rules, it completes under them alone.
    deletion_approve(request_id=req.id, actor=named("operator-b"), digest=req.inventory_digest)
    done = run_command("run_deletion", str(req.id))
    assert done.code == 0, done.err + r.logged()
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    versions = {
        s.metadata_json["result"].get("dataset_version")
        for s in StageHistory.objects.filter(request_id=req.id, status="completed")
    }
    assert versions == {2}, versions
    assert rows(url, "SELECT count(*) FROM orders WHERE customer_id = %(u)s", u=uid) == [(0,)]


def test_a_constraint_the_application_enforces_at_apply_is_refused_and_handed_to_a_person_naming_it(
    served: tuple[str, list[str], Receiver],
) -> None:
    url, handles, r = served
    handle = handles[0]
    req = _submitted_and_approved(handle)
    with psycopg.connect(url) as conn:  # added after install, so only the apply meets it
        conn.execute("ALTER TABLE reviews ADD CONSTRAINT reviews_title_stays CHECK (title <> '[deleted]') NOT VALID")
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 1, ran.out + ran.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_attention", (req.status, req.open_question)
    assert "reviews_title_stays" in req.open_question and "tables.reviews" in req.open_question, req.open_question
    assert "effect unknown" not in req.open_question
    assert "503" not in r.logged()


def test_a_lock_held_past_the_receivers_timeout_changes_nothing_raises_no_alarm_and_the_case_completes_after(
    served: tuple[str, list[str], Receiver],
) -> None:
    url, handles, r = served  # the receiver's lock timeout: 1.5 s
    handle = handles[2]
    uid = _person(url, handle)
    req = _submitted_and_approved(handle)
    with psycopg.connect(url) as app:  # the application holds the person's row in a long transaction
        app.execute("SELECT 1 FROM accounts WHERE id = %s FOR UPDATE", [uid])
        ran = run_command("run_deletion", str(req.id))
        app.rollback()
    assert ran.code == 1, ran.out + ran.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "retry_wait", (req.status, req.open_question)
    assert "effect unknown" not in (req.last_error or "") and not req.open_question, (req.last_error, req.open_question)
    assert "nothing changed" in (req.last_error or ""), req.last_error
    assert not req.alarms.filter(resolved_at__isnull=True).exists()
    assert rows(url, "SELECT count(*) FROM receiver.receiver_operations") == [(0,)]
    # The lock released and the retry due, the same operations go through and the case completes.
    from tests.support import force

    force(DeletionRequest.objects.filter(id=req.id), next_attempt_at=clock.now())
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 0, ran.err + r.logged()
    assert DeletionRequest.objects.get(id=req.id).status == "completed"
    assert not DeletionRequest.objects.get(id=req.id).alarms.filter(resolved_at__isnull=True).exists()


def _signed_grant(**fields: Any) -> str:
    from datetime import timedelta

    from core import grants

    payload = {
        "kind": "grant",
        "operation_id": "6a1d3c52-54cf-4f5b-8a8e-6f0c4f2a9a11",
        "request_id": "0b8e8a1e-0f57-4c5e-9a53-3c8f6d1f2b22",
        "action": "purge_db",
        "community_id": None,
        "target": "shop:nobody",
        "generation": 1,
        "executor": "test",
        "not_after": (clock.now() + timedelta(minutes=5)).isoformat(),
    }
    return grants.sign({k: v for k, v in {**payload, **fields}.items() if v != "-"})


BAD_CALLS: list[tuple[str, Any, int, str]] = [
    ("inventory", {"target": 5, "communities": 2}, 400, "'target'"),
    ("inventory", {"target": "shop:x"}, 400, "'communities'"),
    ("preview", {"target": "shop:x", "community_ids": [1]}, 400, "'community_ids'"),
    ("fence", {"request_id": "nope"}, 400, "'request_id'"),
    ("lookup", {"operation_id": 7}, 400, "'operation_id'"),
    ("apply", {"grant": 5}, 400, "'grant'"),
    ("apply", {"grant": "not-a-grant"}, 422, "grant refused"),
    ("apply", {"grant": lambda: _signed_grant(generation="-")}, 422, "'generation'"),
    ("apply", {"grant": lambda: _signed_grant(generation="1")}, 422, "'generation'"),
    ("apply", {"grant": lambda: _signed_grant(community_id=5)}, 422, "'community_id'"),
    ("apply", {"grant": lambda: _signed_grant(request_id="x")}, 422, "'request_id'"),
    ("apply", {"grant": lambda: _signed_grant(expected_versions={"a": "b"})}, 422, "'expected_versions'"),
    ("withdraw", {"withdrawal": 3}, 400, "'withdrawal'"),
    ("withdraw", {"withdrawal": lambda: _signed_grant(kind="withdrawal", epoch="-")}, 422, "'epoch'"),
    ("withdraw", {"withdrawal": lambda: _signed_grant(kind="withdrawal", epoch=1, request_id=4)}, 422, "'request_id'"),
]


def test_bad_signed_input_is_a_400_or_422_naming_the_field_and_writes_nothing(
    served: tuple[str, list[str], Receiver],
) -> None:
    import httpx

    url, _, r = served
    adapter = targets.for_target("shop:anyone")
    with httpx.Client() as client:
        for name, body, status, says in BAD_CALLS:
            sent = {k: (v() if callable(v) else v) for k, v in body.items()}
            answer = client.send(adapter.signed(name, sent))  # type: ignore[attr-defined]
            said = answer.json()
            assert answer.status_code == status, (name, body, answer.status_code, said)
            assert says in json.dumps(said), (name, said)
    assert rows(
        url,
        "SELECT (SELECT count(*) FROM receiver.receiver_operations), (SELECT count(*) FROM receiver.receiver_fences)",
    ) == [(0, 0)]
    assert "Traceback" not in r.logged(), r.logged()


def test_a_row_in_a_shop_the_approval_did_not_see_stops_the_gate_before_anything_is_deleted(
    served: tuple[str, list[str], Receiver],
) -> None:
    url, handles, _ = served
    handle = handles[3]
    uid = _person(url, handle)
    req = _submitted_and_approved(handle)
    seen = {int(c) for (c,) in rows(url, "SELECT x.out_place FROM receiver.places(%(u)s::bigint) x", u=uid)}
    other = rows(url, "SELECT id FROM organisations WHERE NOT (id = ANY(%(s)s)) ORDER BY id LIMIT 1", s=list(seen))
    assert other, "the sample has a shop this person has no rows in"
    with psycopg.connect(url) as conn:  # the person writes a review in a shop they were never in
        conn.execute(
            "INSERT INTO reviews (org_id, product_id, author_id, rating, title, body, created_at) "
            "SELECT %s, p.id, %s, 4, 'late', 'after approval', now() FROM products p WHERE p.org_id = %s LIMIT 1",
            [other[0][0], uid, other[0][0]],
        )
    ran = run_command("run_deletion", str(req.id))
    assert ran.code == 1, ran.out + ran.err
    req = DeletionRequest.objects.get(id=req.id)
    assert req.status == "needs_review" and "which the approval did not see" in req.open_question, req.open_question
    assert rows(url, "SELECT count(*) FROM receiver.receiver_operations") == [(0,)]
