"""The one table of `core`: personal access tokens, the proof of who is acting that the API and
the command line ask for. Only a digest of each token is kept; the token itself is shown once."""

from django.conf import settings
from django.db import models


class TokenScope(models.TextChoices):
    READ = "read", "read: look at cases"
    DECIDE = "decide", "decide: read, and take the decisions the person may take"


class ApiToken(models.Model):
    user = models.ForeignKey(  # indexed by core_tokens_by_user (user, created_at)
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens", db_index=False
    )
    name = models.CharField(max_length=100, help_text="what it is for, e.g. 'laptop shell' or 'privacy portal'")
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.READ)
    prefix = models.CharField(max_length=12, editable=False, help_text="the token's first characters, to tell it")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "core_api_tokens"
        verbose_name = "personal token"
        indexes = [models.Index(fields=["user", "-created_at"], name="core_tokens_by_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
