"""Every lifecycle column is a protected FSM field whose transitions are the only way it changes."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db.models import Model
from django_fsm import FSMField, TransitionNotAllowed

OUR_APPS = ("deletions", "retirements", "ops")
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
