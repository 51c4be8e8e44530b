-- The demo target system's write where an effect lands: `apply`'s one statement.

-- name: apply
-- The whole effect in the caller's one transaction (the function `target_apply`, migration 0003):
-- raise the fence, check the epoch, answer an operation already applied with its first record,
-- lock the membership and check its version, delete, read the evidence, move the version on and
-- record the operation. A refusal raises SQLSTATE TR001, so nothing it did stays.
SELECT out_recorded, out_evidence, out_grant, out_applied_at
FROM target_apply(%(operation_id)s::uuid, %(request_id)s::uuid, %(generation)s::bigint, %(epoch)s::bigint,
                  %(action)s::text, %(community_id)s::uuid, %(handle)s::text, %(expected_version)s::bigint,
                  %(executor)s::text, %(grant)s::text, %(now)s::timestamptz, %(applied_at)s::text)
