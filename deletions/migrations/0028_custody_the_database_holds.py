"""Custody the database holds, one record per supervised effect (issue 51 items 2 and 6).

A case waiting on people has a next check; once a rota named people for the state it is in, a person
and a backup, who may act for that rota and are never its submitter (check constraints and a
trigger, whatever writes the row); a waiting case is never the system's to hold. An open fault (an
integrity alarm, an effect applied by hand after withdrawal) stops approval and completion, and a
case with an effect applied after withdrawal never completes. A fault closes only with a person's
close_alarm decision (the alarm names it). An operator's record of a hand-applied effect is final:
one per hand-over, an applied effect recorded once; a correction is a new record linked to the one
it corrects, by another person.

Rows written before these rules are brought in line first: a naming that named nobody is dropped
(the rota names again), and a waiting case without a next check is due now.
"""

import django.db.models.deletion
import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models

IN_LINE = """
UPDATE entity_deletion_requests SET assigned_for = ''
WHERE (assignee_id IS NULL OR backup_id IS NULL) AND assigned_for <> ''
  AND split_part(assigned_for, ':', 1) = status
  AND substr(assigned_for, length(status) + 2) IN ('approvers', 'operators on call');
UPDATE entity_deletion_requests SET next_check_at = updated_at
WHERE next_check_at IS NULL
  AND (status IN ('submitted', 'needs_review', 'needs_attention') OR (status = 'retry_wait' AND open_question <> ''));
"""


class Migration(migrations.Migration):
    dependencies = [
        ("deletions", "0027_records_guard_themselves"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunSQL(IN_LINE, migrations.RunSQL.noop),
        migrations.AddField(
            model_name="deletionalarm",
            name="decision",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="the decision that closed it (who, when and why)",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="deletions.deletiondecision",
            ),
        ),
        migrations.AddField(
            model_name="operatorrecord",
            name="attempt",
            field=models.IntegerField(blank=True, help_text="the hand-over it answers (none before 51)", null=True),
        ),
        migrations.AddField(
            model_name="operatorrecord",
            name="corrects",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="correction",
                to="deletions.operatorrecord",
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionalarm",
            trigger=pgtrigger.compiler.Trigger(
                name="a_fault_closes_by_a_named_decision",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (OLD.resolved_at IS NULL AND NEW.resolved_at IS NOT NULL AND OLD.kind IN ('integrity_fault', 'applied_after_withdrawal'))",
                    func="IF NOT EXISTS (SELECT 1 FROM entity_deletion_decisions d WHERE d.id = NEW.decision_id AND d.request_id = NEW.request_id AND d.action = 'close_alarm' AND d.actor_id IS NOT NULL AND btrim(d.reason) <> '') THEN RAISE EXCEPTION '%: a % alarm is closed only by a person''s close_alarm decision on its case, with a reason', TG_TABLE_NAME, OLD.kind USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="29232b03b0e735f3437ddd280ed7a3ce4aece77f",
                    operation="UPDATE",
                    pgid="pgtrigger_a_fault_closes_by_a_named_decision_5dafa",
                    table="entity_deletion_alarms",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionrequest",
            trigger=pgtrigger.compiler.Trigger(
                name="custody_names_who_may_act",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    declare="DECLARE perm text; rota text;",
                    func="IF NOT ((TG_OP = 'INSERT' OR NEW.assignee_id IS DISTINCT FROM OLD.assignee_id OR NEW.assigned_for IS DISTINCT FROM OLD.assigned_for) OR (TG_OP = 'INSERT' OR NEW.backup_id IS DISTINCT FROM OLD.backup_id OR NEW.assigned_for IS DISTINCT FROM OLD.assigned_for)) THEN RETURN NEW; END IF; IF NEW.assignee_id IS NULL AND NEW.backup_id IS NULL THEN RETURN NEW; END IF; IF TG_OP = 'INSERT' AND split_part(NEW.assigned_for, ':', 1) <> NEW.status THEN RETURN NEW; END IF; IF split_part(NEW.assigned_for, ':', 1) <> NEW.status THEN RAISE EXCEPTION 'custody: %: people are named only for the state the case is in (%, named for %)', TG_TABLE_NAME, NEW.status, NEW.assigned_for USING ERRCODE = '23514'; END IF; rota := substr(NEW.assigned_for, length(NEW.status) + 2); perm := CASE rota WHEN 'approvers' THEN 'deletions.approve_deletionrequest' WHEN 'operators on call' THEN 'deletions.run_deletionrequest' END; IF perm IS NULL THEN RAISE EXCEPTION 'custody: %: nobody is named while the % holds the case', TG_TABLE_NAME, rota USING ERRCODE = '23514'; END IF; IF NEW.requested_by_user_id IS NOT NULL AND NEW.requested_by_user_id IN (NEW.assignee_id, NEW.backup_id) THEN RAISE EXCEPTION 'custody: %: its submitter never holds the case, as person or backup (four eyes)', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; IF NEW.assignee_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.assignee_id IS DISTINCT FROM OLD.assignee_id OR NEW.assigned_for IS DISTINCT FROM OLD.assigned_for) AND NOT COALESCE((SELECT u.is_active AND u.is_staff AND (u.is_superuser OR EXISTS (\n        SELECT 1 FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id\n        WHERE ct.app_label = split_part(perm, '.', 1) AND p.codename = split_part(perm, '.', 2) AND (\n            EXISTS (SELECT 1 FROM auth_user_user_permissions d WHERE d.user_id = u.id AND d.permission_id = p.id)\n            OR EXISTS (SELECT 1 FROM auth_user_groups m JOIN auth_group_permissions g ON g.group_id = m.group_id\n                       WHERE m.user_id = u.id AND g.permission_id = p.id))))\n        FROM auth_user u WHERE u.id = NEW.assignee_id), false) THEN RAISE EXCEPTION 'custody: %: the person named (user %) may not act for the % rota: only active staff holding %', TG_TABLE_NAME, NEW.assignee_id, rota, perm USING ERRCODE = '23514'; END IF; IF NEW.backup_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.backup_id IS DISTINCT FROM OLD.backup_id OR NEW.assigned_for IS DISTINCT FROM OLD.assigned_for) AND NOT COALESCE((SELECT u.is_active AND u.is_staff AND (u.is_superuser OR EXISTS (\n        SELECT 1 FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id\n        WHERE ct.app_label = split_part(perm, '.', 1) AND p.codename = split_part(perm, '.', 2) AND (\n            EXISTS (SELECT 1 FROM auth_user_user_permissions d WHERE d.user_id = u.id AND d.permission_id = p.id)\n            OR EXISTS (SELECT 1 FROM auth_user_groups m JOIN auth_group_permissions g ON g.group_id = m.group_id\n                       WHERE m.user_id = u.id AND g.permission_id = p.id))))\n        FROM auth_user u WHERE u.id = NEW.backup_id), false) THEN RAISE EXCEPTION 'custody: %: the backup named (user %) may not act for the % rota: only active staff holding %', TG_TABLE_NAME, NEW.backup_id, rota, perm USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="ad442a06625fe6e344e2a28fc28bed80e26e077a",
                    operation="INSERT OR UPDATE",
                    pgid="pgtrigger_custody_names_who_may_act_8214d",
                    table="entity_deletion_requests",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="deletionrequest",
            trigger=pgtrigger.compiler.Trigger(
                name="no_approval_or_completion_past_a_fault",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (NEW.status IS DISTINCT FROM OLD.status AND NEW.status IN ('approved', 'completed'))",
                    declare="DECLARE fault text;",
                    func="SELECT a.kind INTO fault FROM entity_deletion_alarms a WHERE a.request_id = NEW.id AND a.kind IN ('integrity_fault', 'applied_after_withdrawal') AND a.resolved_at IS NULL ORDER BY a.created_at LIMIT 1; IF fault IS NOT NULL THEN RAISE EXCEPTION 'deletion %: an open % alarm stops it from being %; a person closes it with a reason first', NEW.id, fault, NEW.status USING ERRCODE = '23514'; END IF; IF NEW.status = 'completed' AND EXISTS (SELECT 1 FROM entity_deletion_alarms a WHERE a.request_id = NEW.id AND a.kind = 'applied_after_withdrawal') THEN RAISE EXCEPTION 'deletion %: an effect was applied by hand after its approval was withdrawn: such a case is cancelled, never completed', NEW.id USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="ef0a39087e00044347c6f592eec8e4bd777a1b0a",
                    operation="UPDATE",
                    pgid="pgtrigger_no_approval_or_completion_past_a_fault_77465",
                    table="entity_deletion_requests",
                    when="BEFORE",
                ),
            ),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="operatorrecord",
            trigger=pgtrigger.compiler.Trigger(
                name="a_correction_is_another_persons",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    condition="WHEN (NEW.corrects_id IS NOT NULL)",
                    func="IF NOT EXISTS (SELECT 1 FROM entity_deletion_operator_records o WHERE o.id = NEW.corrects_id AND o.request_id = NEW.request_id AND o.operation_id = NEW.operation_id AND o.recorded_by <> NEW.recorded_by) THEN RAISE EXCEPTION '%: a correction names a record of the same operation, made by another person', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="b9817cdef86eef81f68d2cf106906e7d19730f83",
                    operation="INSERT",
                    pgid="pgtrigger_a_correction_is_another_persons_13440",
                    table="entity_deletion_operator_records",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.AddConstraint(
            model_name="deletionrequest",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("status__in", ("submitted", "needs_review", "needs_attention")),
                        models.Q(("status", "retry_wait"), models.Q(("open_question", ""), _negated=True)),
                        _connector="OR",
                        _negated=True,
                    ),
                    ("next_check_at__isnull", False),
                    _connector="OR",
                ),
                name="deletion_waiting_has_a_next_check",
            ),
        ),
        migrations.AddConstraint(
            model_name="deletionrequest",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        models.Q(
                            ("assigned_for__in", ["submitted:approvers", "submitted:operators on call"]),
                            ("status", "submitted"),
                        ),
                        models.Q(
                            ("assigned_for__in", ["approved:approvers", "approved:operators on call"]),
                            ("status", "approved"),
                        ),
                        models.Q(
                            ("assigned_for__in", ["running:approvers", "running:operators on call"]),
                            ("status", "running"),
                        ),
                        models.Q(
                            ("assigned_for__in", ["retry_wait:approvers", "retry_wait:operators on call"]),
                            ("status", "retry_wait"),
                        ),
                        models.Q(
                            ("assigned_for__in", ["needs_attention:approvers", "needs_attention:operators on call"]),
                            ("status", "needs_attention"),
                        ),
                        models.Q(
                            ("assigned_for__in", ["needs_review:approvers", "needs_review:operators on call"]),
                            ("status", "needs_review"),
                        ),
                        _connector="OR",
                        _negated=True,
                    ),
                    models.Q(("assignee__isnull", False), ("backup__isnull", False)),
                    _connector="OR",
                ),
                name="deletion_named_case_has_person_and_backup",
            ),
        ),
        migrations.AddConstraint(
            model_name="deletionrequest",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("assigned_for__in", ["submitted:system"]), ("status", "submitted")),
                    models.Q(("assigned_for__in", ["needs_review:system"]), ("status", "needs_review")),
                    models.Q(("assigned_for__in", ["needs_attention:system"]), ("status", "needs_attention")),
                    _connector="OR",
                    _negated=True,
                ),
                name="deletion_waiting_case_is_held_by_people",
            ),
        ),
        migrations.AddConstraint(
            model_name="operatorrecord",
            constraint=models.UniqueConstraint(
                condition=models.Q(("corrects__isnull", True)),
                fields=("operation_id", "attempt"),
                name="one_record_per_handover",
            ),
        ),
        migrations.AddConstraint(
            model_name="operatorrecord",
            constraint=models.UniqueConstraint(
                condition=models.Q(("applied", True), ("corrects__isnull", True)),
                fields=("operation_id",),
                name="applied_recorded_once",
            ),
        ),
    ]
