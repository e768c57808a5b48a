"""The API's request parsers (DRF DEFAULT_PARSER_CLASSES).

A module of their own, importing no DRF view: DRF imports the parsers while it defines
APIView, so a parser in a module that imports rest_framework.views (annotate.http) could not be
found when that module was the first to load DRF (the page limit middleware, loaded by
config.wsgi before any URL)."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class DepthLimitedJSONParser(JSONParser):
    """DRF's JSON parser, answering 400 (not 500) to JSON nested deeper than Python recurses."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
