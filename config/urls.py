from django.contrib import admin
from django.urls import path

from ops.health import healthz
from ops.overview import operations_view

admin.site.site_header = "Deletion back-office"
admin.site.enable_nav_sidebar = False  # the lists need the width at 1280 px; the index lists every model
admin.site.site_title = "Back-office"
admin.site.index_title = "Cases"

# Refusals keep the admin's look and say what was missing (permission or object).
handler403 = "core.admin.forbidden"
handler404 = "core.admin.not_found"

urlpatterns = [
    path("admin/operations/", admin.site.admin_view(operations_view), name="operations"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
]
