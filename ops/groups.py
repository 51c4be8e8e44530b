"""Staff groups: operators, approvers, legal (workspace protections), support (read-only). Idempotent."""

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
}


def ensure_groups(group_model: Any, permission_model: Any) -> None:
    """Every group with exactly its permissions: one read of the permissions, one of each group's,
    and a write only where a group differs."""
    codes = {codename for perms in GROUPS.values() for _, codename in perms}
    found = {
        (app, codename): pk
        for pk, app, codename in permission_model.objects.filter(codename__in=codes).values_list(
            "pk", "content_type__app_label", "codename"
        )
    }
    for name, perms in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        missing = [f"{app}.{codename}" for app, codename in perms if (app, codename) not in found]
        if missing:
            raise LookupError(f"group {name}: no permission {', '.join(missing)} (migrate first)")
        wanted = {found[(app, codename)] for app, codename in perms}
        if set(group.permissions.values_list("pk", flat=True)) != wanted:
            group.permissions.set(wanted)
