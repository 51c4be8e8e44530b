"""The database guard of a lifecycle column, generated from the model's django-fsm declarations.

`FSMGuard` is a django-pgtrigger trigger: whatever writes the table (the ORM, a store's named
statement, an operator's psql), PostgreSQL refuses an UPDATE that changes the column in a way no
transition of the model declares. Its SQL is compiled from the transitions when migrations are
made, so the migration holds the moves as they were declared then, and `makemigrations --check`
(a test) fails when a declaration changes without a migration.
"""

from __future__ import annotations

from typing import Any

import pgtrigger
from django.apps import apps
from django_fsm import ANY_OTHER_STATE, ANY_STATE, FSMFieldMixin


def declared_moves(model: Any, field_name: str) -> list[tuple[str, str]]:
    """Every (from, to) pair the model's transitions on `field_name` declare, self-loops left out."""
    field = model._meta.get_field(field_name)
    if not isinstance(field, FSMFieldMixin):
        raise TypeError(f"{model._meta.label}.{field_name} is not an FSM field")
    states = [str(value) for value, _ in field.flatchoices]
    moves: set[tuple[str, str]] = set()
    for move in field.get_all_transitions(model):
        sources = states if move.source in (ANY_STATE, ANY_OTHER_STATE) else [str(move.source)]
        for source in sources:
            if move.target is not None and str(move.target) != source:
                moves.add((source, str(move.target)))
    return sorted(moves)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class FSMGuard(pgtrigger.Trigger):
    """Refuse any change of `field` that is not a declared transition (SQLSTATE 23514, an
    IntegrityError in Django), naming the table, the column and both states."""

    when = pgtrigger.Before
    operation = pgtrigger.Update

    def __init__(self, *, name: str, field: str) -> None:
        self.field = field
        super().__init__(name=name, condition=pgtrigger.AnyChange(field))

    def get_func(self, model: Any) -> str:
        # Migrations compile triggers on their historical models, which carry no transitions:
        # the declarations are read from the live model of the same name.
        live = apps.get_model(model._meta.app_label, model._meta.model_name)
        column = live._meta.get_field(self.field).column
        moves = declared_moves(live, self.field)
        if not moves:
            raise ValueError(f"{live._meta.label}.{self.field} declares no transition to guard")
        allowed = ", ".join(_literal(f"{a}>{b}") for a, b in moves)
        return (
            f'IF NOT (OLD."{column}" || \'>\' || NEW."{column}") = ANY (ARRAY[{allowed}]::text[]) THEN '
            f"RAISE EXCEPTION 'lifecycle: %.{column} may not move from % to % (no such transition is declared)', "
            f'TG_TABLE_NAME, OLD."{column}", NEW."{column}" USING ERRCODE = \'23514\'; '
            "END IF; RETURN NEW;"
        )


# The retention job's mark (`SET LOCAL backoffice.retention = 'on'`, in its own transaction): the
# only writer an evidence row's DELETE is allowed to (`ops.retention`). Nothing else sets it.
RETENTION_SETTING = "backoffice.retention"
_RETAINED = f"current_setting('{RETENTION_SETTING}', true) = 'on'"


def retention_on(cursor: Any) -> None:
    """Mark this transaction as the retention job's (inside atomic(); ends with it)."""
    cursor.execute("SELECT set_config(%s, 'on', true)", [RETENTION_SETTING])


class AppendOnly(pgtrigger.Trigger):
    """Evidence rows (decision logs, operator records): never rewritten, and never deleted but by
    the retention job, which reduces a closed case past its period to a tombstone."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def get_func(self, model: Any) -> str:
        return (
            f"IF TG_OP = 'DELETE' AND {_RETAINED} THEN RETURN OLD; END IF; "
            "RAISE EXCEPTION '%: evidence rows are never rewritten or deleted', TG_TABLE_NAME "
            "USING ERRCODE = '23514';"
        )


class SetOnce(pgtrigger.Trigger):
    """Evidence rows: never deleted (but by the retention job), never rewritten, except that
    `column` may be set once, from NULL to a value (an approval's revocation). Compares the whole
    row as JSON without that column, so a column added later is guarded too."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def __init__(self, *, name: str, column: str) -> None:
        self.column = column
        super().__init__(name=name)

    def get_func(self, model: Any) -> str:
        col = self.column
        return (
            f"IF TG_OP = 'DELETE' AND {_RETAINED} THEN RETURN OLD; END IF; "
            "IF TG_OP = 'DELETE' THEN "
            "RAISE EXCEPTION '%: evidence rows are never deleted', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; "
            f"IF (to_jsonb(OLD) - '{col}') IS DISTINCT FROM (to_jsonb(NEW) - '{col}') "
            f'OR OLD."{col}" IS NOT NULL OR NEW."{col}" IS NULL THEN '
            f"RAISE EXCEPTION '%: evidence rows are never rewritten; only {col} may be set, once', TG_TABLE_NAME "
            "USING ERRCODE = '23514'; END IF; RETURN NEW;"
        )


class EvidenceOnceFinal(pgtrigger.Trigger):
    """Rows that become evidence once final (a completed stage, a finished attempt): never deleted
    but by the retention job; once `final` (an SQL condition on OLD) holds, an update passes only
    if `allowed` (an SQL condition on OLD and NEW: the one move the store makes on a final row)
    holds, or, with `retained`, the retention job's own change (`retained`, on OLD and NEW)."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def __init__(self, *, name: str, what: str, final: str, allowed: str, retained: str = "false") -> None:
        self.what, self.final, self.allowed, self.retained = what, final, allowed, retained
        super().__init__(name=name)

    def get_func(self, model: Any) -> str:
        what = self.what.replace("'", "''")
        return (
            f"IF TG_OP = 'DELETE' AND {_RETAINED} THEN RETURN OLD; END IF; "
            "IF TG_OP = 'DELETE' THEN "
            f"RAISE EXCEPTION '%: {what} is evidence: never deleted (but by the retention job)', TG_TABLE_NAME "
            "USING ERRCODE = '23514'; END IF; "
            f"IF NOT ({self.final}) OR ({self.allowed}) OR ({_RETAINED} AND ({self.retained})) THEN "
            "RETURN NEW; END IF; "
            f"RAISE EXCEPTION '%: {what} is evidence once final: never rewritten', TG_TABLE_NAME "
            "USING ERRCODE = '23514';"
        )
