-- Effects applied again after a receiver's database went back in time (a restore from a backup):
-- one row per first operation, ever; its answer set once (the database refuses any other change).

-- name: begin
-- The re-application of one completed stage's effect, written before it is sent (so an answer lost on
-- the way is looked up under the same new operation, never sent twice): nothing when one exists already.
INSERT INTO entity_deletion_reapplications
    (id, request_id, stage_id, first_operation_id, operation_id, generation, because, created_at)
VALUES (%(id)s, %(request_id)s, %(stage_id)s, %(first_operation_id)s, %(operation_id)s, %(generation)s,
        %(because)s, %(now)s)
ON CONFLICT (first_operation_id) DO NOTHING
RETURNING id

-- name: answer
-- What came of it: the receiver's signed evidence, or why a person was handed it; once.
UPDATE entity_deletion_reapplications SET answer = %(answer)s::jsonb
WHERE id = %(id)s AND answer IS NULL
RETURNING id
