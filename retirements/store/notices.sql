-- The notice slots' writes on the watcher's path: claim before the send, record what was sent.
-- A claim is fenced by its claimer: only the sender that claimed a slot records its outcome.

-- name: claim_due
-- Claim the due notices of a tick's batch of requests (or the one slot named by slot_id):
-- pending and due, or claimed by a sender whose claim ran out. A slot another sender holds now
-- is skipped, never waited for. Returned in each request's due order: the order they are sent in.
WITH claimed AS (
    UPDATE retirements_noticeslot
    SET status = 'sending', claimed_by = %(claimer)s, claim_expires_at = %(until)s, attempts = attempts + 1
    WHERE id IN (
        SELECT id FROM retirements_noticeslot
        WHERE request_id = ANY(%(request_ids)s::uuid[]) AND (%(slot_id)s::bigint IS NULL OR id = %(slot_id)s::bigint)
          AND ((status = 'pending' AND due_at <= %(now)s AND (next_attempt_at IS NULL OR next_attempt_at <= %(now)s))
               OR (status = 'sending' AND claim_expires_at <= %(now)s))
        FOR UPDATE SKIP LOCKED
    )
    RETURNING request_id, id, kind, due_at
)
SELECT request_id, id, kind FROM claimed ORDER BY request_id, due_at, id

-- name: record_delivered
-- Delivered, for the claims this claimer still holds; returns how many it recorded.
WITH delivered AS (
    UPDATE retirements_noticeslot
    SET status = 'delivered', delivered_at = %(now)s, next_attempt_at = NULL, last_error = '', claimed_by = '',
        claim_expires_at = NULL
    WHERE id = ANY(%(ids)s) AND status = 'sending' AND claimed_by = %(claimer)s
    RETURNING id
)
SELECT count(*) FROM delivered

-- name: pending_slots
-- The notices not yet settled of a batch of requests, as the policy's SlotView reads them.
SELECT request_id, id, kind, due_at, status, next_attempt_at, claim_expires_at FROM retirements_noticeslot
WHERE request_id = ANY(%(request_ids)s::uuid[]) AND status IN ('pending', 'sending')
ORDER BY request_id, due_at, id
