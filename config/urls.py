from django.contrib import admin
from django.urls import path

from core.health import healthz
from core.operations import operations_view

admin.site.site_header = "Deletion back-office"
admin.site.site_title = "Back-office"
admin.site.index_title = "Cases"

urlpatterns = [
    path("admin/operations/", admin.site.admin_view(operations_view), name="operations"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
]
