-- The notice slots' writes on the watcher's path: claim before the send, record what was sent.
-- A claim is fenced by its claimer and generation (each claim takes the next one): the sender
-- re-checks both just before its send, and only the holder of the current claim records an outcome.

-- name: claim_due
-- Claim the due notices of a tick's batch of requests (or the one slot named by slot_id):
-- pending and due, or claimed by a sender whose claim ran out. A slot another sender holds now
-- is skipped, never waited for. Returned in each request's due order: the order they are sent in.
WITH claimed AS (
    UPDATE retirements_noticeslot
    SET status = 'sending', claimed_by = %(claimer)s, claim_expires_at = %(until)s, attempts = attempts + 1,
        claim_generation = claim_generation + 1
    WHERE id IN (
        SELECT id FROM retirements_noticeslot
        WHERE request_id = ANY(%(request_ids)s::uuid[]) AND (%(slot_id)s::bigint IS NULL OR id = %(slot_id)s::bigint)
          AND ((status = 'pending' AND due_at <= %(now)s AND (next_attempt_at IS NULL OR next_attempt_at <= %(now)s))
               OR (status = 'sending' AND claim_expires_at <= %(now)s))
        FOR UPDATE SKIP LOCKED
    )
    RETURNING request_id, id, kind, due_at, claim_generation
)
SELECT request_id, id, kind, claim_generation FROM claimed ORDER BY request_id, due_at, id

-- name: still_held
-- Immediately before a send: the sender still holds this claim (claimer and generation), and it
-- stands for the send (renewed, never shortened). No row: it was taken over (or settled), and the
-- sender stands down without sending.
UPDATE retirements_noticeslot SET claim_expires_at = GREATEST(claim_expires_at, %(until)s)
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(claimer)s AND claim_generation = %(generation)s
RETURNING id

-- name: record_delivered
-- Delivered, for the claims (slot, generation) this claimer still holds; returns how many it
-- recorded (a claim taken over since is not: a stale holder's save changes nothing).
WITH delivered AS (
    UPDATE retirements_noticeslot s
    SET status = 'delivered', delivered_at = %(now)s, next_attempt_at = NULL, last_error = '', claimed_by = '',
        claim_expires_at = NULL
    FROM unnest(%(ids)s::bigint[], %(generations)s::int[]) AS c(id, generation)
    WHERE s.id = c.id AND s.claim_generation = c.generation AND s.status = 'sending' AND s.claimed_by = %(claimer)s
    RETURNING s.id
)
SELECT count(*) FROM delivered

-- name: record_failed
-- The send failed: pending again after the backoff, or failed for good after the last attempt (as
-- the retry policy decided from the attempts made), for the claim this claimer still holds.
UPDATE retirements_noticeslot
SET status = CASE WHEN %(give_up)s THEN 'failed' ELSE 'pending' END, last_error = %(error)s,
    next_attempt_at = %(next_attempt_at)s, claimed_by = '', claim_expires_at = NULL
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(claimer)s AND claim_generation = %(generation)s
RETURNING id

-- name: pending_slots
-- The notices not yet settled of a batch of requests, as the policy's SlotView reads them.
SELECT request_id, id, kind, due_at, status, next_attempt_at, claim_expires_at FROM retirements_noticeslot
WHERE request_id = ANY(%(request_ids)s::uuid[]) AND status IN ('pending', 'sending')
ORDER BY request_id, due_at, id

-- name: replan
-- The one write that moves notice slots: each to its new due time (re-planned), or suppressed
-- (no due time), with why, in the same update (the database refuses a move without its reason).
-- A slot only while it is still `from` (pending; the past-the-point sender also an expired claim).
-- Returned: the slots moved.
UPDATE retirements_noticeslot s
SET due_at = COALESCE(m.due_at, s.due_at), status = CASE WHEN m.due_at IS NULL THEN 'suppressed' ELSE s.status END,
    next_attempt_at = NULL, moved_because = m.why
FROM unnest(%(ids)s::bigint[], %(due_ats)s::timestamptz[], %(whys)s::text[]) AS m(id, due_at, why)
WHERE s.id = m.id AND s.status = ANY(%(sources)s::text[])
RETURNING s.id
