-- A request's lease: claim (a new generation), heartbeat and release, each fenced by owner and
-- generation; every claim and release is also a lease event.

-- name: claim
-- One statement: lock the request, take it when it is claimable (runnable, not leased or its
-- lease ran out, not waiting for a retry, not cancelled or its approval expired before it started)
-- with a generation past
-- the saved one and past the target system's fence, write the lease event, and return what the
-- run reads under its lease (its status, inventory and target). No row: not claimable (the caller says
-- why). `{latest_approval}` is the latest approval's order (`models.LATEST_APPROVAL_SQL`), filled in by
-- `leases.claim_run`.
WITH previous AS (
    SELECT id, lease_owner, lease_expires_at, lease_generation
    FROM entity_deletion_requests WHERE id = %(request_id)s FOR UPDATE
), claimed AS (
    UPDATE entity_deletion_requests r
    SET lease_owner = %(owner)s, lease_generation = greatest(p.lease_generation, %(past)s) + 1,
        lease_expires_at = %(expires)s, heartbeat_at = %(now)s, updated_at = %(now)s
    FROM previous p
    WHERE r.id = p.id
      AND r.status = ANY(%(runnable)s)
      AND (r.lease_owner IS NULL OR r.lease_expires_at <= %(now)s)
      AND NOT (r.status = 'retry_wait' AND r.next_attempt_at IS NOT NULL AND r.next_attempt_at > %(now)s)
      AND NOT (r.status = 'approved' AND r.cancel_requested_at IS NOT NULL)
      AND NOT (r.status = 'approved' AND (SELECT a.expires_at <= %(now)s FROM entity_deletion_approvals a
                                          WHERE a.request_id = r.id ORDER BY {latest_approval} LIMIT 1))
    RETURNING r.id, r.lease_generation, p.lease_generation AS saved_generation, p.lease_owner AS previous_owner,
              p.lease_expires_at AS previous_expires_at, r.status, r.inventory_json, r.inventory_version, r.target
), logged AS (
    INSERT INTO entity_deletion_lease_events
        (request_id, event, owner, generation, previous_owner, previous_expires_at, at)
    SELECT id, CASE WHEN previous_owner IS NULL THEN 'claim' ELSE 'takeover' END, %(owner)s, lease_generation,
           previous_owner, previous_expires_at, %(now)s
    FROM claimed
)
SELECT lease_generation, saved_generation, previous_owner, status, inventory_json, inventory_version, target
FROM claimed

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
