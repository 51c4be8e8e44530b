-- The stage path's writes: one statement per state move, each the only writer of its move.
--
-- Every write is fenced: each statement first locks the request row only while it is held by
-- the caller's lease (owner + generation) in the expected state, then writes the stage row from
-- that lock, and the request and attempt rows only from the stage row it wrote. So a statement
-- writes all of its move or nothing (it stands alone as its own transaction on the stage path),
-- and one that returns no row wrote nothing: one cheap read (`why_not`) names the reason.
-- PostgreSQL refuses any lifecycle move the models do not declare (the FSM guard triggers),
-- whatever writes it.

-- name: lock_for_transition
-- The request locked with its current stage row: what a transition decides from.
SELECT r.lease_owner, r.lease_generation, r.status, r.cancel_requested_at IS NOT NULL, r.retry_count,
       r.next_attempt_at, r.open_question, r.owner,
       s.id, s.stage, s.target_community_id, s.status, s.is_current, s.metadata_json, s.started_at,
       s.finished_at, s.last_error, s.operation_id, s.attempts, s.submitted_at
FROM entity_deletion_requests r
LEFT JOIN entity_deletion_stage_history s ON s.request_id = r.id AND s.is_current
WHERE r.id = %(request_id)s
FOR UPDATE OF r

-- name: why_not
-- The one read after a fenced write found nothing: who holds the request, in what state.
SELECT r.lease_owner, r.lease_generation, r.status, r.cancel_requested_at IS NOT NULL,
       s.stage, s.status, s.is_current
FROM entity_deletion_requests r
LEFT JOIN entity_deletion_stage_history s ON s.id = %(stage_id)s AND s.request_id = r.id
WHERE r.id = %(request_id)s

-- name: count_completed
SELECT count(*) FROM entity_deletion_stage_history WHERE request_id = %(request_id)s AND status = 'completed'

-- name: start_request
-- Initialize: an approved request with no history moves to running and gets its first row.
WITH r AS (
    UPDATE entity_deletion_requests
    SET status = 'running', last_action = %(action)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status = 'approved' AND cancel_requested_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM entity_deletion_stage_history h WHERE h.request_id = %(request_id)s)
    RETURNING id
)
INSERT INTO entity_deletion_stage_history
    (id, request_id, stage, target_community_id, status, is_current, metadata_json, operation_id, attempts,
     created_at)
SELECT %(id)s, r.id, %(stage)s, %(community_id)s, 'pending', true, %(metadata)s::jsonb, %(operation_id)s, 0,
       %(now)s
FROM r
RETURNING id, stage, target_community_id, status, is_current, metadata_json, started_at, finished_at,
          last_error, operation_id, attempts, submitted_at

-- name: resume_approved
-- A fresh approval of a started request (after a review): the saved stage continues.
UPDATE entity_deletion_requests SET status = 'running', updated_at = %(now)s
WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
  AND status = 'approved'

-- name: begin_stage
-- The running mark: the current unfinished row runs again (a retry keeps its first started_at), an
-- attempt still open from an earlier worker is closed as interrupted, this attempt opens, and a
-- request waiting to retry runs. With `submit`, the submitted mark goes in too (nothing happens
-- between the two); `submitted_before` says an earlier attempt had already submitted.
WITH r AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status IN ('running', 'retry_wait')
    FOR UPDATE
), prev AS (
    SELECT h.id, h.submitted_at FROM entity_deletion_stage_history h, r
    WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status <> 'completed'
    FOR UPDATE OF h
), s AS (
    UPDATE entity_deletion_stage_history h
    SET status = 'running', started_at = COALESCE(h.started_at, %(now)s), attempts = h.attempts + 1,
        submitted_at = COALESCE(prev.submitted_at, CASE WHEN %(submit)s THEN %(now)s::timestamptz END)
    FROM prev WHERE h.id = prev.id
    RETURNING h.id, h.stage, h.target_community_id, h.status, h.is_current, h.metadata_json, h.started_at,
              h.finished_at, h.last_error, h.operation_id, h.attempts, h.submitted_at,
              prev.submitted_at IS NOT NULL AS submitted_before
), marked AS (
    UPDATE entity_deletion_requests q SET status = 'running', last_action = %(action)s, updated_at = %(now)s
    FROM s WHERE q.id = %(request_id)s
), closed AS (
    UPDATE entity_deletion_stage_attempts a SET outcome = 'interrupted', finished_at = %(now)s
    FROM s WHERE a.stage_id = s.id AND a.outcome = 'running'
), opened AS (
    INSERT INTO entity_deletion_stage_attempts
        (request_id, stage_id, attempt, executor, generation, started_at, outcome, error)
    SELECT %(request_id)s, s.id, s.attempts, %(owner)s, %(generation)s, %(now)s, 'running', '' FROM s
)
SELECT * FROM s

-- name: submit_stage
-- Saved before the effect is first submitted: a crash after this leaves the effect unknown.
WITH r AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status = 'running'
    FOR UPDATE
)
UPDATE entity_deletion_stage_history h SET submitted_at = COALESCE(h.submitted_at, %(now)s)
FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'running'
RETURNING h.id, h.stage, h.target_community_id, h.status, h.is_current, h.metadata_json, h.started_at,
          h.finished_at, h.last_error, h.operation_id, h.attempts, h.submitted_at

-- name: save_result
-- completed + current: what the target system recorded is saved; the transition follows in the same
-- transaction (`advance` or `complete`, pipelined with it: one commit, the restart point). The attempt
-- closes, an effect-unknown alarm clears (the record settled it), and the receiver state the evidence
-- carries is noted on its registration: the highest number of applied operations the back-office holds
-- signed evidence of (never lowered here; the first incarnation noted is kept, and evidence of another one
-- is not noted: health compares what the receiver reports with the incarnation held, and a finished
-- re-application rebases it, `receivers.sql` `rebased`).
WITH r AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status = 'running'
    FOR UPDATE
), s AS (
    UPDATE entity_deletion_stage_history h
    SET status = 'completed', finished_at = %(now)s, last_error = NULL,
        metadata_json = h.metadata_json || jsonb_build_object('result', %(result)s::jsonb)
    FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'running'
    RETURNING h.id, h.stage, h.target_community_id, h.status, h.is_current, h.metadata_json, h.started_at,
              h.finished_at, h.last_error, h.operation_id, h.attempts, h.submitted_at
), noted AS (
    UPDATE entity_deletion_requests q SET last_action = %(action)s, updated_at = %(now)s
    FROM s WHERE q.id = %(request_id)s
), closed AS (
    UPDATE entity_deletion_stage_attempts a SET outcome = 'completed', error = '', finished_at = %(now)s
    FROM s WHERE a.stage_id = s.id AND a.attempt = s.attempts
), settled AS (
    UPDATE entity_deletion_alarms al SET resolved_at = %(now)s
    FROM s WHERE al.request_id = %(request_id)s AND al.kind = 'effect_unknown' AND al.resolved_at IS NULL
      AND s.attempts > 1
), receiver_state AS (
    UPDATE registered_receivers g
    SET state_incarnation = %(incarnation)s, state_applied = GREATEST(g.state_applied, %(applied)s)
    FROM s WHERE g.prefix = %(prefix)s AND g.state_incarnation IN ('', %(incarnation)s)
      AND (g.state_incarnation = '' OR g.state_applied < %(applied)s)
)
SELECT * FROM s

-- name: fail_stage
-- failed + current, the request waiting to retry (or escalated) with the values policy decided.
WITH r AS (
    UPDATE entity_deletion_requests
    SET status = %(status)s::text, retry_count = retry_count + 1, next_attempt_at = %(next_attempt_at)s,
        last_error = %(error)s, owner = %(case_owner)s, open_question = %(open_question)s,
        next_check_at = %(next_check_at)s, last_action = %(action)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status IN ('running', 'retry_wait') AND retry_count = %(retry_count)s
    RETURNING id
), s AS (
    UPDATE entity_deletion_stage_history h SET status = 'failed', last_error = %(error)s
    FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'running'
    RETURNING h.id, h.attempts
), closed AS (
    UPDATE entity_deletion_stage_attempts a SET outcome = %(outcome)s, error = %(error)s, finished_at = %(now)s
    FROM s WHERE a.stage_id = s.id AND a.attempt = s.attempts
)
SELECT id FROM s

-- name: set_aside
-- Refused at the receiving boundary: nothing was applied and it is no failure; the row waits
-- again (pending, not submitted). With `in_question` the receiver may have applied it (the lookup
-- could not settle it): the row keeps its submitted mark and the attempt ends as an unknown effect.
-- With `status` (needs_review: the approvers; needs_attention: a person on call) the request waits for
-- the people named; without (a cancellation), it stays as it is for the next transition to end.
WITH r AS (
    UPDATE entity_deletion_requests
    SET status = COALESCE(%(status)s::text, status),
        owner = CASE WHEN %(status)s::text IS NOT NULL THEN %(case_owner)s ELSE owner END,
        open_question = CASE WHEN %(status)s::text IS NOT NULL THEN %(open_question)s ELSE open_question END,
        next_check_at = CASE WHEN %(status)s::text IS NOT NULL THEN %(next_check_at)s::timestamptz ELSE next_check_at END,
        last_action = CASE WHEN %(status)s::text IS NOT NULL THEN %(action)s ELSE last_action END,
        updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
    RETURNING id
), s AS (
    UPDATE entity_deletion_stage_history h
    SET status = 'pending', submitted_at = CASE WHEN %(in_question)s THEN h.submitted_at END
    FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'running'
    RETURNING h.id, h.attempts, h.operation_id, h.stage
), closed AS (
    UPDATE entity_deletion_stage_attempts a
    SET outcome = CASE WHEN %(in_question)s THEN 'effect_unknown' ELSE 'refused' END, error = %(rule)s,
        finished_at = %(now)s
    FROM s WHERE a.stage_id = s.id AND a.attempt = s.attempts
)
SELECT id, operation_id, stage FROM s

-- name: note_stale_attempt
-- A worker whose lease was taken over met a refusal or failure it may not record on the case: it is
-- kept on that worker's own attempt (its executor and generation), once; a running attempt ends
-- refused, one the takeover already closed keeps its outcome.
UPDATE entity_deletion_stage_attempts
SET error = 'after its lease was taken over: ' || %(error)s,
    outcome = CASE WHEN outcome = 'running' THEN 'refused' ELSE outcome END,
    finished_at = COALESCE(finished_at, %(now)s)
WHERE stage_id = %(stage_id)s AND request_id = %(request_id)s AND executor = %(owner)s
  AND generation = %(generation)s AND error = ''

-- name: advance
-- The completed current row is retired with the rules' decision and its successor inserted.
WITH r AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status = 'running' AND cancel_requested_at IS NULL
    FOR UPDATE
), retired AS (
    UPDATE entity_deletion_stage_history h
    SET is_current = false, metadata_json = h.metadata_json || jsonb_build_object('decision', %(decision)s::jsonb)
    FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'completed'
    RETURNING h.id
), moved AS (
    UPDATE entity_deletion_requests q
    SET retry_count = 0, next_attempt_at = NULL, last_error = NULL, open_question = '',
        next_check_at = %(now)s, last_action = %(action)s, updated_at = %(now)s
    FROM retired WHERE q.id = %(request_id)s
)
INSERT INTO entity_deletion_stage_history
    (id, request_id, stage, target_community_id, status, is_current, metadata_json, operation_id, attempts,
     created_at)
SELECT %(id)s, %(request_id)s, %(stage)s, %(community_id)s, 'pending', true, %(metadata)s::jsonb,
       %(operation_id)s, 0, %(now)s
FROM retired
RETURNING id, stage, target_community_id, status, is_current, metadata_json, started_at, finished_at,
          last_error, operation_id, attempts, submitted_at

-- name: complete
-- The last completed row is retired with its decision, the request completes and its lease is released.
WITH r AS (
    SELECT id FROM entity_deletion_requests
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND status = 'running' AND cancel_requested_at IS NULL
    FOR UPDATE
), retired AS (
    UPDATE entity_deletion_stage_history h
    SET is_current = false, metadata_json = h.metadata_json || jsonb_build_object('decision', %(decision)s::jsonb)
    FROM r WHERE h.id = %(stage_id)s AND h.request_id = r.id AND h.is_current AND h.status = 'completed'
    RETURNING h.id
), completed AS (
    UPDATE entity_deletion_requests q
    SET status = 'completed', completed_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
        retry_count = 0, next_attempt_at = NULL, last_error = NULL, open_question = '', next_check_at = NULL,
        last_action = %(action)s, updated_at = %(now)s
    FROM retired WHERE q.id = %(request_id)s
), released AS (
    INSERT INTO entity_deletion_lease_events (request_id, event, owner, generation, at)
    SELECT %(request_id)s, 'release', %(owner)s, %(generation)s, %(now)s FROM retired
)
SELECT (SELECT count(*) FROM entity_deletion_stage_history
        WHERE request_id = %(request_id)s AND status = 'completed')
FROM retired

-- name: cancel_at_boundary
-- A recorded cancellation ends the request at a transition; completed stages stay done. Its
-- effect-unknown and refusal alarms clear; a fault stays open until a person's decision closes it.
WITH r AS (
    UPDATE entity_deletion_requests
    SET status = 'cancelled', next_attempt_at = NULL, next_check_at = NULL, open_question = '',
        last_action = %(action)s, updated_at = %(now)s
    WHERE id = %(request_id)s AND lease_owner = %(owner)s AND lease_generation = %(generation)s
      AND cancel_requested_at IS NOT NULL AND status IN ('approved', 'running', 'retry_wait')
    RETURNING id
), settled AS (
    UPDATE entity_deletion_alarms al SET resolved_at = %(now)s
    FROM r WHERE al.request_id = r.id AND al.kind IN ('effect_unknown', 'boundary_refused') AND al.resolved_at IS NULL
), stopped AS (
    -- A row a dead worker left running never ran its effect (a submitted one is settled first):
    -- it waits again, and its open attempt closes as interrupted.
    UPDATE entity_deletion_stage_history h SET status = 'pending', last_error = 'cancelled before its effect'
    FROM r WHERE h.request_id = r.id AND h.is_current AND h.status = 'running' AND h.submitted_at IS NULL
    RETURNING h.id
), closed AS (
    UPDATE entity_deletion_stage_attempts a SET outcome = 'interrupted', finished_at = %(now)s
    FROM r WHERE a.request_id = r.id AND a.outcome = 'running'
)
SELECT id FROM r

-- name: clear_submitted
-- An operator confirmed the submitted effect was never applied: the next attempt may submit it.
UPDATE entity_deletion_stage_history SET submitted_at = NULL
WHERE request_id = %(request_id)s AND is_current AND status <> 'completed'

-- name: record_by_hand
-- An operator's record of an effect handed to them at a target that enforces nothing (the request
-- is locked): applied with their evidence, or not applied, answering the hand-over `attempt`; or an
-- approver's correction of such a record (`corrects`), kept beside it. Append-only; the latest one
-- counts. One record per hand-over, and an effect recorded applied once (the constraints refuse more).
INSERT INTO entity_deletion_operator_records
    (request_id, operation_id, stage, applied, has_agents, evidence, recorded_by, recorded_at, attempt, corrects_id)
VALUES (%(request_id)s, %(operation_id)s, %(stage)s, %(applied)s, %(has_agents)s, %(evidence)s, %(by)s, %(now)s,
        %(attempt)s, %(corrects)s)
RETURNING id
