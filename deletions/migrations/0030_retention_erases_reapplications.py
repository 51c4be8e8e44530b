"""Retention reaches the re-applications too (issue 53): a closed case past its period is erased with
the re-applications of its effects (`deletions_erase_case`, counted with the case's other rows), and
its evidence dropped with theirs (`deletions_drop_evidence`: a re-application's row is its evidence).
Without this, the foreign key from `entity_deletion_reapplications` would refuse to erase a case whose
effects were re-applied after a restore."""

from django.db import migrations

ERASE = """
CREATE OR REPLACE FUNCTION deletions_erase_case(one_case uuid) RETURNS jsonb LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH req AS (
    SELECT id FROM entity_deletion_requests WHERE id = one_case AND status IN ('completed', 'cancelled')
), attempts AS (
    DELETE FROM entity_deletion_stage_attempts a USING req WHERE a.request_id = req.id RETURNING a.id
), events AS (
    DELETE FROM entity_deletion_lease_events e USING req WHERE e.request_id = req.id RETURNING e.id
), alarms AS (
    DELETE FROM entity_deletion_alarms al USING req WHERE al.request_id = req.id RETURNING al.id
), withdrawals AS (
    DELETE FROM entity_deletion_authority_withdrawals w USING req WHERE w.request_id = req.id RETURNING w.id
), records AS (
    DELETE FROM entity_deletion_operator_records o USING req WHERE o.request_id = req.id RETURNING o.id
), reapplied AS (
    DELETE FROM entity_deletion_reapplications ra USING req WHERE ra.request_id = req.id RETURNING ra.id
), decisions AS (
    DELETE FROM entity_deletion_decisions d USING req WHERE d.request_id = req.id RETURNING d.id
), approvals AS (
    DELETE FROM entity_deletion_approvals ap USING req WHERE ap.request_id = req.id RETURNING ap.id
), stages AS (
    DELETE FROM entity_deletion_stage_history s USING req WHERE s.request_id = req.id RETURNING s.id
), request AS (
    DELETE FROM entity_deletion_requests r USING req WHERE r.id = req.id RETURNING r.id
)
SELECT jsonb_build_object(
    'requests', (SELECT count(*) FROM request), 'stages', (SELECT count(*) FROM stages),
    'approvals', (SELECT count(*) FROM approvals), 'decisions', (SELECT count(*) FROM decisions),
    'lease_history', (SELECT count(*) FROM attempts) + (SELECT count(*) FROM events),
    'other', (SELECT count(*) FROM alarms) + (SELECT count(*) FROM withdrawals) + (SELECT count(*) FROM records)
        + (SELECT count(*) FROM reapplied)
)
$$;

CREATE OR REPLACE FUNCTION deletions_drop_evidence(one_case uuid) RETURNS bigint LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH req AS (
    SELECT id FROM entity_deletion_requests WHERE id = one_case AND status IN ('completed', 'cancelled')
), dropped AS (
    UPDATE entity_deletion_stage_history s SET metadata_json = s.metadata_json - 'result'
    FROM req WHERE s.request_id = req.id AND s.metadata_json ? 'result'
    RETURNING s.id
), reapplied AS (
    DELETE FROM entity_deletion_reapplications ra USING req WHERE ra.request_id = req.id RETURNING ra.id
)
SELECT (SELECT count(*) FROM dropped) + (SELECT count(*) FROM reapplied)
$$;

REVOKE ALL ON FUNCTION deletions_erase_case(uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION deletions_drop_evidence(uuid) FROM PUBLIC;
"""

# Back to 0027's: without the re-applications.
UNERASE = ERASE.split("CREATE OR REPLACE FUNCTION deletions_drop_evidence")[0].replace(
    """), reapplied AS (
    DELETE FROM entity_deletion_reapplications ra USING req WHERE ra.request_id = req.id RETURNING ra.id
), decisions AS (""",
    "), decisions AS (",
).replace("\n        + (SELECT count(*) FROM reapplied)", "")
UNERASE += """
CREATE OR REPLACE FUNCTION deletions_drop_evidence(one_case uuid) RETURNS bigint LANGUAGE sql
SET search_path = pg_catalog, public, pg_temp AS $$
WITH dropped AS (
    UPDATE entity_deletion_stage_history s SET metadata_json = s.metadata_json - 'result'
    FROM entity_deletion_requests r
    WHERE s.request_id = r.id AND r.id = one_case AND r.status IN ('completed', 'cancelled')
      AND s.metadata_json ? 'result'
    RETURNING s.id
)
SELECT count(*) FROM dropped
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("deletions", "0029_reapplied_after_restore")]

    operations = [migrations.RunSQL(ERASE, UNERASE)]
