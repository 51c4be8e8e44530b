"""Search by target text and by a decision's reason (a ticket reference, a requester's words) is
indexed: trigram GIN indexes on the expressions Django's icontains compares."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("deletions", "0014_operator_records")]

    operations = [
        migrations.RunSQL("CREATE EXTENSION IF NOT EXISTS pg_trgm", migrations.RunSQL.noop),
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS deletion_target_trgm ON entity_deletion_requests "
            "USING gin ((UPPER(target::text)) gin_trgm_ops)",
            "DROP INDEX IF EXISTS deletion_target_trgm",
        ),
        migrations.RunSQL(  # the requester, as iexact compares it
            "CREATE INDEX IF NOT EXISTS deletion_requester_upper ON entity_deletion_requests "
            "((UPPER(requested_by::text)))",
            "DROP INDEX IF EXISTS deletion_requester_upper",
        ),
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS deletion_decision_reason_trgm ON entity_deletion_decisions "
            "USING gin ((UPPER(reason::text)) gin_trgm_ops)",
            "DROP INDEX IF EXISTS deletion_decision_reason_trgm",
        ),
    ]
