-- The reads every watcher tick makes, idle or not: named statements, so an idle tick builds no
-- ORM query (compiling its three querysets took about 5 ms a tick, the queries 1-2 ms).

-- name: due_batch
-- The next batch of due watcher steps, oldest wake-up first: waiting requests whose wake-up has
-- come and whose authoritative watcher is active, leaving out those this tick already stepped
-- (NOT IN a subquery: a hashed lookup per row, where `<> ALL(array)` read the whole array).
SELECT r.id, r.watcher_id
FROM retirements_retirementrequest r JOIN retirements_retirementwatcher w ON w.id = r.watcher_id
WHERE r.status = 'waiting' AND r.next_wake_at <= %(now)s AND w.status = ANY(%(active)s)
  AND r.id NOT IN (SELECT unnest(%(seen)s::uuid[]))
ORDER BY r.next_wake_at, r.id
LIMIT %(limit)s

-- name: stalled
-- Waiting requests the stall rule may match, up to `limit`, and how many there are in all: no
-- watcher, a wake-up missed by the grace (whatever the watcher's state: a current watcher that
-- settled without concluding the request is never stepped), or a live watcher that never started.
-- Three indexed branches (an OR across the join would read every waiting request); the pure
-- policy has the last word on each candidate. `unalarmed` leaves out those whose stall alarm is open.
-- A live watcher that shows a sign of life (a heartbeat after `beat_cutoff`, or a notice claim not
-- yet run out: it may be between a send and saving it) is no candidate, as `policy.is_stalled` says.
SELECT id, count(*) OVER () FROM (
    SELECT id FROM retirements_retirementrequest WHERE status = 'waiting' AND watcher_id IS NULL
    UNION
    SELECT id FROM retirements_retirementrequest WHERE status = 'waiting' AND next_wake_at < %(cutoff)s
    UNION
    SELECT r.id FROM retirements_retirementrequest r JOIN retirements_retirementwatcher w ON w.id = r.watcher_id
    WHERE r.status = 'waiting' AND w.status NOT IN ('settled', 'superseded') AND w.started_at IS NULL
      AND w.created_at < %(cutoff)s
) candidate
WHERE NOT (%(unalarmed)s AND EXISTS (
    SELECT 1 FROM retirements_alarm a
    WHERE a.request_id = candidate.id AND a.kind = %(alarm)s AND a.resolved_at IS NULL
))
AND NOT EXISTS (
    SELECT 1 FROM retirements_retirementrequest r JOIN retirements_retirementwatcher w ON w.id = r.watcher_id
    WHERE r.id = candidate.id AND w.status NOT IN ('settled', 'superseded')
      AND (w.heartbeat_at > %(beat_cutoff)s OR EXISTS (
          SELECT 1 FROM retirements_noticeslot s
          WHERE s.request_id = r.id AND s.status = 'sending' AND s.claim_expires_at > %(now)s
      ))
)
LIMIT %(limit)s

-- name: due_after_ponr
-- Due notices no watcher step sends, in due order: those of requests past the point of no return
-- (destruction_started, even once purged) and the decisions' notices, which no wake-up plans.
-- Due as `store/notices.sql` claim_due reads it: pending and due, or a claim that ran out. The
-- request's status is read per due slot (EXISTS), not joined: an OR across a join took 3 ms to
-- plan at a million requests.
SELECT s.id FROM retirements_noticeslot s
WHERE ((s.status = 'pending' AND s.due_at <= %(now)s AND (s.next_attempt_at IS NULL OR s.next_attempt_at <= %(now)s))
       OR (s.status = 'sending' AND s.claim_expires_at <= %(now)s))
  AND (s.kind = ANY(%(decision_kinds)s) OR EXISTS (
      SELECT 1 FROM retirements_retirementrequest r WHERE r.id = s.request_id AND r.status IN ('executing', 'completed')
  ))
ORDER BY s.due_at, s.id

-- name: queued_purges
-- Purge jobs queued and not yet run (the tick runs them).
SELECT id FROM retirements_purgejob WHERE status = 'queued' ORDER BY id
