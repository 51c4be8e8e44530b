-- A staff decision's write on the request that moves its lifecycle without a worker.

-- name: resume
-- An operator sends a stopped request back to the retry queue, due now, with a fresh failure
-- count (from needs attention; or, settling an unknown effect, from waiting to retry).
UPDATE entity_deletion_requests
SET status = 'retry_wait', retry_count = 0, next_attempt_at = %(now)s, owner = %(case_owner)s,
    open_question = %(open_question)s, next_check_at = %(next_check_at)s, last_action = %(action)s,
    updated_at = %(now)s
WHERE id = %(request_id)s AND status IN ('needs_attention', 'retry_wait')
RETURNING id

-- name: review_recorded_effect
-- An effect recorded by hand after authority was withdrawn: the case stays stopped (needs
-- attention), held by the people and with the question the custody rule gives; never resumed.
UPDATE entity_deletion_requests
SET owner = %(case_owner)s, open_question = %(open_question)s, next_check_at = %(next_check_at)s,
    last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status = 'needs_attention'
RETURNING id

-- name: cancel_outright
-- Nothing runs and nothing submitted is unsettled: the request ends now (completed stages stay
-- done) and an effect-unknown or refusal alarm clears, since nothing waits on it any more. A fault
-- (integrity, applied after withdrawal) stays open: only a person's decision closes it.
WITH r AS (
    UPDATE entity_deletion_requests
    SET status = 'cancelled', cancel_requested_at = %(now)s, cancel_requested_by = %(by)s,
        cancel_reason = %(reason)s, next_attempt_at = NULL, next_check_at = NULL, open_question = '',
        last_action = %(action)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND cancel_requested_at IS NULL AND status NOT IN ('completed', 'cancelled')
    RETURNING id
), settled AS (
    UPDATE entity_deletion_alarms al SET resolved_at = %(now)s
    FROM r WHERE al.request_id = r.id AND al.kind IN ('effect_unknown', 'boundary_refused') AND al.resolved_at IS NULL
)
SELECT id FROM r

-- name: cancel_recorded
-- A worker holds it, or a submission's outcome is unknown: the cancellation is saved and the case
-- stays open. With `settles`, operators on call hold it and it is due now for a worker to look the
-- operation up (a request that needed attention waits to retry again).
UPDATE entity_deletion_requests
SET cancel_requested_at = %(now)s, cancel_requested_by = %(by)s, cancel_reason = %(reason)s,
    status = CASE WHEN %(settles)s AND status = 'needs_attention' THEN 'retry_wait' ELSE status END,
    next_attempt_at = CASE WHEN %(settles)s AND status IN ('needs_attention', 'retry_wait') THEN %(now)s
                           ELSE next_attempt_at END,
    owner = CASE WHEN %(settles)s THEN %(case_owner)s ELSE owner END,
    open_question = CASE WHEN %(settles)s THEN %(open_question)s ELSE open_question END,
    next_check_at = CASE WHEN %(settles)s THEN %(next_check_at)s::timestamptz ELSE next_check_at END,
    last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND cancel_requested_at IS NULL AND status NOT IN ('completed', 'cancelled')
RETURNING id

-- name: assign
-- Name a case's person and backup for its current state and rota (`key`): by rota, or taken,
-- assigned or handed over by a person. Fenced by the state and the naming it replaces, so a
-- rota pass never overwrites a naming made since it read the case.
UPDATE entity_deletion_requests
SET assignee_id = %(person)s, backup_id = %(backup)s, assigned_for = %(key)s, updated_at = %(now)s
WHERE id = %(request_id)s AND status = %(status)s AND assigned_for = %(was)s
  AND status NOT IN ('completed', 'cancelled')
RETURNING id

-- name: extend_deadline
-- Move an open request's legal deadline later (the policy checked the legal maximum).
UPDATE entity_deletion_requests
SET due_at = %(due_at)s, last_action = %(action)s, updated_at = %(now)s
WHERE id = %(request_id)s AND due_at = %(was)s AND due_at < %(due_at)s AND status NOT IN ('completed', 'cancelled')
RETURNING id
