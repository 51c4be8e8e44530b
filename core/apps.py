from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Access"

    def ready(self) -> None:
        from core import checks, store  # noqa: F401  (they register the system checks, the any_of lookup)
