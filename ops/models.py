"""Operations' own table: the cluster heartbeat."""

from django.db import models


class ClusterHeartbeat(models.Model):
    """Written every minute by each django-q2 cluster's schedule: proof that a cluster is alive."""

    name = models.CharField(max_length=200, primary_key=True)
    seen_at = models.DateTimeField()

    class Meta:
        db_table = "ops_cluster_heartbeats"

    def __str__(self) -> str:
        return f"{self.name} at {self.seen_at}"
