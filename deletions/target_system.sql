-- The demo target system's writes: its fence (the highest generation seen per request) and its
-- effects, each applied once per operation id.

-- name: raise_fence
INSERT INTO demo_target_fences (request_id, generation) VALUES (%(request_id)s, %(generation)s)
ON CONFLICT (request_id)
DO UPDATE SET generation = GREATEST(demo_target_fences.generation, EXCLUDED.generation)
RETURNING generation

-- name: apply_effect
INSERT INTO demo_target_effects
    (operation_id, request_id, action, community_id, generation, executor, outcome, applied_at)
VALUES (%(operation_id)s, %(request_id)s, %(action)s, %(community_id)s, %(generation)s, %(executor)s,
        %(outcome)s::jsonb, %(now)s)
ON CONFLICT (operation_id) DO NOTHING
RETURNING outcome

-- name: recorded
SELECT outcome FROM demo_target_effects WHERE operation_id = %(operation_id)s
