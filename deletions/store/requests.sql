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
