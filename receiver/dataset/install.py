"""`python -m receiver check | install DATASET`: the file checked against the application's catalog,
then (install) the receiver's objects created in one transaction of that database; a refusal names
the entry and installs nothing."""

from __future__ import annotations

from django.db import connections, transaction

from demo_target.router import ALIAS
from receiver.dataset import catalog, compile


def run(path: str, *, write: bool) -> str:
    data = compile.load(path)
    with connections[ALIAS].cursor() as cur:
        cat = catalog.read(cur)
    compiled = compile.check(data, cat)
    order = ", ".join(e.table for e in compiled.entries)
    unindexed = [
        f"{hop.table}.{hop.column}"
        for e in compiled.entries
        for hop in (*e.person, *e.community)
        if hop.column not in cat.tables[hop.table].indexed
    ]
    note = f"; paths through unindexed columns (each apply scans them): {', '.join(unindexed)}" if unindexed else ""
    if not write:
        return f"dataset {data['dataset']} v{data['version']}: checked; delete order {order}{note}"
    with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
        cur.execute(compile.install_sql(compiled))
    return f"dataset {data['dataset']} v{data['version']}: installed in schema receiver; delete order {order}{note}"
