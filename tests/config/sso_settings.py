"""Settings with a permission backend the boundary's SQL check does not mirror (a system check refuses them)."""

from config.settings import *  # noqa: F403

AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "sso.backends.GroupsFromIdp"]
