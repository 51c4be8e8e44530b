"""Every state change of a case becomes one delivery per active webhook subscriber, written by
the database in the same transaction as the change (whatever wrote it: a service, a worker, a
watcher), so no change is announced that did not commit and none is forgotten."""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION api_announce_case_change() RETURNS trigger AS $$
DECLARE
    kind text := TG_ARGV[0];
BEGIN
    INSERT INTO api_webhook_deliveries
        (id, subscriber_id, event, case_kind, case_id, payload, status, created_at, next_attempt_at, claimed_by,
         attempts, last_error)
    SELECT d.id, s.id, kind || '.' || NEW.status, kind, NEW.id,
           jsonb_build_object(
               'delivery_id', d.id, 'event', kind || '.' || NEW.status, 'case_kind', kind, 'case_id', NEW.id,
               'from', CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, 'to', NEW.status,
               'at', to_jsonb(clock_timestamp())),
           'pending', clock_timestamp(), clock_timestamp(), '', 0, ''
    FROM api_webhook_subscribers s CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id) d
    WHERE s.active;
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

TABLES = {"deletion": "entity_deletion_requests", "retirement": "retirements_retirementrequest"}


def _create() -> list[str]:
    statements = [FUNCTION]
    for kind, table in TABLES.items():
        statements += [
            f"CREATE TRIGGER api_announce_new_{kind} AFTER INSERT ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION api_announce_case_change('{kind}')",
            # Only a real change calls the function: the stage path's writes that keep the status cost nothing.
            f"CREATE TRIGGER api_announce_{kind} AFTER UPDATE OF status ON {table} "
            f"FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) "
            f"EXECUTE FUNCTION api_announce_case_change('{kind}')",
        ]
    return statements


def _drop() -> list[str]:
    drops = [f"DROP TRIGGER IF EXISTS api_announce_{kind} ON {table}" for kind, table in TABLES.items()]
    drops += [f"DROP TRIGGER IF EXISTS api_announce_new_{kind} ON {table}" for kind, table in TABLES.items()]
    return [*drops, "DROP FUNCTION IF EXISTS api_announce_case_change()"]


class Migration(migrations.Migration):
    dependencies = [
        ("api", "0001_initial"),
        ("deletions", "0017_evidence_deleted_only_by_retention"),
        ("retirements", "0011_evidence_deleted_only_by_retention"),
    ]
    operations = [migrations.RunSQL(_create(), _drop())]
