-- The purge job's writes: its lease (a new generation each claim) and its outcome, fenced by the
-- job's owner and generation; the outcome writes job, workspace and request together, or nothing.

-- name: claim
UPDATE retirements_purgejob
SET lease_owner = %(owner)s, lease_generation = lease_generation + 1, lease_expires_at = %(expires)s
WHERE id = %(job_id)s AND status = 'queued' AND (lease_owner IS NULL OR lease_expires_at <= %(now)s)
RETURNING lease_generation

-- name: purged
-- The workspace is deleted, the job done and the request completed.
WITH job AS (
    UPDATE retirements_purgejob
    SET status = 'done', finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(job_id)s AND status = 'queued' AND lease_owner = %(owner)s AND lease_generation = %(generation)s
    RETURNING request_id
), request AS (
    UPDATE retirements_retirementrequest r
    SET status = 'completed', concluded_at = %(now)s, conclusion = %(conclusion)s, last_action = %(conclusion)s,
        updated_at = %(now)s
    FROM job WHERE r.id = job.request_id AND r.status = 'executing'
    RETURNING r.workspace_id
)
UPDATE retirements_workspace w SET lifecycle = 'deleted'
FROM request WHERE w.id = request.workspace_id AND w.lifecycle = 'deleting'
RETURNING w.id

-- name: refused
-- The receiving boundary refused for want of authority: nothing purged, a person must look: the
-- person on call holds it, never their own backup (`store.requests.cover`).
WITH job AS (
    UPDATE retirements_purgejob
    SET status = 'refused', refusal = %(rule)s, lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(job_id)s AND status = 'queued' AND lease_owner = %(owner)s AND lease_generation = %(generation)s
    RETURNING request_id
)
UPDATE retirements_retirementrequest r
SET last_action = %(action)s, owner_id = %(case_owner)s, backup_id = %(backup)s, updated_at = %(now)s
FROM job WHERE r.id = job.request_id
RETURNING r.id

-- name: retry
-- Staff retry a refused purge (the requester's authority is back): the job is queued again with
-- no lease; the boundary rechecks everything when it runs. Who retried holds the case when they may
-- hold retirements (its owner stays otherwise), with a backup beside them (`store.requests.cover`).
WITH job AS (
    UPDATE retirements_purgejob SET status = 'queued', refusal = '', lease_owner = NULL, lease_expires_at = NULL
    WHERE id = %(job_id)s AND status = 'refused'
    RETURNING request_id
)
UPDATE retirements_retirementrequest r
SET last_action = %(action)s, owner_id = %(case_owner)s, backup_id = %(backup)s, updated_at = %(now)s
FROM job WHERE r.id = job.request_id AND r.status = 'executing'
RETURNING r.id

-- name: close_refused
-- Staff close a request whose purge was refused: nothing was purged, so the request closes
-- without purge and the workspace returns to disabled, together.
WITH job AS (
    SELECT request_id FROM retirements_purgejob WHERE id = %(job_id)s AND status = 'refused'
), request AS (
    UPDATE retirements_retirementrequest r
    SET status = 'closed', concluded_at = %(now)s, conclusion = %(conclusion)s, last_action = %(conclusion)s,
        owner_id = %(actor)s, updated_at = %(now)s,
        backup_id = CASE WHEN r.backup_id = %(actor)s THEN NULLIF(r.owner_id, %(actor)s) ELSE r.backup_id END
    FROM job WHERE r.id = job.request_id AND r.status = 'executing'
    RETURNING r.workspace_id
)
UPDATE retirements_workspace w SET lifecycle = 'disabled'
FROM request WHERE w.id = request.workspace_id AND w.lifecycle = 'deleting'
RETURNING w.id
