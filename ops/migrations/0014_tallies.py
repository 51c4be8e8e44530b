"""Tallies for `/metrics`, kept by the database as things happen: a trigger on each counted table
appends one event row per change in the change's own transaction (insert-only, so concurrent
writers never wait on each other and no writer of ours can forget a count), and a scrape folds
the events into `ops_tallies`. The existing rows are counted once here, under locks, so the
tallies start equal to the tables.

The stage duration buckets are `ops_duration_buckets()`, here and nowhere else: the trigger
files each completed attempt under the first bound it fits and `/metrics` reads the bounds back.
"""

from django.db import migrations, models

BUCKETS = """
CREATE OR REPLACE FUNCTION ops_duration_buckets() RETURNS numeric[] AS $$
    SELECT ARRAY[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0]
$$ LANGUAGE sql IMMUTABLE;

CREATE OR REPLACE FUNCTION ops_duration_bucket(seconds double precision) RETURNS text AS $$
    SELECT COALESCE((SELECT b::text FROM unnest(ops_duration_buckets()) b WHERE seconds <= b ORDER BY b LIMIT 1),
                    '+Inf')
$$ LANGUAGE sql IMMUTABLE;
"""

# A gauge of rows by state: +1 on insert, -1/+1 on a change of state, -1 on delete.
STATE = """
CREATE OR REPLACE FUNCTION ops_tally_state() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ops_tally_events (metric, label, n, total) VALUES (TG_ARGV[0], NEW.status, 1, 0);
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO ops_tally_events (metric, label, n, total)
        VALUES (TG_ARGV[0], OLD.status, -1, 0), (TG_ARGV[0], NEW.status, 1, 0);
    ELSE
        INSERT INTO ops_tally_events (metric, label, n, total) VALUES (TG_ARGV[0], OLD.status, -1, 0);
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

# Stage attempts by stage and outcome (an attempt moves from running to its outcome; forgetting
# old attempts by retention is not an event, so nothing is taken off), and each completed
# attempt's duration.
ATTEMPT = """
CREATE OR REPLACE FUNCTION ops_tally_attempt() RETURNS trigger AS $$
DECLARE
    stage text;
BEGIN
    SELECT s.stage INTO stage FROM entity_deletion_stage_history s WHERE s.id = NEW.stage_id;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO ops_tally_events (metric, label, n, total) VALUES ('stage_attempts', stage || ':' || NEW.outcome, 1, 0);
    ELSIF NEW.outcome = 'completed' AND NEW.finished_at IS NOT NULL THEN
        INSERT INTO ops_tally_events (metric, label, n, total)
        VALUES ('stage_attempts', stage || ':' || OLD.outcome, -1, 0),
               ('stage_attempts', stage || ':' || NEW.outcome, 1, 0),
               ('stage_duration', ops_duration_bucket(EXTRACT(EPOCH FROM NEW.finished_at - NEW.started_at)::float8), 1,
                EXTRACT(EPOCH FROM NEW.finished_at - NEW.started_at)::float8);
    ELSE
        INSERT INTO ops_tally_events (metric, label, n, total)
        VALUES ('stage_attempts', stage || ':' || OLD.outcome, -1, 0), ('stage_attempts', stage || ':' || NEW.outcome, 1, 0);
    END IF;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

# One occurrence (a refusal at a boundary): the trigger's WHEN picks the rows.
EVENT = """
CREATE OR REPLACE FUNCTION ops_tally_event() RETURNS trigger AS $$
BEGIN
    INSERT INTO ops_tally_events (metric, label, n, total) VALUES (TG_ARGV[0], TG_ARGV[1], 1, 0);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

STATES = {
    "deletion_requests": "entity_deletion_requests",
    "retirement_requests": "retirements_retirementrequest",
    "notifications": "ops_notifications",
    "notice_slots": "retirements_noticeslot",
}
REFUSALS = {
    "deletion": ("entity_deletion_decisions", "boundary_refused"),
    "retirement": ("retirements_decision", "purge_refused"),
}
ATTEMPTS = "entity_deletion_stage_attempts"
LOCKED = [*STATES.values(), ATTEMPTS, *(table for table, _ in REFUSALS.values())]


def _create() -> list[str]:
    statements = [BUCKETS, STATE, ATTEMPT, EVENT]
    for metric, table in STATES.items():
        statements += [
            f"CREATE TRIGGER ops_tally_new AFTER INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ops_tally_state('{metric}')",
            f"CREATE TRIGGER ops_tally_moved AFTER UPDATE OF status ON {table} "
            f"FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION ops_tally_state('{metric}')",
            f"CREATE TRIGGER ops_tally_gone AFTER DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION ops_tally_state('{metric}')",
        ]
    statements += [
        f"CREATE TRIGGER ops_tally_new AFTER INSERT ON {ATTEMPTS} FOR EACH ROW EXECUTE FUNCTION ops_tally_attempt()",
        f"CREATE TRIGGER ops_tally_moved AFTER UPDATE OF outcome ON {ATTEMPTS} "
        "FOR EACH ROW WHEN (OLD.outcome IS DISTINCT FROM NEW.outcome) EXECUTE FUNCTION ops_tally_attempt()",
    ]
    for workflow, (table, action) in REFUSALS.items():
        statements.append(
            f"CREATE TRIGGER ops_tally_refused AFTER INSERT ON {table} FOR EACH ROW "
            f"WHEN (NEW.action = '{action}') EXECUTE FUNCTION ops_tally_event('boundary_refusals', '{workflow}')"
        )
    # What is there already, counted once; the locks keep a writer from slipping between the
    # count and the triggers (the migration's transaction holds them to its commit).
    statements.append(_recount())
    statements.append(f"LOCK TABLE {', '.join(LOCKED)} IN SHARE ROW EXCLUSIVE MODE")
    statements.append("SELECT ops_tally_recount()")
    return statements


def _recount() -> str:
    """`ops_tally_recount()`: every tally counted again from the tables (the events folded in are
    dropped), for this migration and for a bulk load written with the triggers off (the bench's
    million cases)."""
    counts = [
        f"INSERT INTO ops_tallies (metric, label, n, total) SELECT '{metric}', status, count(*), 0 "
        f"FROM {table} GROUP BY status;"
        for metric, table in STATES.items()
    ]
    counts += [
        "INSERT INTO ops_tallies (metric, label, n, total) SELECT 'stage_attempts', s.stage || ':' || a.outcome, "
        f"count(*), 0 FROM {ATTEMPTS} a JOIN entity_deletion_stage_history s ON s.id = a.stage_id GROUP BY 2;",
        "INSERT INTO ops_tallies (metric, label, n, total) SELECT 'stage_duration', "
        "ops_duration_bucket(EXTRACT(EPOCH FROM finished_at - started_at)::float8), count(*), "
        "sum(EXTRACT(EPOCH FROM finished_at - started_at)::float8) "
        f"FROM {ATTEMPTS} WHERE outcome = 'completed' AND finished_at IS NOT NULL GROUP BY 2;",
    ]
    counts += [
        f"INSERT INTO ops_tallies (metric, label, n, total) SELECT 'boundary_refusals', '{workflow}', count(*), 0 "
        f"FROM {table} WHERE action = '{action}';"
        for workflow, (table, action) in REFUSALS.items()
    ]
    body = "\n    ".join(counts)
    return f"""
CREATE OR REPLACE FUNCTION ops_tally_recount() RETURNS void AS $$
BEGIN
    DELETE FROM ops_tally_events;
    DELETE FROM ops_tallies;
    {body}
END
$$ LANGUAGE plpgsql;
"""


def _drop() -> list[str]:
    drops = []
    for table in [*STATES.values(), ATTEMPTS]:
        drops += [f"DROP TRIGGER IF EXISTS ops_tally_{kind} ON {table}" for kind in ("new", "moved", "gone")]
    drops += [f"DROP TRIGGER IF EXISTS ops_tally_refused ON {table}" for table, _ in REFUSALS.values()]
    functions = (
        "ops_tally_recount()",
        "ops_tally_state()",
        "ops_tally_attempt()",
        "ops_tally_event()",
        "ops_duration_bucket(double precision)",
        "ops_duration_buckets()",
    )
    return [*drops, *(f"DROP FUNCTION IF EXISTS {f}" for f in functions)]


class Migration(migrations.Migration):
    dependencies = [
        ("ops", "0013_intake_group"),
        ("deletions", "0018_list_sorts_and_filters"),
        ("retirements", "0012_list_sorts_and_filters"),
    ]

    operations = [
        migrations.CreateModel(
            name="TallyEvent",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("metric", models.CharField(max_length=40)),
                ("label", models.CharField(max_length=120)),
                ("n", models.BigIntegerField()),
                ("total", models.FloatField(default=0)),
            ],
            options={
                "db_table": "ops_tally_events",
            },
        ),
        migrations.CreateModel(
            name="Tally",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("metric", models.CharField(max_length=40)),
                ("label", models.CharField(max_length=120)),
                ("n", models.BigIntegerField(default=0)),
                (
                    "total",
                    models.FloatField(default=0, help_text="a sum kept beside the count (seconds, for a histogram)"),
                ),
            ],
            options={
                "db_table": "ops_tallies",
                "constraints": [models.UniqueConstraint(fields=("metric", "label"), name="one_tally_per_label")],
            },
        ),
        migrations.RunSQL(_create(), _drop()),
    ]
