-- A request's watchers: the one write the staff decisions and the watcher's verdicts share.

-- name: settle_watcher
-- A watcher concludes (settled), or is superseded by another; only an active one.
UPDATE retirements_retirementwatcher
SET status = %(status)s, concluded_at = %(now)s, conclusion = %(reason)s
WHERE id = %(watcher_id)s AND status IN ('pending', 'running')
RETURNING id
