"""Custody the database holds (issue 51 item 6): an open retirement has an owner, a held one a
backup and its review date (held_at); the owner and backup named are active staff allowed to hold
retirements (a trigger, whatever writes the row)."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retirements", "0020_notices_fenced"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name="retirementrequest",
            trigger=pgtrigger.compiler.Trigger(
                name="custody_names_who_may_act",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    declare="DECLARE perm text; rota text;",
                    func="IF NOT ((TG_OP = 'INSERT' OR NEW.owner_id IS DISTINCT FROM OLD.owner_id) OR (TG_OP = 'INSERT' OR NEW.backup_id IS DISTINCT FROM OLD.backup_id)) THEN RETURN NEW; END IF; IF NEW.status NOT IN ('waiting', 'held', 'executing') THEN RETURN NEW; END IF; IF NEW.owner_id IS NULL AND NEW.backup_id IS NULL THEN RETURN NEW; END IF; perm := 'retirements.hold_retirementrequest'; rota := 'operators on call'; IF NEW.owner_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.owner_id IS DISTINCT FROM OLD.owner_id) AND NOT COALESCE((SELECT u.is_active AND u.is_staff AND (u.is_superuser OR EXISTS (\n        SELECT 1 FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id\n        WHERE ct.app_label = split_part(perm, '.', 1) AND p.codename = split_part(perm, '.', 2) AND (\n            EXISTS (SELECT 1 FROM auth_user_user_permissions d WHERE d.user_id = u.id AND d.permission_id = p.id)\n            OR EXISTS (SELECT 1 FROM auth_user_groups m JOIN auth_group_permissions g ON g.group_id = m.group_id\n                       WHERE m.user_id = u.id AND g.permission_id = p.id))))\n        FROM auth_user u WHERE u.id = NEW.owner_id), false) THEN RAISE EXCEPTION 'custody: %: the person named (user %) may not act for the % rota: only active staff holding %', TG_TABLE_NAME, NEW.owner_id, rota, perm USING ERRCODE = '23514'; END IF; IF NEW.backup_id IS NOT NULL AND (TG_OP = 'INSERT' OR NEW.backup_id IS DISTINCT FROM OLD.backup_id) AND NOT COALESCE((SELECT u.is_active AND u.is_staff AND (u.is_superuser OR EXISTS (\n        SELECT 1 FROM auth_permission p JOIN django_content_type ct ON ct.id = p.content_type_id\n        WHERE ct.app_label = split_part(perm, '.', 1) AND p.codename = split_part(perm, '.', 2) AND (\n            EXISTS (SELECT 1 FROM auth_user_user_permissions d WHERE d.user_id = u.id AND d.permission_id = p.id)\n            OR EXISTS (SELECT 1 FROM auth_user_groups m JOIN auth_group_permissions g ON g.group_id = m.group_id\n                       WHERE m.user_id = u.id AND g.permission_id = p.id))))\n        FROM auth_user u WHERE u.id = NEW.backup_id), false) THEN RAISE EXCEPTION 'custody: %: the backup named (user %) may not act for the % rota: only active staff holding %', TG_TABLE_NAME, NEW.backup_id, rota, perm USING ERRCODE = '23514'; END IF; RETURN NEW;",
                    hash="1439eddf55729fda9abcd288b38afb570a70a74c",
                    operation="INSERT OR UPDATE",
                    pgid="pgtrigger_custody_names_who_may_act_aa811",
                    table="retirements_retirementrequest",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.AddConstraint(
            model_name="retirementrequest",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status__in", ["waiting", "held", "executing"]), _negated=True),
                    ("owner__isnull", False),
                    _connector="OR",
                ),
                name="retirement_open_case_has_an_owner",
            ),
        ),
        migrations.AddConstraint(
            model_name="retirementrequest",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("status", "held"), _negated=True),
                    models.Q(("backup__isnull", False), ("held_at__isnull", False)),
                    _connector="OR",
                ),
                name="retirement_held_case_has_a_backup_and_a_review",
            ),
        ),
    ]
