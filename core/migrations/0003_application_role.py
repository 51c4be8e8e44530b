"""The application's database role: it logs in, reads and writes rows, and owns nothing.

Migrations run as the role that owns the tables (the migration role: `postgres` on the embedded
server, `MIGRATION_DATABASE_URL`'s user elsewhere). The application connects as this one: no
superuser, no CREATEDB or CREATEROLE, owner of no table, so it cannot disable a trigger, switch
`session_replication_role`, alter or truncate a table; the evidence guards hold against it. Tables
later migrations create are granted to it by the default privileges set here.
"""

from django.conf import settings
from django.db import migrations


def create_role(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if connection.alias != "default":
        return  # the demo target system's database is another system's
    role = connection.ops.quote_name(settings.DATABASE_APP_ROLE)
    with connection.cursor() as cur:
        cur.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", [settings.DATABASE_APP_ROLE])
        found = cur.fetchone()
        if found is None:
            cur.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS")
        elif found[0]:
            raise RuntimeError(f"DATABASE_APP_ROLE {settings.DATABASE_APP_ROLE} is a superuser: name another role")
        database = connection.ops.quote_name(connection.settings_dict["NAME"])
        for sql in (
            f"GRANT CONNECT, TEMPORARY ON DATABASE {database} TO {role}",
            f"GRANT USAGE ON SCHEMA public TO {role}",
            # No TRUNCATE, REFERENCES or TRIGGER: rows only, and the row triggers always fire.
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}",
            f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}",
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}",
            f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}",
        ):
            cur.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("core", "0002_tokens_user_index_is_the_wider_one")]

    operations = [migrations.RunPython(create_role, migrations.RunPython.noop, elidable=False)]
