from django.apps import AppConfig


class RetirementsConfig(AppConfig):
    name = "retirements"
    verbose_name = "Workspace retirements"
