"""The effect lands in one statement: `target_apply`, the demo target's own function.

It does, in its caller's one transaction and in this order, what `demo_target.system.apply` did
in six statements: raise the request's fence to the grant's generation (refusing a lower one),
refuse a grant of an epoch below the one in force, return the first record of an operation
already applied, lock the person's membership and check the data version the approval saw,
delete, read the evidence there, move the version on, and record the operation with its
evidence. A refusal raises SQLSTATE TR001 (the kind in its message, the facts as JSON in its
detail), so nothing it did stays: the fence is not raised by a refused grant.
"""

from django.db import migrations

FUNCTION = r"""
CREATE OR REPLACE FUNCTION target_apply(
    p_operation uuid, p_request uuid, p_generation bigint, p_epoch bigint, p_action text, p_community uuid,
    p_handle text, p_expected_version bigint, p_executor text, p_grant text, p_now timestamptz, p_applied_at text
) RETURNS TABLE (out_recorded boolean, out_evidence jsonb, out_grant text, out_applied_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_fenced bigint;
    v_min_epoch bigint;
    v_raised_at timestamptz;
    v_done target_operations%ROWTYPE;
    v_membership bigint;
    v_version bigint;
    v_memberships bigint;
    v_before bigint;
    v_deleted bigint;
    v_agents bigint;
    v_after bigint;
    v_rows_left bigint;
    v_agents_left bigint;
    v_evidence jsonb := jsonb_build_object('applied_at', p_applied_at, 'generation', p_generation,
                                           'executor', p_executor);
BEGIN
    -- The request's fence, made on first sight, raised to this grant's generation.
    INSERT INTO target_fences AS f (request_id, generation, min_epoch) VALUES (p_request, p_generation, 0)
    ON CONFLICT (request_id) DO UPDATE SET generation = GREATEST(f.generation, EXCLUDED.generation)
    RETURNING f.generation, f.min_epoch, f.epoch_raised_at INTO v_fenced, v_min_epoch, v_raised_at;
    IF v_fenced > p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'stale',
            DETAIL = jsonb_build_object('fenced', v_fenced)::text;
    END IF;
    IF p_epoch < v_min_epoch THEN
        RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'revoked',
            DETAIL = jsonb_build_object('min_epoch', v_min_epoch, 'raised_at', v_raised_at)::text;
    END IF;
    -- Applied once: an operation already recorded answers with its first record.
    SELECT * INTO v_done FROM target_operations o WHERE o.operation_id = p_operation;
    IF FOUND THEN
        RETURN QUERY SELECT true, v_done.evidence, v_done."grant", v_done.applied_at;
        RETURN;
    END IF;
    IF p_community IS NULL THEN
        -- gate_user: the person can no longer act here; their memberships, counted.
        UPDATE target_people p SET gated_at = coalesce(p.gated_at, p_now) WHERE p.handle = p_handle
        RETURNING (SELECT count(*) FROM target_memberships m WHERE m.person_id = p.id) INTO v_memberships;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_a_person', DETAIL = '{}';
        END IF;
        v_evidence := v_evidence || jsonb_build_object('gated', true, 'memberships', v_memberships);
    ELSE
        -- The person's membership in the community, locked: nothing changes their data there
        -- until this commits.
        SELECT m.id, m.version INTO v_membership, v_version
        FROM target_memberships m JOIN target_people p ON p.id = m.person_id
        WHERE p.handle = p_handle AND m.community_id = p_community
        FOR UPDATE OF m;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'not_in_inventory', DETAIL = '{}';
        END IF;
        IF v_version IS DISTINCT FROM p_expected_version THEN
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'source_changed',
                DETAIL = jsonb_build_object('version', v_version)::text;
        END IF;
        IF p_action = 'purge_db' THEN
            -- The rows before (the statement's snapshot), the rows deleted and the agents there.
            WITH d AS (DELETE FROM target_posts WHERE membership_id = v_membership RETURNING 1)
            SELECT (SELECT count(*) FROM target_posts WHERE membership_id = v_membership), (SELECT count(*) FROM d),
                   (SELECT count(*) FROM target_agents WHERE membership_id = v_membership)
            INTO v_before, v_deleted, v_agents;
        ELSIF p_action = 'purge_agents' THEN
            WITH d AS (DELETE FROM target_agents WHERE membership_id = v_membership RETURNING 1)
            SELECT (SELECT count(*) FROM target_agents WHERE membership_id = v_membership), (SELECT count(*) FROM d)
            INTO v_before, v_deleted;
        ELSE
            RAISE EXCEPTION USING ERRCODE = 'TR001', MESSAGE = 'no_action', DETAIL = '{}';
        END IF;
        -- After the delete (a later statement sees it): the version moved on, and what remains.
        UPDATE target_memberships SET version = version + 1 WHERE id = v_membership RETURNING version INTO v_after;
        SELECT (SELECT count(*) FROM target_posts WHERE membership_id = v_membership),
               (SELECT count(*) FROM target_agents WHERE membership_id = v_membership)
        INTO v_rows_left, v_agents_left;
        IF p_action = 'purge_db' THEN
            v_evidence := v_evidence || jsonb_build_object(
                'rows_before', v_before, 'rows_deleted', v_deleted, 'rows_remaining', v_rows_left,
                'agents', v_agents, 'has_agents', v_agents > 0);
        ELSE
            v_evidence := v_evidence || jsonb_build_object(
                'agents_before', v_before, 'agents_removed', v_deleted, 'agents_remaining', v_agents_left);
        END IF;
        v_evidence := v_evidence || jsonb_build_object('version_before', p_expected_version, 'version_after', v_after);
    END IF;
    INSERT INTO target_operations
        (operation_id, request_id, action, community_id, generation, executor, "grant", evidence, applied_at)
    VALUES (p_operation, p_request, p_action, p_community, p_generation, p_executor, p_grant, v_evidence, p_now);
    RETURN QUERY SELECT false, v_evidence, p_grant, p_now;
END
$$
"""

DROP = (
    "DROP FUNCTION IF EXISTS target_apply(uuid, uuid, bigint, bigint, text, uuid, text, bigint, text, text, "
    "timestamptz, text)"
)


class Migration(migrations.Migration):
    dependencies = [("demo_target", "0002_fence_min_epoch")]

    operations = [migrations.RunSQL(FUNCTION, reverse_sql=DROP)]
