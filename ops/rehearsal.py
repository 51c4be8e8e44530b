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


ROWS: tuple[Row, ...] = (
    Row(
        "seed 003",
        "Worker stops while source is unavailable",
        "Replacement finds the case, checked evidence, open question, owner, and next safe read",
        (EU + "test_worker_killed_while_the_source_is_unavailable_leaves_a_case_the_replacement_can_pick_up",),
    ),
    Row(
        "seed 003",
        "Worker stops while approval waits",
        "Replacement finds the same proposal and current approval state",
        (
            A + "test_worker_stopped_while_the_approval_is_withdrawn_finds_the_same_proposal_and_its_state",
            B + "test_running_an_unapproved_request_is_refused",
        ),
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
            EU + "test_a_cancel_while_the_effect_is_unknown_keeps_the_case_open_until_the_lookup_names_the_operation",
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
        (
            "tests/deletions/test_restore.py::test_a_restored_pg_dump_is_checked_at_the_target_system_before_resuming",
            "tests/deletions/test_restore.py::test_restored_backup_does_not_repeat_an_applied_operation",
        ),
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
            W + "test_a_worker_paused_past_its_lease_is_rejected_where_the_effect_lands",
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
            EU + "test_a_cancel_while_the_effect_is_unknown_keeps_the_case_open_until_the_lookup_names_the_operation",
            EU + "test_a_cancel_that_meets_a_dead_workers_live_lease_waits_for_it_and_leaves_no_row_running",
            A + "test_approver_removed_between_stages_stops_the_next_stage_until_a_new_approval",
        ),
    ),
    Row(
        "seed 003",
        "Delayed target-system lookup says not found",
        "Do not infer no effect; hold until permitted source evidence can establish the result",
        (
            EU + "test_a_lagging_lookup_that_says_not_found_is_not_taken_as_no_effect",
            EU + "test_not_found_behind_the_submission_stays_unknown_and_confirm_not_applied_waits_for_the_watermark",
            EU + "test_not_found_past_the_submission_is_evidence_and_the_operation_is_sent_once",
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
        (
            W + "test_crash_after_the_terminal_commit_reruns_read_only",
            WT + "test_rerunning_a_completed_request_is_read_only_and_exits_0",
        ),
    ),
)


RB = "tests/retirements/test_boundary.py::"
RR = "tests/retirements/test_resume.py::"
RC = "tests/retirements/test_races.py::"

# Seed 002 has no rehearsal table; these rows try the failures its hops name (on_failure).
ROWS += (
    Row(
        "seed 002",
        "Notice send fails six times",
        "Six attempts; undelivered gating notices block destruction and delivery failures feed the alarm; the "
        "notice rows show outstanding delivery",
        (
            RB + "test_notice_failing_six_times_raises_the_alarm_and_blocks",
            R + "test_a_failed_gating_notice_has_a_way_forward",
        ),
    ),
    Row(
        "seed 002",
        "Watcher process killed while waiting",
        "The wake-up time is durable and nothing is lost; a watcher that stops is reported stalled and an operator "
        "resumes it",
        (
            R + "test_a_watcher_process_killed_mid_step_loses_nothing",
            RR + "test_watcher_that_keeps_failing_is_reported_stalled_with_an_alarm",
        ),
    ),
    Row(
        "seed 002",
        "Resume while the watcher still runs",
        "Refused while the current watcher still runs; a superseded watcher that wakes settles without any "
        "destructive action",
        (
            RR + "test_resume_is_refused_while_the_watcher_runs",
            RR + "test_superseded_watcher_woken_later_does_nothing_destructive",
        ),
    ),
    Row(
        "seed 002",
        "Requester loses authority before the point of no return",
        "Hold on lost authority; no purge job",
        (RB + "test_requester_who_lost_the_permission_puts_the_request_on_hold",),
    ),
    Row(
        "seed 002",
        "Two watchers race at the boundary",
        "Reject according to the current locked request state: one purge job at most",
        (
            RC + "test_two_watcher_steps_racing_at_the_boundary_make_one_purge_job",
            RC + "test_cancel_and_point_of_no_return_race_exactly_one_wins",
        ),
    ),
    Row(
        "seed 002",
        "Purge worker killed mid-purge",
        "The purge job's lease runs out; a replacement purges once under a new generation",
        (R + "test_a_purge_worker_killed_mid_purge_is_replaced_after_its_lease",),
    ),
)


def node_ids() -> list[str]:
    return sorted({t for row in ROWS for t in row.tests})
