"""The database guard of a lifecycle column, generated from the model's django-fsm declarations.

`FSMGuard` is a django-pgtrigger trigger: whatever writes the table (the ORM, a store's named
statement, an operator's psql), PostgreSQL refuses an UPDATE that changes the column in a way no
transition of the model declares. Its SQL is compiled from the transitions when migrations are
made, so the migration holds the moves as they were declared then, and `makemigrations --check`
(a test) fails when a declaration changes without a migration.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def closed_by_a_named_decision(*, name: str, decisions: str, kinds: Iterable[str]) -> pgtrigger.Trigger:
    """An alarm of one of `kinds` (those no state move answers) is closed only with a person's
    `close_alarm` decision on its own case, with a reason: the row's `decision_id` names it in
    `decisions` (the workflow's decision log). Both workflows' alarms hold this one rule."""
    listed = ", ".join(_literal(kind) for kind in kinds)
    return pgtrigger.Trigger(
        name=name,
        when=pgtrigger.Before,
        operation=pgtrigger.Update,
        condition=pgtrigger.Condition(
            f"OLD.resolved_at IS NULL AND NEW.resolved_at IS NOT NULL AND OLD.kind IN ({listed})"
        ),
        func=(
            f"IF NOT EXISTS (SELECT 1 FROM {decisions} d WHERE d.id = NEW.decision_id "
            "AND d.request_id = NEW.request_id AND d.action = 'close_alarm' AND d.actor_id IS NOT NULL "
            "AND btrim(d.reason) <> '') THEN RAISE EXCEPTION "
            "'%: a % alarm is closed only by a person''s close_alarm decision on its case, with a reason', "
            "TG_TABLE_NAME, OLD.kind USING ERRCODE = '23514'; END IF; RETURN NEW;"
        ),
    )


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


# The retention job's pass: a row of this table for the current transaction, which only the
# retention functions write (SECURITY DEFINER, owned by the migration role: ops migration 0016), for
# the statements of one closed case past its period under no records hold, and remove before they
# return. The application's role may read the table, never write it, so no setting or statement of
# its own opens a guard; the name is schema-qualified, so no temporary table of a session stands in.
RETENTION_PASSES = "core_retention_passes"
RETAINED = f"EXISTS (SELECT 1 FROM public.{RETENTION_PASSES} WHERE xact = pg_catalog.pg_current_xact_id())"


class DeletedOnlyByRetention(pgtrigger.Trigger):
    """A case's working rows (its request, watchers, purge job, withdrawals): they change as the
    case moves (the lifecycle guards say how), and are deleted only by the retention job, with the
    rest of a closed case past its period (`RETAINED`)."""

    when = pgtrigger.Before
    operation = pgtrigger.Delete

    def get_func(self, model: Any) -> str:
        return (
            f"IF {RETAINED} THEN RETURN OLD; END IF; "
            "RAISE EXCEPTION '%: a case''s rows are deleted only by the retention job', TG_TABLE_NAME "
            "USING ERRCODE = '23514';"
        )


class SettledOnce(pgtrigger.Trigger):
    """Records settled once (an alarm resolved, a records hold released): `column` goes from NULL
    to a value once, in one update that may set the other columns of the settlement (those whose
    names start with one of `prefixes`: who settled it, why, under which decision) and nothing else;
    after that the row never changes. Never deleted, or (`retained`) only by the retention job."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def __init__(self, *, name: str, what: str, column: str, prefixes: tuple[str, ...], retained: bool = True) -> None:
        self.what, self.column, self.prefixes, self.retained = what, column, prefixes, retained
        super().__init__(name=name)

    def get_func(self, model: Any) -> str:
        what, col = self.what.replace("'", "''"), self.column
        named = " OR ".join(f"starts_with(k, '{p}')" for p in self.prefixes)
        settled = f"ARRAY(SELECT k FROM jsonb_object_keys(to_jsonb(OLD)) AS k WHERE {named})"
        columns = "/".join(f"{p}*" for p in self.prefixes)
        retained = f"IF TG_OP = 'DELETE' AND {RETAINED} THEN RETURN OLD; END IF; " if self.retained else ""
        return (
            f"{retained}IF TG_OP = 'DELETE' THEN "
            f"RAISE EXCEPTION '%: {what} is never deleted{' (but by the retention job)' if self.retained else ''}', "
            "TG_TABLE_NAME USING ERRCODE = '23514'; END IF; "
            f'IF OLD."{col}" IS NULL AND NEW."{col}" IS NOT NULL '
            f"AND (to_jsonb(NEW) - {settled}) = (to_jsonb(OLD) - {settled}) THEN RETURN NEW; END IF; "
            f"RAISE EXCEPTION '%: {what} is never rewritten; only {col} may be set, once (with its {columns} "
            "columns)', TG_TABLE_NAME USING ERRCODE = '23514';"
        )


class AppendOnly(pgtrigger.Trigger):
    """Evidence rows (decision logs, operator records): never rewritten, and never deleted but by
    the retention job, which reduces a closed case past its period to a tombstone."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def get_func(self, model: Any) -> str:
        return (
            f"IF TG_OP = 'DELETE' AND {RETAINED} THEN RETURN OLD; END IF; "
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
            f"IF TG_OP = 'DELETE' AND {RETAINED} THEN RETURN OLD; END IF; "
            "IF TG_OP = 'DELETE' THEN "
            "RAISE EXCEPTION '%: evidence rows are never deleted', TG_TABLE_NAME USING ERRCODE = '23514'; END IF; "
            f"IF (to_jsonb(OLD) - '{col}') IS DISTINCT FROM (to_jsonb(NEW) - '{col}') "
            f'OR OLD."{col}" IS NOT NULL OR NEW."{col}" IS NULL THEN '
            f"RAISE EXCEPTION '%: evidence rows are never rewritten; only {col} may be set, once', TG_TABLE_NAME "
            "USING ERRCODE = '23514'; END IF; RETURN NEW;"
        )


class EvidenceOnceFinal(pgtrigger.Trigger):
    """Rows that become evidence once final (a completed stage, a finished attempt, a sent
    notification): never deleted but by the retention job (or, with `kept`, an SQL condition on OLD,
    deleted freely while it does not hold: an outbox row not yet final); once `final` (an SQL
    condition on OLD) holds, an update passes only if `allowed` (an SQL condition on OLD and NEW: the
    one move the store makes on a final row) holds, or, with `retained`, the retention job's own
    change (`retained`, on OLD and NEW)."""

    when = pgtrigger.Before
    operation = pgtrigger.Update | pgtrigger.Delete

    def __init__(
        self, *, name: str, what: str, final: str, allowed: str, retained: str = "false", kept: str = "true"
    ) -> None:
        self.what, self.final, self.allowed, self.retained, self.kept = what, final, allowed, retained, kept
        super().__init__(name=name)

    def get_func(self, model: Any) -> str:
        what = self.what.replace("'", "''")
        deletable = RETAINED if self.kept == "true" else f"({RETAINED} OR NOT ({self.kept}))"
        return (
            f"IF TG_OP = 'DELETE' AND {deletable} THEN RETURN OLD; END IF; "
            "IF TG_OP = 'DELETE' THEN "
            f"RAISE EXCEPTION '%: {what} is evidence: never deleted (but by the retention job)', TG_TABLE_NAME "
            "USING ERRCODE = '23514'; END IF; "
            f"IF NOT ({self.final}) OR ({self.allowed}) OR ({RETAINED} AND ({self.retained})) THEN "
            "RETURN NEW; END IF; "
            f"RAISE EXCEPTION '%: {what} is evidence once final: never rewritten', TG_TABLE_NAME "
            "USING ERRCODE = '23514';"
        )


class ClaimFence(pgtrigger.Trigger):
    """A claim before a send (a notice slot, a notification: `status` 'sending', `claimed_by`,
    `claim_generation`) takes the next generation, and nothing else moves it: a new holder, or
    the same one claiming again, is always told from every earlier holder by the generation its
    sends and saves are fenced on. Renewing one's own claim (same holder, same generation) and
    settling it (another status) keep the generation."""

    when = pgtrigger.Before
    operation = pgtrigger.Update

    def __init__(self, *, name: str) -> None:
        super().__init__(name=name, condition=pgtrigger.AnyChange("status", "claimed_by", "claim_generation"))

    def get_func(self, model: Any) -> str:
        claimed = (
            "NEW.status = 'sending' AND (OLD.status <> 'sending' OR NEW.claimed_by IS DISTINCT FROM OLD.claimed_by)"
        )
        moved = "NEW.claim_generation IS DISTINCT FROM OLD.claim_generation"
        return (
            f"IF (({claimed}) OR {moved}) "
            "AND NOT (NEW.status = 'sending' AND NEW.claim_generation = OLD.claim_generation + 1) THEN "
            "RAISE EXCEPTION '%: a claim takes the next generation (% to %), and only a claim moves it', "
            "TG_TABLE_NAME, OLD.claim_generation, NEW.claim_generation USING ERRCODE = '23514'; "
            "END IF; RETURN NEW;"
        )
