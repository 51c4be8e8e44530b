-- Authority withdrawn from a request, and the target system's acknowledgement of it: the outbox
-- a revocation or a cancellation writes and the pusher (`deletions.withdrawals`) drains.

-- name: withdraw
-- In the transaction of the revocation or cancellation (the request is locked): the next epoch.
INSERT INTO entity_deletion_authority_withdrawals (request_id, epoch, cause, created_at, attempts, last_error,
                                                   acknowledged_where)
SELECT %(request_id)s, coalesce(max(epoch), 0) + 1, %(cause)s, %(now)s, 0, '', ''
FROM entity_deletion_authority_withdrawals WHERE request_id = %(request_id)s
RETURNING epoch

-- name: pending
-- Each request's latest unacknowledged withdrawal (it covers the earlier ones), one row per request.
SELECT DISTINCT ON (w.request_id) w.request_id, r.target, w.epoch
FROM entity_deletion_authority_withdrawals w JOIN entity_deletion_requests r ON r.id = w.request_id
WHERE w.acknowledged_at IS NULL AND (%(request_id)s::uuid IS NULL OR w.request_id = %(request_id)s)
ORDER BY w.request_id, w.epoch DESC
LIMIT %(limit)s

-- name: acknowledged
-- The target enforces `epoch` now: every withdrawal of the request up to it is acknowledged.
UPDATE entity_deletion_authority_withdrawals
SET acknowledged_at = %(now)s, acknowledged_where = %(where)s, attempts = attempts + 1, last_attempt_at = %(now)s,
    last_error = ''
WHERE request_id = %(request_id)s AND epoch <= %(epoch)s AND acknowledged_at IS NULL

-- name: push_failed
-- The target could not be told: kept for the next push, with the attempt and its error.
UPDATE entity_deletion_authority_withdrawals
SET attempts = attempts + 1, last_attempt_at = %(now)s, last_error = %(error)s
WHERE request_id = %(request_id)s AND epoch <= %(epoch)s AND acknowledged_at IS NULL
