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
    for name, perms in GROUPS.items():
        group, _ = group_model.objects.get_or_create(name=name)
        wanted = [
            permission_model.objects.get(content_type__app_label=app, codename=codename) for app, codename in perms
        ]
        group.permissions.set(wanted)
