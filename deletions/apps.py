from django.apps import AppConfig


class DeletionsConfig(AppConfig):
    name = "deletions"
    verbose_name = "User deletions"
