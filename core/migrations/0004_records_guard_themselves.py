"""The records guard themselves (issue 51 items 3-4): the retention job's pass, and Django's admin
history insert only.

`core_retention_passes` holds a row for a transaction while a retention function (ops migration
0016: SECURITY DEFINER, owned by the migration role) deletes the rows of one closed case past its
period under no records hold; the evidence triggers let a DELETE through only then
(`core.lifecycle.RETAINED`). The application's role may read it and never write it, so nothing it
sets or runs opens a guard (the old `backoffice.retention` setting did, for any case). Django's
admin history (`django_admin_log`) is appended to and never rewritten or deleted, but by that job.
"""

from django.conf import settings
from django.db import migrations

PASSES = """
CREATE TABLE core_retention_passes (
    xact xid8 PRIMARY KEY,
    opened_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE core_retention_passes IS
    'The retention functions'' pass for their own transaction (ops migration 0016); the application never writes it.';
"""

ADMIN_LOG = """
CREATE FUNCTION admin_log_insert_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT 1 FROM public.core_retention_passes WHERE xact = pg_catalog.pg_current_xact_id()
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION '%: the admin''s history is never rewritten or deleted (but by the retention job)',
        TG_TABLE_NAME USING ERRCODE = '23514';
END $$;
CREATE TRIGGER admin_log_insert_only BEFORE UPDATE OR DELETE ON django_admin_log
    FOR EACH ROW EXECUTE FUNCTION admin_log_insert_only();
"""

UNDO = """
DROP TRIGGER IF EXISTS admin_log_insert_only ON django_admin_log;
DROP FUNCTION IF EXISTS admin_log_insert_only();
DROP TABLE IF EXISTS core_retention_passes;
"""


def read_only_for_the_application(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if connection.alias != "default":
        return
    role = connection.ops.quote_name(settings.DATABASE_APP_ROLE)
    with connection.cursor() as cur:
        # The default privileges (0003) granted it rows of every new table: not of this one.
        cur.execute(f"REVOKE ALL ON core_retention_passes FROM {role}")
        cur.execute(f"GRANT SELECT ON core_retention_passes TO {role}")


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0003_application_role"),
        ("admin", "0003_logentry_add_action_flag_choices"),
    ]

    operations = [
        migrations.RunSQL(PASSES + ADMIN_LOG, UNDO),
        migrations.RunPython(read_only_for_the_application, migrations.RunPython.noop, elidable=False),
    ]
