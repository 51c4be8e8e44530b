-- Alarms a person closes: a fault (an integrity fault, an effect applied by hand after authority
-- was withdrawn) closes only with that person's decision, never as the side effect of another move.

-- name: close_fault
-- The open fault of `kind` on the request closes with the decision that closes it (who, when, why).
-- The database refuses the move without such a decision (the alarm table's trigger).
UPDATE entity_deletion_alarms SET resolved_at = %(now)s, decision_id = %(decision_id)s
WHERE request_id = %(request_id)s AND kind = %(kind)s AND resolved_at IS NULL
RETURNING id

-- name: raise_once
-- An alarm of this kind for the case, unless one is open already (one open alarm per case and
-- kind): a fault every read finds again (saved evidence that is not what its receipt says) is raised
-- once, never rewritten, and the row says when it was first found.
INSERT INTO entity_deletion_alarms (request_id, kind, message, created_at)
VALUES (%(request_id)s, %(kind)s, %(message)s, %(now)s)
ON CONFLICT (request_id, kind) WHERE resolved_at IS NULL DO NOTHING
RETURNING id
