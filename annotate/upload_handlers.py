"""What a request's file parts may store, whatever page or API they are sent to.

Django stores every file part of a multipart body (in memory, then in a temporary file) as the
body is parsed, before any view runs, and with no limit on its size: CsrfViewMiddleware parses
the body of every POST it checks. So anyone, logged in or not, could make the server write a
file of any size to its temporary folder by posting it to the login page or a crowd worker's
page, and an upload page refused a file over IMPORT_MAX_UPLOAD_BYTES only once all of it was
on disk. UploadLimitHandler, first of FILE_UPLOAD_HANDLERS, passes on to the storing handlers
no byte of a request that has no logged-in user (no page takes a file from one) and no byte of
a file past IMPORT_MAX_UPLOAD_BYTES. Such a file still reaches the view, empty but with its
size as sent (UploadNotStored), so each upload page and API refuses it with the message naming
the limit and the field (annotate.services.files.upload_size_problem), as before.
"""

from __future__ import annotations

import io

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler


class UploadNotStored(UploadedFile):
    """A file part whose bytes were not kept: no content, the size the client sent."""

    def __init__(self, *, name: str, content_type: str, size: int, charset: str | None) -> None:
        super().__init__(io.BytesIO(b""), name, content_type, size, charset)


class UploadLimitHandler(FileUploadHandler):
    """Stop the storing handlers after it at the limit of what this request may store."""

    def new_file(self, *args, **kwargs) -> None:
        super().new_file(*args, **kwargs)
        self.over_limit = False
        # The middleware's user; an API view's once DRF authenticated its token, which it does
        # before the view reads the body.
        user = getattr(self.request, "user", None)
        logged_in = user is not None and user.is_authenticated
        self.limit = settings.IMPORT_MAX_UPLOAD_BYTES if logged_in else 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        if self.over_limit or start + len(raw_data) > self.limit:
            self.over_limit = True
            return None  # the next handlers never see it: nothing stored from here on
        return raw_data

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if not self.over_limit:
            return None  # the storing handler after this one hands the file over
        return UploadNotStored(
            name=self.file_name,
            content_type=self.content_type,
            size=file_size,
            charset=self.charset,
        )
