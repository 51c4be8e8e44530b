"""The demo target system's own tables, in its own database (alias `target`).

People, their memberships (with a data version per person and community), the rows
and agents a deletion removes, the fence (the highest lease generation seen per
request) and one record per applied operation, with the evidence read in the
transaction that applied it and the grant that authorized it.
"""

from django.db import models


class Person(models.Model):
    handle = models.CharField(max_length=210, unique=True)  # demo:alice
    gated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "target_people"

    def __str__(self) -> str:
        return self.handle


class Community(models.Model):
    id = models.UUIDField(primary_key=True)
    name = models.CharField(max_length=200)

    class Meta:
        db_table = "target_communities"

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    person = models.ForeignKey(  # indexed by target_membership_once (person, community)
        Person, on_delete=models.PROTECT, related_name="memberships", db_index=False
    )
    community = models.ForeignKey(Community, on_delete=models.PROTECT, related_name="memberships")
    role = models.CharField(max_length=40)  # participant, former_participant
    version = models.BigIntegerField(default=1)  # moves with every change to the person's data here

    class Meta:
        db_table = "target_memberships"
        constraints = [models.UniqueConstraint(fields=["person", "community"], name="target_membership_once")]

    def __str__(self) -> str:
        return f"{self.person_id} in {self.community_id} (v{self.version})"


class Post(models.Model):
    membership = models.ForeignKey(Membership, on_delete=models.PROTECT, related_name="posts")
    body = models.TextField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "target_posts"  # its foreign key's own index serves the reads by membership

    def __str__(self) -> str:
        return f"post {self.pk}"


class Agent(models.Model):
    membership = models.ForeignKey(Membership, on_delete=models.PROTECT, related_name="agents")
    name = models.CharField(max_length=100)

    class Meta:
        db_table = "target_agents"  # its foreign key's own index serves the reads by membership

    def __str__(self) -> str:
        return self.name


class Fence(models.Model):
    """Per request: the highest lease generation seen, and the lowest authority epoch a grant may
    carry (raised by the back-office's signed withdrawals)."""

    request_id = models.UUIDField(primary_key=True)
    generation = models.BigIntegerField()
    min_epoch = models.BigIntegerField(default=0)
    epoch_raised_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "target_fences"

    def __str__(self) -> str:
        return f"fence {self.request_id} at {self.generation}"


class Operation(models.Model):
    operation_id = models.UUIDField(primary_key=True)
    request_id = models.UUIDField()
    action = models.CharField(max_length=40)
    community_id = models.UUIDField(null=True)
    generation = models.BigIntegerField()
    executor = models.CharField(max_length=200)
    grant = models.TextField()  # the signed grant it was applied under
    evidence = models.JSONField()
    applied_at = models.DateTimeField()

    class Meta:
        db_table = "target_operations"
        indexes = [models.Index(fields=["request_id"], name="target_operations_request")]

    def __str__(self) -> str:
        return f"{self.action} {self.operation_id}"


class CallNonce(models.Model):
    """A signed call's nonce, taken once (`receiver.signing`): kept until the call's signature would be
    refused as too old anyway."""

    nonce = models.CharField(max_length=64, primary_key=True)
    kept_until = models.DateTimeField(db_index=True)  # the sweep of the nonces no longer needed

    class Meta:
        db_table = "receiver_call_nonces"

    def __str__(self) -> str:
        return self.nonce
