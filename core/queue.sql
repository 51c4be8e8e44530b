-- django-q2's queue table (`django_q_ormq`), as the clusters' pushers take from it and their
-- monitors acknowledge (`core.broker.Broker`). django-q2 writes a task's row when it is enqueued.

-- name: dequeue
-- Up to `bulk` tasks of this queue whose lock has run out, oldest first, locked until `until`
-- (django-q2's `retry`: a task not acknowledged by then is handed out again). A row another
-- pusher is taking at this moment is skipped, not waited for.
UPDATE django_q_ormq SET lock = %(until)s
WHERE id IN (
    SELECT id FROM django_q_ormq
    WHERE key = %(key)s AND lock < %(now)s
    ORDER BY id
    LIMIT %(bulk)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id, payload

-- name: acknowledge
-- A task done (or failed and acknowledged): its row goes.
DELETE FROM django_q_ormq WHERE id = %(id)s
