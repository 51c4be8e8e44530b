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

-- name: rebased
-- Every operation the receiver no longer knew was applied again or handed to a person: what it reports
-- now (its incarnation, its applied count) is what the back-office holds evidence up to from here on,
-- unless evidence of more was noted meanwhile (the state it was compared with is still the one held).
UPDATE registered_receivers SET state_incarnation = %(incarnation)s, state_applied = %(applied)s
WHERE prefix = %(prefix)s AND state_incarnation = %(held_incarnation)s AND state_applied = %(held_applied)s
RETURNING prefix
