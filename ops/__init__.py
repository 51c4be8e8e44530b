"""Operations on top of both workflows: overview, health, heartbeat, schedules, groups, demo, rehearsal."""
