from django.contrib import admin
from django.urls import path
from django.utils.functional import SimpleLazyObject

from api.views import api
from ops.inbox import inbox_view, preferences_view
from ops.overview import operations_view
from ops.probes import healthz

admin.site.site_header = "Deletion back-office"
admin.site.enable_nav_sidebar = False  # the lists need the width at 1280 px; the index lists every model
admin.site.site_title = "Back-office"
admin.site.index_title = "Cases"
admin.site.site_url = None  # no public site: no "View site" link leading to a 404

# The product first on the index, then operations, then the libraries' own pages.
INDEX_ORDER = ["deletions", "retirements", "ops", "core", "api", "django_q", "axes", "auth"]
_app_list = admin.site.get_app_list


def _product_first(request, app_label=None):  # type: ignore[no-untyped-def]
    """Read only where a page shows it (the index): the admin asks for it on every page, for the
    navigation sidebar this site turns off, and it checks every model's permissions (2 ms a page)."""

    def ordered():  # type: ignore[no-untyped-def]
        apps = _app_list(request, app_label)
        return sorted(apps, key=lambda a: INDEX_ORDER.index(a["app_label"]) if a["app_label"] in INDEX_ORDER else 99)

    return SimpleLazyObject(ordered)


admin.site.get_app_list = _product_first  # type: ignore[method-assign]

# Refusals keep the admin's look and say what was missing (permission or object).
handler403 = "core.admin.forbidden"
handler404 = "core.admin.not_found"

urlpatterns = [
    path("admin/operations/", admin.site.admin_view(operations_view), name="operations"),
    path("admin/inbox/", admin.site.admin_view(inbox_view), name="inbox"),
    path("admin/inbox/notifications/", admin.site.admin_view(preferences_view), name="notification-preferences"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", api.urls),
]
