-- The decision log's own move on an alarm (the other alarm writes are the moves that answer them).

-- name: close_alarm
-- The open alarm of `kind` on the request closes with the person's decision that closes it (who,
-- when, why). The database refuses the move without such a decision (the alarm table's trigger).
UPDATE retirements_alarm SET resolved_at = %(now)s, decision_id = %(decision_id)s
WHERE request_id = %(request_id)s AND kind = %(kind)s AND resolved_at IS NULL
RETURNING id
