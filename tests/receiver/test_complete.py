"""Complete, or not called complete, as a property of both sample applications: hypothesis generates
the people (the samples' Faker seeds, how many, which of them are deleted and in what order); each is
deleted as the receiver applies it, and then an independent walk of the database (information_schema's
foreign keys, every text column) finds nothing of them but what the file keeps or anonymizes, and a
dump finds every other person's rows byte for byte as they were."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from receiver.dataset import catalog, compile
from samples.forum.seed import seed as seed_forum
from samples.shop.seed import seed as seed_shop
from tests.conftest import ROOT
from tests.receiver import completeness as walk

pytestmark = [pytest.mark.django_db(transaction=True)]

SAMPLES: dict[str, tuple[Callable[..., list[str]], Path, dict[str, int]]] = {
    "forum": (seed_forum, ROOT / "samples" / "forum" / "dataset.yaml", {"communities": 4}),
    "shop": (seed_shop, ROOT / "samples" / "shop" / "dataset.yaml", {"organisations": 4}),
}


def _installed(url: str, dataset: Path) -> Any:
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
        compiled = compile.check(compile.load(dataset), catalog.read(cur))
        cur.execute(compile.install_sql(compiled))
    return compiled


@pytest.mark.parametrize("sample", sorted(SAMPLES))
@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a failure is reported as found: shrinking a database takes minutes
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**16),
    people=st.integers(8, 24),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
)
def test_a_deleted_person_leaves_only_what_the_file_keeps_and_nobody_elses_rows_change(
    sample: str, seed: int, people: int, picks: list[int]
) -> None:
    make, dataset, sizes = SAMPLES[sample]
    spec = walk.rules(dataset)
    pt, key = spec["person"]["table"], spec["person"]["key"]
    with walk.scratch_database(sample) as url:
        with psycopg.connect(url) as conn:
            handles = make(conn, people=people, seed=seed, **sizes)
        compiled = _installed(url, dataset)
        chosen = list(dict.fromkeys(handles[p % len(handles)] for p in picks))
        with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cur:
            keys = walk.foreign_keys(cur)
            pk = compiled.person_pk
            direct = {k.table: k.columns for k in keys if k.parent == pt}
            for handle in chosen:
                cur.execute(f'SELECT to_jsonb(u) FROM "{pt}" u WHERE "{key}" = %s', [handle])
                (me,) = cur.fetchone() or (None,)
                person = me[pk]
                before = walk.dump(cur)
                mine_before = walk.reached(cur, pt, pk, person, keys)
                evidence = walk.delete_person(url, compiled, handle)
                after = walk.dump(cur)
                # Nothing of them remains but under a table the file keeps or anonymizes.
                left = [r for r in walk.reached(cur, pt, pk, person, keys) if walk.action(spec, r.first) == "delete"]
                assert not left, f"{handle}: {[(r.table, r.first) for r in left][:5]}"
                for value in {me[key], *(me[c] for c in ("email",) if me.get(c))}:
                    assert walk.text_holding(cur, value) == {}, f"{handle}: {value!r} is still held"
                # Every other person's rows are byte for byte what they were.
                reached_rows = {(r.table, r.row) for r in mine_before}
                someone_elses = {
                    (r.table, r.row)
                    for r in mine_before
                    if any(r.data.get(c) not in (None, person) for c in direct.get(r.table, ()))
                }
                # (their own row, and rows holding their e-mail without a key: theirs through an identity)
                own_row = walk.json.dumps(me, sort_keys=True)
                email = str(me.get("email", "")).lower()
                for table, rows in before.items():
                    theirs = {
                        row
                        for row in rows
                        if ((table, row) not in reached_rows or (table, row) in someone_elses)
                        and not (table == pt and row == own_row)
                        and not (email and f'"{email}"' in row.lower())
                    }
                    changed = theirs - after[table]
                    assert not changed, f"{handle}: {len(changed)} of others' rows of {table} changed"
                # The evidence counts what the tables lost, and the last effect walked the catalog.
                for table in {t for e in evidence for t in e.get("tables", {})}:
                    counted = sum(e["tables"][table]["changed"] for e in evidence if table in e.get("tables", {}))
                    assert counted == len(before[table] - after[table]), f"{handle}: {table}"
                assert evidence[-1]["catalog_walk"]["foreign_key_paths"] >= len(direct)
                assert all(r["rule"] in ("keep", "anonymize") for r in evidence[-1].get("remains", {}).values())
