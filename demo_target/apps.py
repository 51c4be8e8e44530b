from django.apps import AppConfig


class DemoTargetConfig(AppConfig):
    name = "demo_target"
    verbose_name = "Demo target system"
