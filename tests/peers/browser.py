"""The "browser" of the cluster OAuth tests: given an authorization URL (its
last argument), it does what an operator does in a real browser at
oidc-provider's login and consent pages (signs in as alice, consents) and
follows the redirects, the last one to `sms oauth login`'s loopback
listener. Exits 0 when it reached the redirect URI.

Usage: python browser.py REDIRECT_PREFIX URL
"""

import re
import sys

import httpx

redirect_prefix, url = sys.argv[1], sys.argv[-1]
with httpx.Client(follow_redirects=False, timeout=30) as client:
    response = client.get(url)
    for _ in range(20):
        if response.is_redirect:
            target = response.url.join(response.headers["location"])
            response = client.get(target)
            if str(target).startswith(redirect_prefix):
                sys.exit(0 if response.status_code == 200 else 1)
            continue
        form = re.search(r'<form[^>]*action="([^"]+)"', response.text)
        prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
        if response.status_code != 200 or not form or not prompt:
            print(f"browser: stuck at {response.url} ({response.status_code})", file=sys.stderr)
            sys.exit(1)
        data = {"prompt": prompt.group(1)}
        if data["prompt"] == "login":
            data.update(login="alice", password="any")
        response = client.post(response.url.join(form.group(1)), data=data)
print("browser: too many steps", file=sys.stderr)
sys.exit(1)
