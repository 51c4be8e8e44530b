-- Whether each registered receiver answers: since when it has not (kept from the first time it was
-- noted until it answers again), and what it last failed with. Written only when that changes.

-- name: unanswered
-- It did not answer (or answered under a key not registered for it): since when, the first time kept.
UPDATE registered_receivers
SET unanswered_since = COALESCE(unanswered_since, %(now)s), unanswered_reason = %(reason)s
WHERE prefix = %(prefix)s
RETURNING unanswered_since

-- name: answered
-- It answered again: no longer unanswered (a row that was not is left as it is).
UPDATE registered_receivers SET unanswered_since = NULL, unanswered_reason = ''
WHERE prefix = %(prefix)s AND unanswered_since IS NOT NULL
