-- The notice slots' writes on the watcher's path: claim before the send, record what was sent.
-- A claim is fenced by its claimer: only the sender that claimed a slot records its outcome.

-- name: claim_due
-- Claim a request's due notices (or the one named by slot_id): pending and due, or claimed by a
-- sender whose claim ran out. A slot another sender holds now is skipped, never waited for.
-- Returned in due order: the order they are sent in.
WITH claimed AS (
    UPDATE retirements_noticeslot
    SET status = 'sending', claimed_by = %(claimer)s, claim_expires_at = %(until)s, attempts = attempts + 1
    WHERE id IN (
        SELECT id FROM retirements_noticeslot
        WHERE request_id = %(request_id)s AND (%(slot_id)s::bigint IS NULL OR id = %(slot_id)s::bigint)
          AND ((status = 'pending' AND due_at <= %(now)s AND (next_attempt_at IS NULL OR next_attempt_at <= %(now)s))
               OR (status = 'sending' AND claim_expires_at <= %(now)s))
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, kind, due_at
)
SELECT id, kind FROM claimed ORDER BY due_at, id

-- name: record_delivered
-- Delivered, for the claims this claimer still holds; returns the request's notices still to settle
-- afterwards (what the watcher's wait is computed from), and how many claims it recorded.
WITH delivered AS (
    UPDATE retirements_noticeslot
    SET status = 'delivered', delivered_at = %(now)s, next_attempt_at = NULL, last_error = '', claimed_by = '',
        claim_expires_at = NULL
    WHERE id = ANY(%(ids)s) AND status = 'sending' AND claimed_by = %(claimer)s
    RETURNING id
)
SELECT s.id, s.kind, s.due_at, s.status, s.next_attempt_at, s.claim_expires_at, (SELECT count(*) FROM delivered)
FROM retirements_noticeslot s
WHERE s.request_id = %(request_id)s AND s.status IN ('pending', 'sending') AND s.id NOT IN (SELECT id FROM delivered)
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, (SELECT count(*) FROM delivered)

-- name: pending_slots
-- The request's notices not yet settled, as the policy's SlotView reads them.
SELECT id, kind, due_at, status, next_attempt_at, claim_expires_at FROM retirements_noticeslot
WHERE request_id = %(request_id)s AND status IN ('pending', 'sending')
