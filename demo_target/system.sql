-- The demo target system's writes where an effect lands, each in `apply`'s one transaction.

-- name: raise_fence
-- Lock the request's fence (made on first sight) and raise it to this grant's generation; what it
-- holds now: a generation above the grant's means the grant's owner is fenced out.
INSERT INTO target_fences (request_id, generation, min_epoch) VALUES (%(request_id)s, %(generation)s, 0)
ON CONFLICT (request_id) DO UPDATE SET generation = GREATEST(target_fences.generation, EXCLUDED.generation)
RETURNING generation, min_epoch, epoch_raised_at

-- name: recorded
SELECT operation_id FROM target_operations WHERE operation_id = %(operation_id)s

-- name: lock_membership
-- The person's membership in the community, locked: nothing changes their data there until this commits.
SELECT m.id, m.version FROM target_memberships m JOIN target_people p ON p.id = m.person_id
WHERE p.handle = %(handle)s AND m.community_id = %(community_id)s
FOR UPDATE OF m

-- name: gate
-- gate_user: the person can no longer act here; their memberships, counted.
UPDATE target_people p SET gated_at = coalesce(p.gated_at, %(now)s) WHERE p.handle = %(handle)s
RETURNING (SELECT count(*) FROM target_memberships m WHERE m.person_id = p.id)

-- name: purge_rows
-- The rows before (the statement's snapshot), the rows deleted and the agents there.
WITH d AS (DELETE FROM target_posts WHERE membership_id = %(membership)s RETURNING 1)
SELECT (SELECT count(*) FROM target_posts WHERE membership_id = %(membership)s), (SELECT count(*) FROM d),
       (SELECT count(*) FROM target_agents WHERE membership_id = %(membership)s)

-- name: purge_agents
WITH d AS (DELETE FROM target_agents WHERE membership_id = %(membership)s RETURNING 1)
SELECT (SELECT count(*) FROM target_agents WHERE membership_id = %(membership)s), (SELECT count(*) FROM d)

-- name: moved_on
-- After the delete (a later statement sees it): the version moved on, and what remains there.
WITH v AS (UPDATE target_memberships SET version = version + 1 WHERE id = %(membership)s RETURNING version)
SELECT (SELECT version FROM v), (SELECT count(*) FROM target_posts WHERE membership_id = %(membership)s),
       (SELECT count(*) FROM target_agents WHERE membership_id = %(membership)s)

-- name: record
INSERT INTO target_operations
    (operation_id, request_id, action, community_id, generation, executor, "grant", evidence, applied_at)
VALUES (%(operation_id)s, %(request_id)s, %(action)s, %(community_id)s, %(generation)s, %(executor)s, %(grant)s,
        %(evidence)s, %(now)s)
