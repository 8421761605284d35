"""A person signing in at oidc_people.mjs, as their login tool would: the
authorization code flow with PKCE (S256) for the public client
"spear-people", the login and consent pages filled in as USER, the code
taken from the final redirect and exchanged for tokens. Prints the ID token.

Usage: python sign_in.py ISSUER USER [SCOPE...]
"""

import base64
import hashlib
import re
import secrets
import sys
import urllib.parse

import httpx

issuer, user, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
redirect = "http://127.0.0.1:1/cb"
verifier = secrets.token_urlsafe(48)
challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
with httpx.Client(follow_redirects=False, timeout=30) as client:
    meta = client.get(f"{issuer}/.well-known/openid-configuration").json()
    query = urllib.parse.urlencode({
        "client_id": "spear-people", "response_type": "code", "redirect_uri": redirect,
        "scope": " ".join(["openid", "groups", *extra]), "state": secrets.token_urlsafe(8),
        "code_challenge": challenge, "code_challenge_method": "S256",
    })
    response = client.get(f"{meta['authorization_endpoint']}?{query}")
    code = None
    for _ in range(20):
        if response.is_redirect:
            target = str(response.url.join(response.headers["location"]))
            if target.startswith(redirect):
                code = urllib.parse.parse_qs(urllib.parse.urlparse(target).query)["code"][0]
                break
            response = client.get(target)
            continue
        form = re.search(r'<form[^>]*action="([^"]+)"', response.text)
        prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
        if response.status_code != 200 or not form or not prompt:
            sys.exit(f"sign_in: stuck at {response.url} ({response.status_code})")
        data = {"prompt": prompt.group(1)}
        if data["prompt"] == "login":
            data.update(login=user, password="any")
        response = client.post(response.url.join(form.group(1)), data=data)
    if code is None:
        sys.exit("sign_in: no code")
    tokens = client.post(meta["token_endpoint"], data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": redirect,
        "client_id": "spear-people", "code_verifier": verifier,
    }).json()
    if "id_token" not in tokens:
        sys.exit(f"sign_in: {tokens}")
    print(tokens["id_token"])
