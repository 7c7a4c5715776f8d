#!/usr/bin/env python3
"""Raw HTTP(S) requests through http.client, for checks no client library
would let us see (status codes, headers, error bodies).

Usage: http_probe.py BASE_URL < requests.json
requests.json: [{"method", "path", "headers": {}, "body": <json or absent>,
                 "use_token": true (send the token the last login returned)}]
Prints [{"status", "headers": {lower-case name: value}, "body": <json|text>}].
"""
import http.client
import json
import ssl
import sys
import urllib.parse


def main():
    base = urllib.parse.urlparse(sys.argv[1])
    requests = json.load(sys.stdin)
    if base.scheme == "https":
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # kiln-bmc's test certificate is self-signed
        conn = http.client.HTTPSConnection(base.hostname, base.port, context=ctx, timeout=10)
    else:
        conn = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
    token = None
    results = []
    for req in requests:
        headers = dict(req.get("headers", {}))
        if req.get("use_token") and token:
            headers["X-Auth-Token"] = token
        body = None
        if "body" in req:
            body = json.dumps(req["body"]) if not isinstance(req["body"], str) else req["body"]
            headers.setdefault("Content-Type", "application/json")
        conn.request(req["method"], req["path"], body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read().decode("utf-8", "replace")
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        if "x-auth-token" in hdrs:
            token = hdrs["x-auth-token"]
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        results.append({"status": resp.status, "headers": hdrs, "body": parsed})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
