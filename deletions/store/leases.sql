-- A request's lease: claim (a new generation), heartbeat and release, each fenced by owner and
-- generation; every claim and release is also a lease event.

-- name: lock_for_claim
SELECT status, lease_owner, lease_expires_at, lease_generation, next_attempt_at, cancel_requested_at
FROM entity_deletion_requests WHERE id = %(request_id)s FOR UPDATE

-- name: claim
-- The row is locked (lock_for_claim): the new generation is past what it read and past the
-- target system's fence.
WITH claimed AS (
    UPDATE entity_deletion_requests
    SET lease_owner = %(owner)s, lease_generation = %(generation)s, lease_expires_at = %(expires)s,
        heartbeat_at = %(now)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_generation = %(previous)s
    RETURNING id
)
INSERT INTO entity_deletion_lease_events
    (request_id, event, owner, generation, previous_owner, previous_expires_at, at)
SELECT id, %(event)s, %(owner)s, %(generation)s, %(previous_owner)s, %(previous_expires_at)s, %(now)s FROM claimed
RETURNING generation

-- name: heartbeat
UPDATE entity_deletion_requests SET heartbeat_at = %(now)s, lease_expires_at = %(expires)s
WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s

-- name: release
WITH released AS (
    UPDATE entity_deletion_requests SET lease_owner = NULL, lease_expires_at = NULL, updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
    RETURNING id
)
INSERT INTO entity_deletion_lease_events (request_id, event, owner, generation, at)
SELECT id, 'release', %(owner)s, %(generation)s, %(now)s FROM released
RETURNING id
