-- The retention job's writes on a closed retirement case (ops.retention decides which and when),
-- in the job's own transaction with its setting on. The workspace row stays (it is no person's).

-- name: erase_case
-- Everything of a closed request, its tombstone already written: alarms, decisions, notices, the
-- purge job, watchers, then the request (the request's link to its watcher is checked at commit).
WITH req AS (
    SELECT id FROM retirements_retirementrequest
    WHERE id = %(request_id)s AND status IN ('completed', 'cancelled', 'closed')
), alarms AS (
    DELETE FROM retirements_alarm a USING req WHERE a.request_id = req.id RETURNING a.id
), decisions AS (
    DELETE FROM retirements_decision d USING req WHERE d.request_id = req.id RETURNING d.id
), notices AS (
    DELETE FROM retirements_noticeslot n USING req WHERE n.request_id = req.id RETURNING n.id
), jobs AS (
    DELETE FROM retirements_purgejob j USING req WHERE j.request_id = req.id RETURNING j.id
), watchers AS (
    DELETE FROM retirements_retirementwatcher w USING req WHERE w.request_id = req.id RETURNING w.id
), request AS (
    DELETE FROM retirements_retirementrequest r USING req WHERE r.id = req.id RETURNING r.id
)
SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM notices), (SELECT count(*) FROM decisions),
       (SELECT count(*) FROM watchers) + (SELECT count(*) FROM jobs) + (SELECT count(*) FROM alarms)
