"""gzip for pages and static files, not for the API.

What a phone waits on is the page and its static files: Django's GZipMiddleware
compresses them (and pads against BREACH). Under /api/ responses are small pages
of JSON read by pipelines and the gateway; they are left as they are, which also
keeps what the API's own tests read over WSGI byte for byte what was sent.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseBase
from django.middleware.gzip import GZipMiddleware

from lib.errors import is_api


class PagesGZipMiddleware(GZipMiddleware):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if is_api(request):
            return response
        return super().process_response(request, response)
