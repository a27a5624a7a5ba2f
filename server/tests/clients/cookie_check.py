"""Python's own cookie jar (http.cookiejar, which requests and httpx use)
against runcell over plain HTTP: the owner cookie runcell sets is kept and
sent back, so a notebook session made through the API is the same client's
on its next request, and a client without the cookie is a stranger.

Usage: python3 cookie_check.py BASE_URL   (the standard library only)
"""

import http.cookiejar
import json
import sys
import urllib.error
import urllib.request

from checks import check


def main():
    base = sys.argv[1].rstrip("/")
    jar = http.cookiejar.CookieJar()
    client = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    stranger = urllib.request.build_opener()

    def call(opener, method, path):
        request = urllib.request.Request(base + path, method=method)
        try:
            with opener.open(request) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    status, body = call(client, "POST", "/api/sessions")
    check(status == 201, "a session is made through the API", (status, body))
    session = json.loads(body)["id"]
    owner = [c for c in jar if c.name == "runcell_owner"]
    check(len(owner) == 1, "the jar kept the owner cookie", [c.name for c in jar])
    check(not owner[0].secure, "the cookie is not Secure over plain HTTP", owner[0])

    status, body = call(client, "GET", f"/api/sessions/{session}/events")
    check(status == 200, "the same client reads its session", (status, body[:200]))
    status, _ = call(stranger, "GET", f"/api/sessions/{session}/events")
    check(status == 404, "a client without the cookie does not", status)
    print("ok: the cookie jar keeps the session its client made")


if __name__ == "__main__":
    main()
