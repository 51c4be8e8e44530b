-- The API's writes: idempotency keys, rate windows, webhook deliveries.

-- name: claim_key
-- The first request under a key takes it (a concurrent one waits here until the first commits,
-- then finds it taken); no row when the key was taken before.
INSERT INTO api_idempotency_keys (user_id, key, fingerprint, created_at)
VALUES (%(user)s, %(key)s, %(fingerprint)s, %(now)s)
ON CONFLICT (user_id, key) DO NOTHING
RETURNING id

-- name: answer_key
UPDATE api_idempotency_keys SET status_code = %(status)s, response = %(response)s::jsonb
WHERE id = %(id)s AND status_code IS NULL
RETURNING id

-- name: count_call
-- One more call of a token in this minute; the count so far.
INSERT INTO api_rate_windows (token_id, minute, calls) VALUES (%(token)s, %(minute)s, 1)
ON CONFLICT (token_id, minute) DO UPDATE SET calls = api_rate_windows.calls + 1
RETURNING calls

-- name: forget_windows
-- A token's first call in a new minute: its earlier minutes are no longer counted.
DELETE FROM api_rate_windows WHERE token_id = %(token)s AND minute < %(minute)s

-- name: claim_deliveries
-- Take up to `limit` due deliveries: waiting ones whose time came, and ones whose sender died
-- (its claim ran out). One another sender holds now is skipped.
UPDATE api_webhook_deliveries d
SET status = 'sending', claimed_by = %(by)s, claim_expires_at = %(until)s, attempts = d.attempts + 1
WHERE d.id IN (
    SELECT id FROM api_webhook_deliveries
    WHERE status IN ('pending', 'sending') AND next_attempt_at <= %(now)s
      AND (status = 'pending' OR claim_expires_at <= %(now)s)
    ORDER BY next_attempt_at, created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING d.id

-- name: delivered
UPDATE api_webhook_deliveries
SET status = 'delivered', delivered_at = %(now)s, claim_expires_at = NULL, last_status = %(code)s, last_error = ''
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(by)s
RETURNING id

-- name: not_delivered
-- A send failed: again after the backoff, or given up after the last attempt.
UPDATE api_webhook_deliveries
SET status = CASE WHEN %(give_up)s THEN 'failed' ELSE 'pending' END, next_attempt_at = %(retry_at)s,
    claim_expires_at = NULL, last_status = %(code)s, last_error = %(error)s
WHERE id = %(id)s AND status = 'sending' AND claimed_by = %(by)s
RETURNING id
