-- The retention job's writes on a closed deletion case (ops.retention decides which and when).
-- Each runs in the job's own transaction, with its setting on: the evidence triggers allow these
-- deletions and no other.

-- name: erase_case
-- Everything of a closed case, its tombstone already written: attempts, lease events, alarms,
-- withdrawals, operator records, decisions, approvals, stages, then the request.
WITH req AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND status IN ('completed', 'cancelled')
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
), decisions AS (
    DELETE FROM entity_deletion_decisions d USING req WHERE d.request_id = req.id RETURNING d.id
), approvals AS (
    DELETE FROM entity_deletion_approvals ap USING req WHERE ap.request_id = req.id RETURNING ap.id
), stages AS (
    DELETE FROM entity_deletion_stage_history s USING req WHERE s.request_id = req.id RETURNING s.id
), request AS (
    DELETE FROM entity_deletion_requests r USING req WHERE r.id = req.id RETURNING r.id
)
SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM stages), (SELECT count(*) FROM approvals),
       (SELECT count(*) FROM decisions), (SELECT count(*) FROM attempts) + (SELECT count(*) FROM events),
       (SELECT count(*) FROM alarms) + (SELECT count(*) FROM withdrawals) + (SELECT count(*) FROM records)

-- name: drop_lease_history
-- A closed case's lease events and attempts, past their own period.
WITH req AS (
    SELECT id FROM entity_deletion_requests WHERE id = %(request_id)s AND status IN ('completed', 'cancelled')
), attempts AS (
    DELETE FROM entity_deletion_stage_attempts a USING req WHERE a.request_id = req.id RETURNING a.id
), events AS (
    DELETE FROM entity_deletion_lease_events e USING req WHERE e.request_id = req.id RETURNING e.id
)
SELECT (SELECT count(*) FROM attempts) + (SELECT count(*) FROM events)

-- name: drop_evidence
-- A closed case's copies of the target system's evidence (each stage's result), past their period.
UPDATE entity_deletion_stage_history s SET metadata_json = s.metadata_json - 'result'
FROM entity_deletion_requests r
WHERE s.request_id = r.id AND r.id = %(request_id)s AND r.status IN ('completed', 'cancelled')
  AND s.metadata_json ? 'result'
