"""Every time Django renders by itself (History, django-q2's task lists, read-only fields) reads
as the product's own presenter writes it: to the second, in UTC."""

DATETIME_FORMAT = r"Y-m-d H:i:s \U\T\C"
SHORT_DATETIME_FORMAT = r"Y-m-d H:i:s \U\T\C"
TIME_FORMAT = "H:i:s"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
