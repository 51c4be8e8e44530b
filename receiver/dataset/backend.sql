-- The dataset receiver's statements, in the application's database (schema `receiver`, installed by
-- `python -m receiver install`).

-- name: apply
-- The whole effect in one transaction of the application's own database (receiver.apply, generated
-- from the dataset file): fence, epoch, an operation already applied answered with its first record,
-- the person's row locked, the data version (and, at the gate, every approved one) checked, the rows
-- deleted or anonymized, the operation recorded. A refusal raises SQLSTATE TR001, so nothing it did stays.
SELECT out_recorded, out_evidence, out_grant, out_applied_at
FROM receiver.apply(%(operation_id)s::uuid, %(request_id)s::uuid, %(generation)s::bigint, %(epoch)s::bigint,
                    %(action)s::text, %(community_id)s::uuid, %(handle)s::text, %(expected_version)s::bigint,
                    %(expected_versions)s::jsonb, %(executor)s::text, %(grant)s::text, %(now)s::timestamptz,
                    %(applied_at)s::text)

-- name: record_walk
-- The last effect's record, with what the completeness walk found (same transaction, before it commits).
UPDATE receiver.receiver_operations SET evidence = %(evidence)s::jsonb WHERE operation_id = %(operation_id)s::uuid

-- name: bounded
-- Every apply is bounded: a lock held elsewhere (by the application) or a statement running past these
-- fails the transaction, which rolls back whole ("nothing changed, retry").
SELECT set_config('lock_timeout', %(lock_timeout)s, true), set_config('statement_timeout', %(statement_timeout)s, true)

-- name: preview
SELECT community_id, name, role, n_rows, n_agents, kept, version FROM receiver.preview(%(handle)s)

-- name: emptied
-- Every community this receiver keeps a data version of the person in (it saw them there).
SELECT v.community_id, v.community_pk, v.version FROM receiver.receiver_versions v
JOIN receiver.receiver_people p ON p.person_pk = v.person_pk WHERE p.person_key = %(handle)s

-- name: fence
SELECT generation FROM receiver.receiver_fences WHERE request_id = %(request_id)s

-- name: withdraw
-- Raise the lowest epoch a grant must carry (an older withdrawal arriving late lowers nothing).
INSERT INTO receiver.receiver_fences AS f (request_id, generation, min_epoch, epoch_raised_at)
VALUES (%(request_id)s, 0, %(epoch)s, %(now)s)
ON CONFLICT (request_id) DO UPDATE SET min_epoch = GREATEST(f.min_epoch, EXCLUDED.min_epoch),
    epoch_raised_at = CASE WHEN EXCLUDED.min_epoch > f.min_epoch THEN EXCLUDED.epoch_raised_at ELSE f.epoch_raised_at END
RETURNING min_epoch

-- name: lookup
SELECT operation_id, evidence, "grant", applied_at FROM receiver.receiver_operations
WHERE operation_id = %(operation_id)s AND applied_at <= %(watermark)s

-- name: installed
SELECT version, digest FROM receiver.receiver_installed WHERE dataset = %(dataset)s

-- name: state
-- What this database has applied: its incarnation and the number of the last operation newly applied
-- (a sequence reads the same in every transaction; 0 before the first).
SELECT s.incarnation, CASE WHEN a.is_called THEN a.last_value ELSE 0 END, s.schema_version
FROM receiver.receiver_state s, receiver.receiver_applied a

-- name: keeps_state
-- Whether the schema `receiver` here keeps its state (installed by a receiver that does).
SELECT to_regclass('receiver.receiver_state') IS NOT NULL
