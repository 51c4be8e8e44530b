-- The notifications' writes: one row per person and occurrence, claimed before it is sent. A
-- claim is fenced by its holder and generation (each claim takes the next one): the sender
-- re-checks both just before its send, and only the holder of the current claim saves an outcome.

-- name: add
-- Record that a person must be told about an occurrence; a second pass (or a second sender at
-- the same moment) finds the row and adds nothing.
INSERT INTO ops_notifications
    (recipient_id, key, event, case_kind, case_id, subject, body, status, created_at, next_attempt_at, attempts,
     claimed_by, claim_generation, last_error)
VALUES (%(recipient)s, %(key)s, %(event)s, %(case_kind)s, %(case_id)s, %(subject)s, %(body)s, %(status)s, %(now)s,
        %(now)s, 0, '', 0, '')
ON CONFLICT (recipient_id, key) DO NOTHING
RETURNING id

-- name: claim_due
-- Take up to `limit` due messages: waiting ones whose time came, and ones whose sender died
-- (its claim ran out). A message another sender holds now is skipped. Each claim takes the next
-- generation: the sender's fence for its send and its save.
UPDATE ops_notifications n
SET status = 'sending', claimed_by = %(by)s, claim_expires_at = %(until)s, attempts = n.attempts + 1,
    claim_generation = n.claim_generation + 1
WHERE n.id IN (
    SELECT id FROM ops_notifications
    WHERE (status = 'pending' AND next_attempt_at <= %(now)s) OR (status = 'sending' AND claim_expires_at <= %(now)s)
    ORDER BY next_attempt_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING n.id, n.claim_generation

-- name: still_held
-- Immediately before a send: the sender still holds this claim (holder and generation), and it
-- stands for the send (renewed, never shortened). No row: it was taken over (or settled), and the
-- sender stands down without sending.
UPDATE ops_notifications SET claim_expires_at = GREATEST(claim_expires_at, %(until)s)
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(by)s AND claim_generation = %(generation)s
RETURNING id

-- name: sent
-- Sent, saved by the holder of the current claim only (a stale holder's save changes nothing).
UPDATE ops_notifications SET status = 'sent', sent_at = %(now)s, claim_expires_at = NULL, last_error = ''
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(by)s AND claim_generation = %(generation)s
RETURNING id

-- name: failed
-- A send failed: again after the backoff, or given up after the last attempt.
UPDATE ops_notifications
SET status = CASE WHEN %(give_up)s THEN 'failed' ELSE 'pending' END, next_attempt_at = %(retry_at)s,
    claim_expires_at = NULL, last_error = %(error)s
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(by)s AND claim_generation = %(generation)s
RETURNING id

-- name: digested
-- A person's digest went out: the messages it listed are done.
UPDATE ops_notifications SET status = 'digested', sent_at = %(now)s
WHERE recipient_id = %(recipient)s AND status = 'digest' AND id = ANY(%(ids)s)
