"""The one place where our errors become HTTP answers, for pages and for the API."""

from __future__ import annotations

import contextlib
import functools
import re
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TypeVar

from csp.decorators import csp
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.middleware.common import CommonMiddleware
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response as ApiResponse
from rest_framework.views import exception_handler as drf_exception_handler

from annotate.errors import (
    AnnotateError,
    FieldInputError,
    ImportFileError,
    ImportFileProblems,
    RateLimitedError,
    SubmissionError,
)
from annotate.services.files import csv_writer, upload_size_problem
from annotate.throttling import (
    ANNOTATOR_WORK_SCOPE,
    ANNOTATOR_WORK_WHAT,
    EXPORTS_SCOPE,
    EXPORTS_WHAT,
    NO_LIMIT,
    OWN_LIMIT,
    PAGE_LIMIT_WHAT,
    PAGES_SCOPE,
    UPLOADS_SCOPE,
    figure_rate_check,
    page_limit,
    page_limit_of,
    page_rate_check,
)

T = TypeVar("T")


def error_payload(error: Exception) -> dict:
    """{"detail": the message}, with "field" when the error names the input at fault."""
    payload: dict = {"detail": str(error)}
    if getattr(error, "field", None):
        payload["field"] = error.field
    if isinstance(error, SubmissionError) and error.missing:
        payload["missing"] = error.missing
    if isinstance(error, ImportFileError):  # a script reads each wrong line without parsing
        problems = error.problems if isinstance(error, ImportFileProblems) else [error]
        payload["file"] = error.path
        payload["errors"] = [
            {"line": problem.line, "field": problem.field, "problem": problem.problem}
            for problem in problems
        ]
        if isinstance(error, ImportFileProblems) and error.more:
            payload["more"] = error.more
    return payload


def is_users_error(exc: Exception) -> bool:
    """One of our errors a user caused, with its HTTP status: an AnnotateError, or an error of
    the measuring side (evaluation.errors; annotate may not import it) that carries one."""
    ours = type(exc).__module__.split(".")[0] in {"annotate", "evaluation"}
    return isinstance(exc, AnnotateError) or (
        ours and isinstance(getattr(exc, "http_status", None), int)
    )


def api_exception_handler(exc: Exception, context: dict) -> ApiResponse | None:
    """DRF EXCEPTION_HANDLER: our errors with their status (and `field`), a rate limit's with
    `Retry-After`, the rest as DRF does."""
    if is_users_error(exc):
        response = ApiResponse(error_payload(exc), status=exc.http_status)
        if isinstance(exc, RateLimitedError):
            response["Retry-After"] = str(exc.retry_after)
        return response
    return drf_exception_handler(exc, context)


@contextlib.contextmanager
def uploaded_path(upload: UploadedFile, *, suffix: str = ".upload") -> Iterator[str]:
    """An uploaded file written to a temporary file, for importers that read a path; the
    path, removed on leaving. The upload's own name never reaches the file system."""
    with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
        handle.flush()
        yield handle.name


def refused_upload(error: Exception, *, path: str, upload: UploadedFile) -> str:
    """An importer's error about the temporary `path`, told about the file the user sent."""
    message = str(error).replace(path, upload.name).rstrip()
    if "\n" in message:  # one wrong line per line: the conclusion on a line of its own
        return f"{message}\nNothing was written."
    stop = "" if message.endswith((".", "!", "?")) else "."
    return f"{message}{stop} Nothing was written."


def _told_as_sent(error: AnnotateError, *, path: str, upload: UploadedFile) -> None:
    """Make an importer's error about the temporary `path` speak of the file the user sent, as
    `refused_upload` does for the pages (the API answers its `detail` and `file`)."""
    error.args = (refused_upload(error, path=path, upload=upload),)
    for problem in [error, *getattr(error, "problems", [])]:
        if getattr(problem, "path", None) == path:
            problem.path = upload.name


def api_upload_import(
    upload: UploadedFile,
    do_import: Callable[[str], T],
    *,
    field: str,
    suffix: str = ".upload",
) -> tuple[T, str]:
    """Run `do_import(path)` (an import service) on a file sent to the API, as the upload
    pages do: the upload limit first (`field` names the file's input), then the file read from
    a temporary path. Return the import's summary and its message, which names the file sent;
    a refusal raises the importer's error, told about that file (api_exception_handler
    answers it with each wrong line)."""
    if too_large := upload_size_problem(upload.size):
        raise FieldInputError(f"{too_large} Nothing was written.", field=field)
    with uploaded_path(upload, suffix=suffix) as path:
        try:
            summary = do_import(path)
        except AnnotateError as error:
            _told_as_sent(error, path=path, upload=upload)
            raise
        return summary, summary.message.replace(path, upload.name)


class FileNegotiation(DefaultContentNegotiation):
    """Content negotiation of API views that answer a file (CSV, LaTeX...): the view sets the
    file's type itself whatever the client's Accept header or `?format=` says, and a refusal
    is JSON, as every API refusal (DRF's own negotiation answered 406 to `Accept: text/csv`)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


def error_page(
    request: HttpRequest, error: AnnotateError, *, back: tuple[str, str] | None = None
) -> HttpResponse:
    """The error as a short page; `back` = (url, label): the way back to the work at hand. A
    rate limit's page says when to come back (Retry-After)."""
    context = {"message": str(error), "back": back, "title": getattr(error, "title", "")}
    response = render(request, "annotate/error.html", context, status=error.http_status)
    if isinstance(error, RateLimitedError):
        response["Retry-After"] = str(error.retry_after)
    return response


# A command's option named at the head of a service's message ("--system: ..."), as the command
# line reads it; beside its field on a page the field's label names it already.
_OPTION_HEAD = re.compile(r"^--[a-z][\w-]*: ")


def form_refusal(form, error: Exception) -> None:
    """Show a service's refusal on the form that asked, its values kept: beside the field the
    error names (`FieldInputError.field`, or the `field` of an evaluation error) when the form
    has it, without the command-line option the message starts with, else above the form."""
    field = getattr(error, "field", None)
    if field in form.fields:
        form.add_error(field, _OPTION_HEAD.sub("", str(error)))
    else:
        form.add_error(None, str(error))


def page_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Render an AnnotateError raised by a page view as a short page with its status."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except AnnotateError as error:
            return error_page(request, error)

    return wrapper


def uploads_limited(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Count each upload (a multipart POST) against the user's rate (scope "uploads",
    UPLOAD_RATE); over it, the error page with 429 and Retry-After, nothing imported."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "POST" and request.content_type == "multipart/form-data":
            try:
                page_rate_check(request, scope=UPLOADS_SCOPE)
            except RateLimitedError as error:
                return error_page(request, error)
        return view(request, *args, **kwargs)

    return wrapper


def rate_limited(
    scope: str,
    *,
    what: str,
    outcome: str = "",
    methods: Collection[str] = ("POST",),
    back: Callable[..., tuple[str, str]] | None = None,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Count each request of `methods` to a page against the rate of `scope` (per user when
    logged in, else per address: `page_rate_check`); over it the error page with 429 and
    Retry-After, and the view is not run. `back(**url_kwargs)` is the way back, (url, label).

    Put it under `login_required`, so a logged-in user is counted as themselves."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method in methods:
                try:
                    page_rate_check(request, scope=scope, what=what, outcome=outcome)
                except RateLimitedError as error:
                    return error_page(request, error, back=back(**kwargs) if back else None)
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def work_limited(
    *,
    outcome: str,
    back: Callable[..., tuple[str, str]],
    methods: Collection[str] = ("POST",),
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """The annotator's work from a page (a claim, a submit, an answer, a session's action):
    counted per user on the API's counter for the same work (scope "annotator-work",
    API_RATE_ANNOTATOR_WORK). The other methods (a task page's GET) count once, as every other
    page does (scope "pages", PAGE_RATE): each request meets one counter, never two."""
    limited = rate_limited(
        ANNOTATOR_WORK_SCOPE, what=ANNOTATOR_WORK_WHAT, outcome=outcome, methods=methods, back=back
    )

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        counted = limited(view)

        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                try:
                    page_rate_check(request, scope=PAGES_SCOPE, what=PAGE_LIMIT_WHAT[PAGES_SCOPE])
                except RateLimitedError as error:
                    return error_page(request, error, back=back(**kwargs))
            return counted(request, *args, **kwargs)

        return page_limit(OWN_LIMIT)(wrapper)

    return decorate


def exports_limited(
    back: Callable[..., tuple[str, str]],
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A download of every label or answer of a project, study or set: counted with the report
    exports, per user (scope "exports", EXPORT_RATE). A HEAD counts as the GET it is: Django
    runs the view for it, then drops the body."""
    return rate_limited(EXPORTS_SCOPE, what=EXPORTS_WHAT, methods=("GET", "HEAD"), back=back)


def csp_replace_on(response: HttpResponse, directives: dict[str, list[str]]) -> HttpResponse:
    """Replace these directives of the site-wide policy (setting CONTENT_SECURITY_POLICY) for one
    response: django-csp's csp_replace decorator, for values known only inside the view."""
    response._csp_replace = {**(getattr(response, "_csp_replace", None) or {}), **directives}
    return response


# The content type of each format a report's figure is drawn in (every report's figure views).
FIGURE_TYPES = {"svg": "image/svg+xml", "png": "image/png", "pdf": "application/pdf"}


# A figure opened on its own (an SVG download) may run nothing: names in it come from imported
# data, and matplotlib's SVG carries its own <style>. Every report's figure view wears it.
figure_csp = csp(
    {"default-src": "'none'", "style-src": "'unsafe-inline'", "frame-ancestors": "'none'"}
)


def figures_limited(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Count each figure a report page serves against the user's figure rate (FIGURE_RATE, the
    figure APIs' counter too); over it 429 with Retry-After and the refusal as plain text, which
    a figure opened or downloaded on its own shows as it is."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            figure_rate_check(request)
        except RateLimitedError as error:
            refused = HttpResponse(str(error), status=error.http_status, content_type="text/plain")
            refused["Retry-After"] = str(error.retry_after)
            return refused
        return view(request, *args, **kwargs)

    wrapper.page_limit = OWN_LIMIT
    return wrapper


class PageRateLimitMiddleware:
    """Count every page request on the view's page limit (`annotate.throttling.page_limit_of`):
    per user when logged in, else per address; over it the error page with 429 and Retry-After,
    and the view is not run. DRF views, views that count themselves and the health check are
    left alone. After AuthenticationMiddleware, so a logged-in user is counted as themselves.

    A request no URL pattern matches reaches no view, so nothing above counts it: its 404 is
    counted on "pages" once answered (someone guessing addresses of assignments or worker links
    uses up the same budget as pages), and past the limit it gets the 429 instead. A 404 a view
    answered was counted on that view's limit already, so it is not counted again; neither is
    one CommonMiddleware turns into the redirect to the address with its slash, which is
    counted as the page it leads to."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.slash_redirects = CommonMiddleware(get_response)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 404 or request.resolver_match is not None:
            return response
        if self.slash_redirects.should_redirect_with_slash(request):
            return response
        return self._refused(request, PAGES_SCOPE) or response

    def process_view(self, request: HttpRequest, view, args, kwargs) -> HttpResponse | None:
        scope = page_limit_of(view)
        if scope in (None, OWN_LIMIT, NO_LIMIT):
            return None
        return self._refused(request, scope)

    def _refused(self, request: HttpRequest, scope: str) -> HttpResponse | None:
        """Count the request on `scope`; the refusal over the limit, else None."""
        try:
            page_rate_check(request, scope=scope, what=PAGE_LIMIT_WHAT.get(scope, "requests"))
        except RateLimitedError as error:
            if _script_asks_json(request):
                return _refused_as_json(error)
            return error_page(request, error, back=_way_back(request))
        return None


def _script_asks_json(request: HttpRequest) -> bool:
    """Whether a page's script asked (a polled progress sends `Accept: application/json`): it
    reads the refusal as JSON, where the error page's HTML broke its parsing and showed
    nothing while it kept asking."""
    return request.accepts("application/json") and not request.accepts("text/html")


def _refused_as_json(error: RateLimitedError) -> JsonResponse:
    """The refusal for a script: the message in `detail`, the wait in `retry_after` and
    Retry-After, as the API's throttled answers say them."""
    response = JsonResponse(
        {"detail": str(error), "retry_after": error.retry_after}, status=error.http_status
    )
    response["Retry-After"] = str(error.retry_after)
    return response


def _way_back(request: HttpRequest) -> tuple[str, str] | None:
    """The refused page's way back: a GET is this page again, once the wait is over; a POST
    (its form not sent) the page the form was on, when it is one of ours."""
    if request.method in ("GET", "HEAD"):
        return request.get_full_path(), "Try this page again"
    came_from = request.headers.get("Referer", "")
    if came_from and url_has_allowed_host_and_scheme(
        came_from, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return came_from, "Back to the page you came from"
    return None


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can feed a stream."""

    def write(self, value: str) -> str:
        return value


def csv_download(rows: Iterable[list[object]], *, filename: str) -> StreamingHttpResponse:
    """Stream rows as a CSV attachment, one line at a time, never the whole file in memory.

    Text cells that a spreadsheet would run as a formula are neutralised (csv_writer): names in
    these files can come from outside, e.g. a self-hosted worker id from a study link.
    """
    writer = csv_writer(_Echo())
    lines = (writer.writerow(row) for row in rows)
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
