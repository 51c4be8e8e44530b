"""The demo target's tables live in the `target` database and nothing else does."""

from typing import Any

APP = "demo_target"
ALIAS = "target"


class TargetRouter:
    def db_for_read(self, model: Any, **hints: Any) -> str | None:
        return ALIAS if model._meta.app_label == APP else None

    db_for_write = db_for_read

    def allow_relation(self, a: Any, b: Any, **hints: Any) -> bool | None:
        if APP in (a._meta.app_label, b._meta.app_label):
            return a._meta.app_label == b._meta.app_label
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return (app_label == APP) == (db == ALIAS)
