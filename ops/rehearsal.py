"""The rehearsal tables (seed 003's failures, seed 000's restart points) mapped to the
automated tests that try each failure on real PostgreSQL. `manage.py rehearse` runs
them on a scratch database and fills in the Actual result from what they observed.

The "Failure to try" and "Required evidence" columns keep the seed's wording; only its
example names are translated: DATE-41-1 is an operation id, AP-9 an approval, D-41 the
case, the order system the target system.
"""

from __future__ import annotations

from dataclasses import dataclass

W = "tests/deletions/test_worker.py::"
WT = "tests/deletions/test_walkthrough.py::"
EU = "tests/deletions/test_effect_unknown.py::"
C = "tests/deletions/test_cancel.py::"
B = "tests/deletions/test_bad_input.py::"
A = "tests/deletions/test_authority.py::"
R = "tests/retirements/test_receivers.py::"


@dataclass(frozen=True)
class Row:
    table: str
    failure: str
    required: str
    tests: tuple[str, ...]


ROWS = (
    Row(
        "seed 003",
        "Worker stops while source is unavailable",
        "Replacement finds the case, checked evidence, open question, owner, and next safe read",
        (WT + "test_failure_then_retry_after_deadline_resumes_the_same_row",),
    ),
    Row(
        "seed 003",
        "Worker stops while approval waits",
        "Replacement finds the same proposal and current approval state",
        (B + "test_running_an_unapproved_request_is_refused",),
    ),
    Row(
        "seed 003",
        "Approval expires before application",
        "No update under expired approval; case returns to review",
        (
            WT + "test_expired_approval_sends_the_request_back_to_review",
            A + "test_approval_expiring_after_the_first_stage_blocks_new_effects",
        ),
    ),
    Row(
        "seed 003",
        "Two workers claim the same case version",
        "Only one worker claims the saved case; no competing change starts in the target system",
        (
            W + "test_two_workers_at_the_same_instant_only_one_runs_handlers",
            W + "test_two_worker_processes_at_the_same_instant_only_one_runs_handlers",
        ),
    ),
    Row(
        "seed 003",
        "Cancellation races with the worker",
        "Do not report cancelled after the update begins; check unknown results against the target system",
        (
            C + "test_cancellation_and_claim_race_exactly_one_wins",
            C + "test_cancel_while_a_worker_runs_blocks_the_pending_effect_and_stops",
        ),
    ),
    Row(
        "seed 003",
        "Submission times out and source cannot be read",
        "Same operation remains unknown, no blind repeat, owner alerted",
        (EU + "test_a_source_that_cannot_be_read_keeps_the_effect_unknown_and_alerts_the_owner",),
    ),
    Row(
        "seed 003",
        "Stored case records are restored from a backup after a target-system change",
        "Replacement worker finds the pending operation and checks it against the target system before resuming",
        ("tests/deletions/test_restore.py::test_restored_backup_does_not_repeat_an_applied_operation",),
    ),
    Row(
        "seed 003",
        "Worker stops after claiming Applying, before submission",
        "Hold and reconcile the operation id; claim expiry alone cannot release a replacement to write",
        (
            W + "test_crash_before_first_transition_initializes_on_takeover",
            W + "test_crash_during_handler_resumes_same_row_after_lease_expiry",
        ),
    ),
    Row(
        "seed 003",
        "Worker stops after submission, before saving the result",
        "Reconcile the same operation against target-system evidence; no blind resubmission",
        (
            W + "test_crash_after_effect_before_save_settles_from_the_target_system",
            EU + "test_found_effect_is_saved_from_the_record_without_resending",
        ),
    ),
    Row(
        "seed 003",
        "Original worker resumes late after a replacement is considered",
        "Receiving boundary rejects stale ownership with the effect and enforces current permission, approval, and "
        "proposal version",
        (
            W + "test_stale_generation_writes_are_rejected",
            R + "test_a_purge_executor_paused_past_its_lease_is_rejected_when_it_resumes",
        ),
    ),
    Row(
        "seed 003",
        "Two replacement workers race after claim expiry",
        "Only one current owner can apply the change; all attempts retain the operation id",
        (W + "test_two_replacement_workers_racing_after_expiry_only_one_takes_over",),
    ),
    Row(
        "seed 003",
        "Customer cancels or approval expires while the case is held",
        "Record the change, block new application under the old approval, and preserve investigation of the "
        "original operation",
        (
            C + "test_cancel_during_retry_wait_keeps_completed_stages",
            C + "test_cancel_while_a_worker_runs_blocks_the_pending_effect_and_stops",
            A + "test_approver_removed_between_stages_stops_the_next_stage_until_a_new_approval",
        ),
    ),
    Row(
        "seed 003",
        "Delayed target-system lookup says not found",
        "Do not infer no effect; hold until permitted source evidence can establish the result",
        (
            EU + "test_a_lagging_lookup_that_says_not_found_is_not_taken_as_no_effect",
            EU + "test_crash_after_submission_mark_stays_unknown_and_is_never_resent",
        ),
    ),
    Row(
        "seed 000",
        "Before the first transition",
        "Initialize an approved request with empty history",
        (W + "test_crash_before_first_transition_initializes_on_takeover",),
    ),
    Row(
        "seed 000",
        "During a handler",
        "Resume the unfinished current row after lease takeover",
        (W + "test_crash_during_handler_resumes_same_row_after_lease_expiry",),
    ),
    Row(
        "seed 000",
        "After a saved failure",
        "Wait for the deadline, then retry the same row",
        (WT + "test_failure_then_retry_after_deadline_resumes_the_same_row",),
    ),
    Row(
        "seed 000",
        "After saved success, before transition",
        "Process the completed current row's saved result; do not rerun its handler",
        (W + "test_crash_after_saved_success_does_not_rerun_the_handler",),
    ),
    Row(
        "seed 000",
        "After transition commit",
        "Return the saved successor row",
        (W + "test_crash_after_transition_commit_returns_the_saved_successor",),
    ),
    Row(
        "seed 000",
        "After terminal commit",
        "A rerun returns success without changing saved state",
        (WT + "test_rerunning_a_completed_request_is_read_only_and_exits_0",),
    ),
)


def node_ids() -> list[str]:
    return sorted({t for row in ROWS for t in row.tests})
