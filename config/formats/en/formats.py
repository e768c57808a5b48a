"""How pages write dates and times: one style everywhere, in UTC and said so.

Django's English default ("Nov. 27, 2026, 6:05 p.m.") showed wherever a page printed a
datetime as it is, beside pages that wrote "2026-11-27 18:05" or "Submit by 18:05 UTC".
Localised formats come from these modules (settings.FORMAT_MODULE_PATH) ahead of Django's own;
what is not set here (numbers, input formats) stays Django's. Files and the API (CSV, JSON)
write ISO 8601 and do not pass through these.
"""

DATETIME_FORMAT = "Y-m-d H:i T"
SHORT_DATETIME_FORMAT = DATETIME_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = DATE_FORMAT
TIME_FORMAT = "H:i"
