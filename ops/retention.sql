-- The retention job's reads and writes (ops.retention decides which case and when). Its writes are
-- the database's retention functions (ops migration 0016, SECURITY DEFINER): each checks the case
-- again under its lock (closed, past the period it is given, no records hold, no open investigation)
-- and only inside them do the evidence triggers let a row of it go.

-- name: candidates
-- Closed cases of one kind that closed by the cutoff, after the last one read (closed_at, id),
-- oldest first, with what keeps them: the rule the retention functions check again.
SELECT case_id, closed_at, held, investigating FROM retention_cases
WHERE case_kind = %(kind)s AND closed_at <= %(cutoff)s
  AND (%(after_at)s::timestamptz IS NULL OR (closed_at, case_id) > (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY closed_at, case_id
LIMIT %(limit)s

-- name: erase_case
-- Every row of a closed case past its period (its tombstone already written), and what names it
-- elsewhere (Django's history of it, its notifications and webhook deliveries): counts by kind.
SELECT retention_erase_case(%(kind)s, %(case_id)s, %(days)s)

-- name: drop_lease_history
-- A closed deletion case's lease events and attempts, past their own period.
SELECT retention_drop_lease_history(%(case_id)s, %(days)s)

-- name: drop_evidence
-- A closed deletion case's copies of the target system's evidence (each stage's result), past their period.
SELECT retention_drop_evidence(%(case_id)s, %(days)s)

-- name: forget
-- Sent notifications and final webhook deliveries past their period, but a held case's (only
-- counted on a dry run).
SELECT retention_forget(%(days)s, %(most)s, %(dry)s)
