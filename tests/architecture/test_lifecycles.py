"""Every lifecycle column is a protected FSM field whose transitions are the only way it changes."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db.models import Model
from django_fsm import FSMField, TransitionNotAllowed

OUR_APPS = ("deletions", "retirements", "api", "ops")
LIFECYCLE_NAMES = ("status", "lifecycle")


def lifecycle_fields() -> list[tuple[type[Model], str]]:
    found = []
    for app in OUR_APPS:
        for model in apps.get_app_config(app).get_models():
            found += [(model, f.name) for f in model._meta.get_fields() if f.name in LIFECYCLE_NAMES]
    return found


def label(model: type[Model], name: str) -> str:
    return f"{model._meta.label}.{name}"


def fsm_field(model: type[Model], name: str) -> FSMField:
    field = model._meta.get_field(name)
    assert isinstance(field, FSMField), f"{label(model, name)} is not an FSMField"
    return field


def test_the_walk_finds_every_workflow_lifecycle() -> None:
    # A guard on the walk itself: if these disappear the test below would pass vacuously.
    assert {label(m, n) for m, n in lifecycle_fields()} == {
        "deletions.DeletionRequest.status",
        "deletions.StageHistory.status",
        "retirements.Workspace.lifecycle",
        "retirements.RetirementRequest.status",
        "retirements.NoticeSlot.status",
        "retirements.RetirementWatcher.status",
        "retirements.PurgeJob.status",
        "ops.Notification.status",
        "api.WebhookDelivery.status",
    }


@pytest.mark.parametrize(("model", "name"), lifecycle_fields(), ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_lifecycle_is_a_protected_fsm_field(model: type[Model], name: str) -> None:
    field = fsm_field(model, name)
    assert field.protected, f"{label(model, name)} is not protected"
    row = model(**{name: field.default})
    with pytest.raises(AttributeError):
        setattr(row, name, "anything")


def illegal_moves(model: type[Model], name: str) -> list[tuple[str, str]]:
    """(state, transition) pairs where the transition does not start from that state."""
    field = fsm_field(model, name)
    states = [str(value) for value, _ in field.flatchoices]
    moves: list[tuple[str, str]] = []
    for transition in field.get_all_transitions(model):
        if transition.source in ("*", "+"):
            continue
        moves += [(state, transition.name) for state in states if state != transition.source]
    return sorted(set(moves) - legal_moves(model, name))


def legal_moves(model: type[Model], name: str) -> set[tuple[str, str]]:
    field = fsm_field(model, name)
    return {(str(t.source), str(t.name)) for t in field.get_all_transitions(model)}


@pytest.mark.parametrize(("model", "name"), lifecycle_fields(), ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_every_illegal_transition_is_refused(model: type[Model], name: str) -> None:
    moves = illegal_moves(model, name)
    assert moves, f"{label(model, name)} has no transition that any state may not take"
    for state, transition in moves:
        row = model(**{name: state})
        with pytest.raises(TransitionNotAllowed):
            getattr(row, transition)()
        assert getattr(row, name) == state, f"{label(model, name)}: a refused {transition} changed the state"


@pytest.mark.django_db
@pytest.mark.parametrize(("model", "name"), lifecycle_fields(), ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_the_database_guards_exactly_the_declared_moves(model: type[Model], name: str) -> None:
    """Raw SQL is held to the same moves: the trigger installed on the table allows exactly the
    moves the model declares now (a declaration changed without a migration fails here)."""
    import re

    from django.db import connection

    from core.lifecycle import declared_moves

    with connection.cursor() as cur:
        cur.execute(
            "SELECT pg_get_functiondef(p.oid) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
            " WHERE t.tgrelid = %s::regclass AND t.tgname LIKE %s",
            [model._meta.db_table, "pgtrigger_%moves_as_declared%"],
        )
        bodies = [r[0] for r in cur.fetchall()]
    assert len(bodies) == 1, f"{label(model, name)}: {len(bodies)} move guards installed"
    allowed = re.search(r"ARRAY\[(.*?)\]", bodies[0])
    assert allowed is not None
    installed = {tuple(m.split(">")) for m in re.findall(r"'([a-z_]+>[a-z_]+)'", allowed.group(1))}
    assert installed == set(declared_moves(model, name))
