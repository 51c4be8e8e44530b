"""Realistic marketplace data (Faker, seeded: the same every run): `python samples/shop/seed.py DATABASE_URL`.

Loads schema.sql into an empty database and fills it: accounts, shops (organisations) and memberships,
with people who left a shop (their membership row deleted, or kept as 'former') and people in no shop
at all; per shop orders and their items, invoices and their lines, reviews with replies by others,
product questions answered by others, support tickets by e-mail and an audit log; per account
addresses, sessions, favourites and events in every partition. The first account has every shape
(samples/shop/README.md): a current, a former and a left shop, others' replies and answers, events
in each year. Rows are built in Python and loaded with COPY (40 people: well under a second)."""

from __future__ import annotations

import random
import re
import sys
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from faker import Faker
from psycopg.types.json import Jsonb

SCHEMA = Path(__file__).with_name("schema.sql")

# The columns each table is loaded with, in load order (a table after the ones it references).
COLUMNS: dict[str, tuple[str, ...]] = {
    "accounts": ("id", "handle", "email", "name", "phone", "birth_date", "status", "settings", "created_at"),
    "organisations": ("id", "name", "slug", "plan", "created_at"),
    "memberships": ("account_id", "org_id", "role", "joined_at"),
    "products": ("id", "org_id", "sku", "name", "price_cents"),
    "orders": ("id", "org_id", "customer_id", "number", "status", "ship_to", "total_cents", "placed_at"),
    "order_items": ("order_id", "line_no", "product_id", "quantity", "unit_price_cents"),
    "invoices": (
        "id",
        "org_id",
        "customer_id",
        "number",
        "order_ref",
        "billing_name",
        "billing_address",
        "total_cents",
        "issued_at",
    ),
    "invoice_lines": ("invoice_id", "line_no", "description", "quantity", "amount_cents"),
    "reviews": ("id", "org_id", "product_id", "author_id", "rating", "title", "body", "created_at"),
    "review_replies": ("id", "review_id", "author_id", "body", "created_at"),
    "comments": ("id", "org_id", "product_id", "parent_id", "author_id", "body", "created_at"),
    "favourites": ("account_id", "product_id", "added_at"),
    "addresses": ("id", "account_id", "label", "line1", "city", "postcode", "country", "is_default"),
    "sessions": ("id", "account_id", "ip", "user_agent", "created_at", "last_seen_at"),
    "events": ("id", "account_id", "org_id", "happened_at", "kind", "payload"),
    "support_tickets": ("id", "org_id", "requester_email", "subject", "body", "status", "opened_at"),
    "audit_log": ("id", "org_id", "actor_id", "action", "ip", "details", "at"),
}
# Tables whose id is an identity column: its sequence is moved past the ids loaded here.
IDENTITY = [t for t, cols in COLUMNS.items() if cols[0] == "id" and t != "sessions"]

CURRENT, FORMER, LEFT = "current", "former", "left"  # a person's relation to a shop they have data in
START, END = datetime(2024, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)  # the events' partitions


@dataclass
class Shop:
    fake: Faker
    rng: random.Random
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=lambda: {t: [] for t in COLUMNS})
    people: list[dict[str, Any]] = field(default_factory=list)
    products: dict[int, list[tuple[int, str, int]]] = field(default_factory=dict)  # org -> (id, name, price)
    history: dict[tuple[int, int], str] = field(default_factory=dict)  # (account, org) -> CURRENT | FORMER | LEFT
    roles: dict[tuple[int, int], str] = field(default_factory=dict)  # current memberships' roles

    def add(self, table: str, *values: Any) -> int:
        """A row; its id when the table's first column is a generated one (1, 2, ...)."""
        rows = self.rows[table]
        if COLUMNS[table][0] == "id" and table != "sessions":
            values = (len(rows) + 1, *values)
        rows.append(values)
        return len(rows)

    def when(self, start: datetime = START, end: datetime = END) -> datetime:
        return start + timedelta(seconds=self.rng.randrange(int((end - start).total_seconds())))

    def ip(self) -> str:
        return self.fake.ipv4_public()


def _accounts(shop: Shop, people: int) -> None:
    fake, rng = shop.fake, shop.rng
    for i in range(people):
        first, last = fake.first_name(), fake.last_name()
        base = rng.choice([first + last, f"{first}.{last}", first[0] + last, f"{first}_{last[0]}"])
        handle = re.sub(r"[^a-z0-9_.]", "", base.lower())[:30] + str(i)
        # Capitals kept as people type them: the unique index is on lower(email).
        email = re.sub(r"[^A-Za-z0-9.]", "", f"{first}.{last}") + f"{i}@{fake.free_email_domain()}"
        phone = None if i % 4 == 3 else f"+{rng.choice(['1', '31', '33', '44', '49'])} {rng.randint(10**8, 10**9 - 1)}"
        birth = None if i % 3 == 2 else fake.date_between(date(1950, 1, 1), date(2006, 12, 31))
        settings = {
            "theme": rng.choice(["light", "dark"]),
            "newsletter": rng.random() < 0.4,
            "language": rng.choice(["en", "fr", "de", "nl"]),
        }
        status = "suspended" if i % 13 == 12 else "active"
        created = shop.when(datetime(2023, 1, 1, tzinfo=UTC), START)
        account = shop.add("accounts", handle, email, f"{first} {last}", phone, birth, status, Jsonb(settings), created)
        shop.people.append({"id": account, "handle": handle, "email": email, "name": f"{first} {last}"})


def _organisations(shop: Shop, organisations: int) -> None:
    fake, rng = shop.fake, shop.rng
    for _ in range(organisations):
        name = fake.unique.company()
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        org = shop.add(
            "organisations",
            name,
            slug,
            rng.choice(["free", "team", "business"]),
            shop.when(datetime(2022, 1, 1, tzinfo=UTC), START),
        )
        shop.products[org] = []
        for k in range(rng.randint(6, 10)):
            product_name = f"{fake.color_name()} {fake.word().title()}"
            price = rng.randint(300, 25_000)
            product = shop.add("products", org, f"{slug[:3].upper()}-{k + 1:04d}", product_name, price)
            shop.products[org].append((product, product_name, price))


def _memberships(shop: Shop, organisations: int) -> None:
    """Who has data in which shop, and whether they still belong there. One person in ten (never the
    first) is in no shop at all; the first is current in shop 1, former in shop 2 and left shop 3."""
    rng = shop.rng
    orgs = list(range(1, organisations + 1))
    for i, person in enumerate(shop.people):
        if i % 10 == 9:
            continue  # no shop at all: only their own addresses, sessions, favourites and events
        if i == 0:
            chosen = list(zip(orgs, [CURRENT, FORMER, LEFT], strict=False))
        else:
            kinds = rng.choices([CURRENT, FORMER, LEFT], weights=[6, 2, 2], k=len(orgs))
            chosen = list(zip(rng.sample(orgs, rng.randint(1, min(3, len(orgs)))), kinds, strict=False))
        for org, kind in chosen:
            shop.history[person["id"], org] = kind
    for org in orgs:  # every shop has an owner (a current member), and a few staff
        members = [a for (a, o), k in shop.history.items() if o == org and k == CURRENT]
        if not members:
            owner = rng.choice([p["id"] for i, p in enumerate(shop.people) if i % 10 != 9])
            shop.history[owner, org] = CURRENT
            members = [owner]
        for n, account in enumerate(rng.sample(members, len(members))):
            shop.roles[account, org] = "owner" if n == 0 else "staff" if n < 3 else "customer"
    for (account, org), kind in sorted(shop.history.items()):
        if kind == LEFT:
            continue  # their membership row was deleted when they left; their orders and reviews stay
        role = shop.roles[account, org] if kind == CURRENT else "former"
        shop.add("memberships", account, org, role, shop.when(datetime(2023, 1, 1, tzinfo=UTC), START))


def _orders(shop: Shop) -> None:
    """Orders with their items; an invoice (and its lines) for every paid one."""
    fake, rng = shop.fake, shop.rng
    numbers: dict[int, int] = {}
    people = {p["id"]: p for p in shop.people}
    for (account, org), kind in sorted(shop.history.items()):
        person = people[account]
        for _ in range(rng.randint(1, 3) if kind != CURRENT or account == 1 else rng.randint(0, 3)):
            numbers[org] = numbers.get(org, 0) + 1
            number = f"SO-{org:02d}-{numbers[org]:05d}"
            status = rng.choice(["cart", "paid", "shipped", "delivered", "delivered", "cancelled"])
            if account == 1:
                status = "delivered"
            lines = [
                (line_no, *rng.choice(shop.products[org]), rng.randint(1, 3)) for line_no in range(1, rng.randint(2, 5))
            ]
            total = sum(price * quantity for _, _, _, price, quantity in lines)
            address = f"{fake.street_address()}, {fake.postcode()} {fake.city()}"
            placed = shop.when(end=datetime(2026, 12, 1, tzinfo=UTC))
            order = shop.add("orders", org, account, number, status, f"{person['name']}, {address}", total, placed)
            for line_no, product, _, price, quantity in lines:
                shop.add("order_items", order, line_no, product, quantity, price)
            ip = shop.ip()
            shop.add("audit_log", org, account, "order.placed", ip, Jsonb({"order": number}), placed)
            if status in ("paid", "shipped", "delivered"):
                issued = placed + timedelta(hours=1)
                invoice = shop.add(
                    "invoices",
                    org,
                    account,
                    f"INV-{org:02d}-{numbers[org]:05d}",
                    number,
                    person["name"],
                    address,
                    total,
                    issued,
                )
                for line_no, _, product_name, price, quantity in lines:
                    shop.add("invoice_lines", invoice, line_no, product_name, quantity, price * quantity)


def _reviews(shop: Shop) -> None:
    """Reviews, then replies: each by someone else than the review's author (staff answering, other
    customers), and the first person's own replies under others' reviews."""
    fake, rng = shop.fake, shop.rng
    for (account, org), kind in sorted(shop.history.items()):
        for product, _, _ in rng.sample(
            shop.products[org], rng.randint(1 if kind != CURRENT or account == 1 else 0, 2)
        ):
            title, body = fake.sentence(nb_words=4).rstrip("."), fake.paragraph(nb_sentences=2)
            shop.add("reviews", org, product, account, rng.randint(1, 5), title, body, shop.when())
    repliers = {
        org: sorted(a for (a, o), k in shop.history.items() if o == org and k == CURRENT)
        for org in {o for _, o in shop.history}
    }
    mine_answered = False
    for review, org, _, author, *_, created in list(shop.rows["reviews"]):
        others = [a for a in repliers[org] if a != author]
        if not others or (rng.random() > 0.6 and author != 1):
            continue
        for replier in rng.sample(others, min(len(others), rng.randint(1, 2))):
            shop.add("review_replies", review, replier, fake.sentence(), created + timedelta(days=rng.randint(1, 30)))
        if author != 1 and not mine_answered and 1 in repliers[org]:
            shop.add("review_replies", review, 1, fake.sentence(), created + timedelta(days=31))
            mine_answered = True


def _comments(shop: Shop) -> None:
    """Questions on product pages, answered by others (parent_id), and some answers answered back."""
    fake, rng = shop.fake, shop.rng
    askers = sorted(shop.history.items())
    current = {
        org: sorted(a for (a, o), k in shop.history.items() if o == org and k == CURRENT)
        for org in {o for _, o in shop.history}
    }
    for (account, org), kind in askers:
        if kind == CURRENT and account != 1 and rng.random() < 0.5:
            continue
        product = rng.choice(shop.products[org])[0]
        asked = shop.when(end=datetime(2026, 11, 1, tzinfo=UTC))
        question = shop.add("comments", org, product, None, account, fake.sentence().replace(".", "?"), asked)
        others = [a for a in current[org] if a != account]
        for n, answerer in enumerate(rng.sample(others, min(len(others), rng.randint(1, 2)))):
            at = asked + timedelta(hours=n + 1)
            answer = shop.add("comments", org, product, question, answerer, fake.sentence(), at)
            if rng.random() < 0.3 or account == 1:  # the asker thanks the one who answered
                shop.add("comments", org, product, answer, account, "Thanks! " + fake.sentence(), at + timedelta(1))


def _tickets_and_audit(shop: Shop) -> None:
    """Support tickets by e-mail (some from guests with no account), staff actions and the shop's jobs."""
    fake, rng = shop.fake, shop.rng
    people = {p["id"]: p for p in shop.people}
    for (account, org), _ in sorted(shop.history.items()):
        if account == 1 or rng.random() < 0.3:
            subject, body = fake.sentence(nb_words=5).rstrip("."), fake.paragraph(nb_sentences=3)
            status = rng.choice(["open", "pending", "closed"])
            shop.add("support_tickets", org, people[account]["email"], subject, body, status, shop.when())
    for org in sorted(shop.products):
        for k in range(2):
            guest = f"guest.{org}.{k}@{fake.free_email_domain()}"
            subject, body = fake.sentence(nb_words=5).rstrip("."), fake.paragraph(nb_sentences=2)
            shop.add("support_tickets", org, guest, subject, body, "open", shop.when())
        shop.add("audit_log", org, None, "payout.sent", None, Jsonb({"cents": rng.randint(1000, 90000)}), shop.when())
    for (account, org), role in sorted(shop.roles.items()):
        if role in ("owner", "staff"):
            product = rng.choice(shop.products[org])[0]
            details = Jsonb({"product": product, "field": rng.choice(["price", "name", "stock"])})
            shop.add("audit_log", org, account, "product.updated", shop.ip(), details, shop.when())


def _own(shop: Shop) -> None:
    """What belongs to the account alone: addresses, sessions, favourites, events (org_id empty for
    what happened outside any shop); the first account has an event in each partition."""
    fake, rng = shop.fake, shop.rng
    all_products = [p for org in sorted(shop.products) for p, _, _ in shop.products[org]]
    for i, person in enumerate(shop.people):
        account = person["id"]
        for n in range(rng.randint(1 if i % 10 == 9 or i == 0 else 0, 3)):
            shop.add(
                "addresses",
                account,
                rng.choice(["home", "work", "parents"]),
                fake.street_address(),
                fake.city(),
                fake.postcode(),
                rng.choice(["NL", "FR", "DE", "GB", "US"]),
                n == 0,
            )
        for _ in range(rng.randint(0, 3) + (i == 0)):
            start = shop.when(end=datetime(2026, 12, 1, tzinfo=UTC))
            session = uuid.UUID(int=rng.getrandbits(128), version=4)
            shop.rows["sessions"].append(
                (session, account, shop.ip(), fake.user_agent(), start, start + timedelta(minutes=rng.randint(1, 600)))
            )
        for product in rng.sample(all_products, rng.randint(1 if i == 0 else 0, 5)):
            shop.add("favourites", account, product, shop.when())
        orgs = sorted(o for (a, o) in shop.history if a == account)
        years = [2024, 2025, 2026] if i == 0 else []
        for n in range(rng.randint(3, 9)):
            if n < len(years):
                at = shop.when(datetime(years[n], 1, 1, tzinfo=UTC), datetime(years[n] + 1, 1, 1, tzinfo=UTC))
            else:
                at = shop.when()
            org = rng.choice(orgs) if orgs and rng.random() < 0.7 else None
            kind = rng.choice(["login", "search", "page_view", "cart.add"])
            payload = {"path": f"/{kind.replace('.', '/')}", "ms": rng.randint(5, 900)}
            shop.add("events", account, org, at, kind, Jsonb(payload))


def seed(conn: Any, *, people: int = 40, organisations: int = 5, seed: int = 7) -> list[str]:
    """Create the schema and its rows; the handles, in creation order (the first has every shape when
    there are 3 organisations or more: current in the first, former in the second, left the third)."""
    if people < 1 or organisations < 1:
        raise ValueError("the shop needs at least 1 person and 1 organisation")
    fake = Faker()
    fake.seed_instance(seed)
    shop = Shop(fake, random.Random(seed))
    _accounts(shop, people)
    _organisations(shop, organisations)
    _memberships(shop, organisations)
    _orders(shop)
    _reviews(shop)
    _comments(shop)
    _tickets_and_audit(shop)
    _own(shop)
    with conn.cursor() as cur:
        cur.execute(SCHEMA.read_text())
        for table, columns in COLUMNS.items():
            with cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in shop.rows[table]:
                    copy.write_row(row)
        for table in IDENTITY:  # the application's next rows take the ids after ours
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), max(id)) FROM {table}")
    conn.commit()
    return [p["handle"] for p in shop.people]


if __name__ == "__main__":
    with psycopg.connect(sys.argv[1]) as connection:
        made = seed(connection)
    print(f"shop seeded: {len(made)} people, e.g. shop:{made[0]}")
