"""Staff groups: operators, approvers, auditors, legal (workspace protections), support (read-only) and
intake (service accounts of other systems). Idempotent."""

from __future__ import annotations

from typing import Any

GROUPS: dict[str, list[tuple[str, str]]] = {
    "operators": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "submit_deletionrequest"),
        ("deletions", "cancel_deletionrequest"),
        ("deletions", "run_deletionrequest"),
        ("deletions", "assign_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "request_retirement"),
        ("retirements", "hold_retirementrequest"),
        ("retirements", "cancel_retirementrequest"),
        ("retirements", "resume_retirementrequest"),
        ("retirements", "retry_notices_retirementrequest"),
        ("retirements", "assign_retirementrequest"),
    ],
    "approvers": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "approve_deletionrequest"),
        ("deletions", "cancel_deletionrequest"),  # a case back in review is theirs: approve again or cancel
        ("deletions", "assign_deletionrequest"),
        ("deletions", "extend_deadline_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "assign_retirementrequest"),
        ("ops", "place_recordshold"),
    ],
    # Reads every case in full and its proof (core.access); decides nothing.
    "auditors": [
        ("deletions", "view_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
    ],
    "legal": [
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "protect_workspace"),
        ("ops", "place_recordshold"),
    ],
    "support (read-only)": [
        ("deletions", "view_deletionrequest"),
        ("retirements", "view_workspace"),
        ("retirements", "view_retirementrequest"),
    ],
    # Service accounts of intake systems (a privacy portal, a ticketing system): submit and read only.
    "intake": [
        ("deletions", "view_deletionrequest"),
        ("deletions", "submit_deletionrequest"),
        ("retirements", "view_retirementrequest"),
        ("retirements", "request_retirement"),
    ],
}


def _pick(app: str, codename: str, candidates: list[tuple[int, str]]) -> int:
    """The permission (app, codename) names. Two models of one app may declare the same codename:
    then the one of the model the codename ends with (Django's `action_model`) is meant."""
    if len(candidates) == 1:
        return candidates[0][0]
    meant = [pk for pk, model in candidates if codename.endswith(f"_{model}")]
    if len(meant) != 1:
        models = ", ".join(sorted(model for _, model in candidates))
        raise LookupError(f"permission {app}.{codename} is declared by several models ({models}); name one")
    return meant[0]


def ensure_groups(group_model: Any, permission_model: Any) -> None:
    """Every group with exactly its permissions: one read of the permissions, one of each group's,
    and a write only where a group differs."""
    codes = {codename for perms in GROUPS.values() for _, codename in perms}
    found: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for pk, app, model, codename in permission_model.objects.filter(codename__in=codes).values_list(
        "pk", "content_type__app_label", "content_type__model", "codename"
    ):
        found.setdefault((app, codename), []).append((pk, model))
    for name, perms in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        missing = [f"{app}.{codename}" for app, codename in perms if (app, codename) not in found]
        if missing:
            raise LookupError(f"group {name}: no permission {', '.join(missing)} (migrate first)")
        wanted = {_pick(app, codename, found[(app, codename)]) for app, codename in perms}
        if set(group.permissions.values_list("pk", flat=True)) != wanted:
            group.permissions.set(wanted)
