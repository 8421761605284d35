"""Drives SMS's console in a real browser: Debian's chromium, through
Playwright, as an operator would. One scenario per run (the first
argument); the Rust test that starts the cluster passes what the scenario
needs in the environment and reads the last line, `RESULT <json>`, for
its own checks. A scenario fails (exit 1, with the reason) when the page
does not do what a user would expect.

Environment: CONSOLE_URL, ADMIN_TOKEN, VIEWER_TOKEN, CHROMIUM (default
/usr/bin/chromium), SHOTS_DIR (screenshots are written there when set),
and each scenario's own (see its function).
"""

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from playwright.sync_api import expect, sync_playwright

URL = os.environ["CONSOLE_URL"].rstrip("/")
ADMIN = os.environ.get("ADMIN_TOKEN", "")
VIEWER = os.environ.get("VIEWER_TOKEN", "")
SHOTS = os.environ.get("SHOTS_DIR", "")
# Live updates arrive within a second; this only bounds a broken page.
WAIT_MS = 20_000
result = {}


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def shot(page, name):
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


def new_context(browser):
    # SMS's certificate names its SPIFFE identity, not a host: the test
    # trusts it as the operator's browser would after an exception.
    return browser.new_context(ignore_https_errors=True, viewport={"width": 1360, "height": 900})


def sign_in(page, token):
    page.goto(URL + "/login")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(URL + "/")


def wait_live(page):
    """The page's event stream is open: later changes will reach it."""
    # (Locators, not wait_for_function: the console's CSP forbids eval.)
    expect(page.locator("body")).to_have_attribute("data-live-open", "1", timeout=WAIT_MS)


def csrf_of(page):
    return page.locator("form[action='/logout'] input[name=csrf]").first.get_attribute("value")


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def session_cookie(context):
    return next(c for c in context.cookies() if c["name"].endswith("spear_console"))


def serve_attacker(html):
    """A page of another site (http://localhost:PORT, the console being at
    127.0.0.1) that posts to the console as soon as it loads."""

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://localhost:{server.server_address[1]}/"


def signin(browser):
    """Acceptance 1 and 7. Needs the task TASK registered."""
    task = os.environ["TASK"]
    context = new_context(browser)
    page = context.new_page()
    first = page.goto(URL + "/")
    check(page.url == URL + "/login", f"an anonymous visit went to {page.url}, not the sign-in page")
    csp = first.headers.get("content-security-policy", "")
    result["csp"] = csp
    check("script-src 'self'" in csp and "unsafe-inline" not in csp, f"CSP: {csp}")
    page.fill("#token", "wrong-token-0123456789abcdef")
    page.click("button[type=submit]")
    expect(page.locator(".notice.error")).to_contain_text("neither")
    check(page.url == URL + "/login", "a wrong token got past the sign-in page")
    check(not any(c["name"].endswith("spear_console") for c in context.cookies()), "a wrong token got a cookie")
    shot(page, "sign-in")

    sign_in(page, ADMIN)
    expect(page.locator("[data-role]")).to_have_attribute("data-role", "admin")
    cookie = session_cookie(context)
    result["cookie"] = {k: cookie[k] for k in ("name", "httpOnly", "secure", "sameSite")}
    page.goto(URL + "/tasks")
    result["admin_write_forms"] = page.locator("form[action='/tasks']").count()
    csrf = csrf_of(page)

    # Writes without the form's token, or from another origin, are refused.
    delete = f"{URL}/tasks/{task}/delete"
    no_token = context.request.post(delete, form={"csrf": ""}, max_redirects=0)
    result["no_csrf"] = [no_token.status, no_token.text()]
    other_origin = context.request.post(
        delete, form={"csrf": csrf}, headers={"Origin": "http://127.0.0.1:1"}, max_redirects=0
    )
    result["other_origin"] = [other_origin.status, other_origin.text()]
    # A real cross-site page in the same browser, signed in here.
    attacker = serve_attacker(
        f"<form id=f method=post action='{delete}'><input name=csrf value='{csrf}'></form>"
        "<script>document.getElementById('f').submit()</script>"
    )
    evil = context.new_page()
    with evil.expect_navigation(url=delete):
        evil.goto(attacker)
    result["cross_site"] = evil.inner_text("body")
    evil.close()
    page.goto(URL + "/tasks")
    result["task_after_attacks"] = page.locator(f"tr[data-task='{task}']").count()

    # A viewer sees no write control, and a write by hand is refused.
    viewer_context = new_context(browser)
    viewer = viewer_context.new_page()
    sign_in(viewer, VIEWER)
    expect(viewer.locator("[data-role]")).to_have_attribute("data-role", "viewer")
    viewer.goto(URL + "/tasks")
    result["viewer_register_forms"] = viewer.locator("form[action='/tasks']").count()
    viewer.goto(f"{URL}/tasks/{task}")
    result["viewer_task_write_forms"] = viewer.locator("form[method=post]:not([action='/logout'])").count()
    viewer.goto(URL + "/trust")
    result["viewer_approve_buttons"] = viewer.locator("button[data-action]").count()
    shot(viewer, "viewer")
    by_hand = viewer_context.request.post(delete, form={"csrf": csrf_of(viewer)}, max_redirects=0)
    result["viewer_write"] = [by_hand.status, by_hand.text()]

    # Sign-out ends the session on SMS, not only in this browser.
    old = session_cookie(context)
    page.click("form[action='/logout'] button")
    page.wait_for_url(URL + "/login")
    page.goto(URL + "/")
    result["after_sign_out"] = page.url
    replay_context = new_context(browser)
    replay_context.add_cookies([{k: old[k] for k in ("name", "value", "domain", "path", "secure", "httpOnly", "sameSite")}])
    replayed = replay_context.request.get(URL + "/", max_redirects=0)
    result["old_cookie"] = [replayed.status, replayed.headers.get("location", "")]


def registry(browser):
    """Acceptance 2 and 6: MCP_DIR is SMS's --mcp-dir."""
    mcp_dir = os.environ["MCP_DIR"]
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    wait_live(page)
    page.evaluate("window.__sameDocument = true")

    started = time.monotonic()
    write_atomically(os.path.join(mcp_dir, "fresh.json"),
                     json.dumps({"mcpServers": {"fresh": {"command": "echo", "description": "dropped in"}}}))
    page.wait_for_selector("tr[data-server=fresh]", timeout=WAIT_MS)
    result["appeared_ms"] = round((time.monotonic() - started) * 1000)

    started = time.monotonic()
    write_atomically(os.path.join(mcp_dir, "broken.json"),
                     json.dumps({"mcpServers": {"later": {"command": "echo", "args": "not a list"}}}))
    problem = page.locator("#problems-table tr", has_text="broken.json")
    problem.wait_for(timeout=WAIT_MS)
    result["problem_ms"] = round((time.monotonic() - started) * 1000)
    result["problem"] = problem.inner_text()
    shot(page, "registry-problem")
    write_atomically(os.path.join(mcp_dir, "broken.json"),
                     json.dumps({"mcpServers": {"later": {"command": "echo", "args": ["a list"]}}}))
    problem.wait_for(state="detached", timeout=WAIT_MS)
    page.wait_for_selector("tr[data-server=later]", timeout=WAIT_MS)
    result["same_document"] = page.evaluate("window.__sameDocument === true")

    # Markup and script in a server file are text.
    hostile = ("<script>window.__pwned = 'script'</script><img src=x onerror=\"window.__pwned = 'img'\">"
               "<a href=\"javascript:window.__pwned = 'link'\">click me</a>")
    write_atomically(os.path.join(mcp_dir, "hostile.json"),
                     json.dumps({"mcpServers": {"hostile": {"command": "echo", "description": hostile}}}))
    write_atomically(os.path.join(mcp_dir, "hostile-id.json"),
                     json.dumps({"mcpServers": {"<script>window.__pwned='id'</script>": {"command": "echo"}}}))
    page.wait_for_selector("tr[data-server=hostile]", timeout=WAIT_MS)
    page.locator("#problems-table tr", has_text="hostile-id.json").wait_for(timeout=WAIT_MS)
    text = page.inner_text("main")
    result["hostile_as_text"] = hostile in text and "<script>window.__pwned='id'</script>" in text
    result["pwned"] = page.evaluate("window.__pwned === undefined ? null : String(window.__pwned)")
    result["javascript_links"] = page.locator("a[href^='javascript:']").count()
    result["images"] = page.locator("img").count()
    shot(page, "registry")
    page.goto(URL + "/servers/hostile")
    result["server_page_pwned"] = page.evaluate("window.__pwned === undefined ? null : String(window.__pwned)")
    result["server_page_text"] = hostile in page.inner_text("main")


def nodes(browser):
    """Acceptance 3: nodes node-a and node-b; NODE_B_PID; MCP_DIR."""
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/nodes")
    wait_live(page)
    expect(page.locator("#convergence")).to_have_text("all current", timeout=WAIT_MS)
    rows = {}
    for node in ("node-a", "node-b"):
        row = page.locator(f"tr[data-node='{node}']")
        rows[node] = {
            "alive": row.locator("td.alive").inner_text(),
            "applied": int(row.locator("td.applied").inner_text()),
            "lag": int(row.locator("td.lag").inner_text()),
        }
    result["rows"] = rows
    result["revision"] = int(page.inner_text("#revision"))
    shot(page, "nodes")

    page.goto(URL + "/nodes/node-a")
    fs = page.locator("#node-servers tr[data-server=fs]")
    expect(fs.locator("td").nth(1)).to_have_text("ready", timeout=WAIT_MS)
    result["fs_on_node_a"] = [fs.locator("td").nth(i).inner_text() for i in range(5)]
    shot(page, "node")

    page.goto(URL + "/nodes")
    wait_live(page)
    os.kill(int(os.environ["NODE_B_PID"]), signal.SIGKILL)
    stopped = time.monotonic()
    dead = page.locator("tr[data-node='node-b'] td.alive")
    expect(dead).to_have_text("not alive", timeout=60_000)
    result["not_alive_after_ms"] = round((time.monotonic() - stopped) * 1000)

    write_atomically(os.path.join(os.environ["MCP_DIR"], "more.json"),
                     json.dumps({"mcpServers": {"more": {"command": "echo"}}}))
    before = result["revision"]
    expect(page.locator("#revision")).not_to_have_text(str(before), timeout=WAIT_MS)
    expect(page.locator("#convergence")).to_have_text("all current", timeout=WAIT_MS)
    result["revision_after"] = int(page.inner_text("#revision"))
    result["node_a_after"] = int(page.locator("tr[data-node='node-a'] td.applied").inner_text())
    shot(page, "nodes-converged")


def fs_agent(browser):
    """Acceptance 4: MODULE (fs-agent.wasm), CONFIG and BAD_CONFIG (JSON)."""
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/tasks")
    page.fill("#task-id", "bad-config")
    page.set_input_files("#module-file", os.environ["MODULE"])
    page.fill("#task-config", os.environ["BAD_CONFIG"])
    page.click("form[action='/tasks'] button[type=submit]")
    result["bad_config"] = page.inner_text(".notice.error")

    page.goto(URL + "/tasks")
    page.fill("#task-id", "fs-agent")
    page.set_input_files("#module-file", os.environ["MODULE"])
    page.fill("#task-config", os.environ["CONFIG"])
    page.fill("#task-description", "reads the notes")
    page.click("form[action='/tasks'] button[type=submit]")
    page.wait_for_url(URL + "/tasks/fs-agent?notice=registered")
    result["registered"] = page.inner_text(".notice")

    page.fill("#invoke-input", "What do my notes say?")
    page.click("#invoke")
    page.wait_for_selector("#run-stdout", timeout=120_000)
    result["stdout"] = page.inner_text("#run-stdout")
    result["exit"] = page.inner_text("#run-result")
    wait_live(page)
    call = page.locator("#trace-table tr[data-kind='tool call']").first
    call.wait_for(timeout=WAIT_MS)
    result["trace"] = [
        [cell.inner_text() for cell in row.locator("td").all()]
        for row in page.locator("#trace-table tbody tr").all()
    ]
    shot(page, "task-run")
    page.goto(URL + "/tasks")
    result["recent"] = page.locator("#invocations tbody tr").count()


def explain(browser):
    """Acceptance 5: NODE, TASK and PARAMS (KEY=JSON lines)."""
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/explain")
    page.select_option("#explain-node", os.environ["NODE"])
    page.select_option("#explain-task", os.environ["TASK"])
    page.fill("#explain-params", os.environ["PARAMS"])
    page.click("form[action='/explain'] button[type=submit]")
    page.wait_for_selector("#explain-json", state="attached", timeout=60_000)
    result["explanation"] = json.loads(page.text_content("#explain-json"))
    result["rows"] = page.locator("#explain-table tbody tr").count()
    shot(page, "explain")


def trust(browser):
    """Acceptance 8 (and 6 for a tool's description): a call waiting for
    approval; PIN_SERVER, a server whose tools wait for their pins to be
    approved, one with a hostile description."""
    pin_server = os.environ["PIN_SERVER"]
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/trust")
    wait_live(page)
    pending = page.locator("#approvals-table tr[data-state=pending]").first
    pending.wait_for(timeout=60_000)
    result["pending"] = pending.inner_text()
    shot(page, "trust")
    # The approval's own page: who asked, until when, and the arguments
    # the operator decides on; approved from there.
    pending.locator("td a").first.click()
    page.locator("#approval-arguments").wait_for(timeout=WAIT_MS)
    result["approval"] = page.inner_text("#approval")
    result["approval_arguments"] = page.inner_text("#approval-arguments")
    shot(page, "approval")
    page.click("button[data-action=approve]")
    page.wait_for_url(URL + "/trust?notice=approved")
    result["notice"] = page.inner_text(".notice")

    drift = page.locator(f"#drift-table tr[data-server='{pin_server}'] a")
    drift.wait_for(timeout=WAIT_MS)
    drift.click()
    diff = page.inner_text("#pin-diff")
    result["diff"] = diff
    result["diff_pwned"] = page.evaluate("window.__pwned === undefined ? null : String(window.__pwned)")
    result["diff_javascript_links"] = page.locator("a[href^='javascript:']").count()
    shot(page, "pin-diff")
    page.click("#approve-pins")
    page.wait_for_url(f"{URL}/trust/pins/{pin_server}?notice=pins-approved")
    result["pins_notice"] = page.inner_text(".notice")


def oauth(browser):
    """A login started from the page: SERVER's authorization server is
    oidc-provider, whose own pages the operator signs in and consents at."""
    server = os.environ["SERVER"]
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/oauth")
    row = page.locator(f"#oauth-table tr[data-server='{server}']")
    result["before"] = row.get_attribute("data-state")
    row.locator("button[data-action=login]").click()
    # oidc-provider's sign-in page, then its consent page.
    page.wait_for_selector("input[name=login]", timeout=WAIT_MS)
    result["provider_page"] = page.url.split("?")[0]
    page.fill("input[name=login]", "alice")
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]", timeout=WAIT_MS)
    page.click("button[type=submit]")
    page.wait_for_selector("#logged-in", timeout=WAIT_MS)
    result["callback"] = page.url.split("?")[0]
    result["logged_in"] = page.inner_text("#logged-in")
    # The same code and state again (a replayed redirect) opens nothing.
    replayed = page.request.get(page.url)
    result["replayed"] = [replayed.status, replayed.text()]
    page.goto(URL + "/oauth")
    result["after"] = page.locator(f"#oauth-table tr[data-server='{server}']").get_attribute("data-state")
    shot(page, "oauth")


def at_provider(page, who):
    """Signs in as WHO and consents at oidc-provider's own pages."""
    page.wait_for_selector("input[name=login]", timeout=WAIT_MS)
    url = page.url.split("?")[0]
    page.fill("input[name=login]", who)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]", timeout=WAIT_MS)
    page.click("button[type=submit]")
    return url


def person_signs_in(browser, who, seen=result):
    """A new browser where WHO signed in at SMS's OpenID issuer; the
    issuer's page and the greeting are kept in SEEN."""
    page = new_context(browser).new_page()
    page.goto(URL + "/login")
    page.click("#sign-in-issuer")
    seen["issuer_page"] = at_provider(page, who)
    page.wait_for_selector("#signed-in", timeout=WAIT_MS)
    seen["signed_in"] = page.inner_text("#signed-in")
    return page


def invoke_page(page, task):
    page.goto(URL + "/tasks/" + task)
    page.fill("#invoke-input", "Go.")
    page.click("#invoke")
    page.wait_for_selector("#run-stdout", timeout=120_000)
    return page.inner_text("#run-stdout")


def mallory_signs_in(browser):
    """mallory's sign-in at the console, up to the issuer's redirect back:
    the callback URL, not followed. (A client of her own, as an attacker
    would use; the browser's routing does not see redirects.)"""
    import re
    client = browser.new_context(ignore_https_errors=True).request
    answer = client.get(URL + "/login/oidc", max_redirects=0)
    for _ in range(20):
        if answer.status in (302, 303):
            target = answer.headers["location"]
            if not target.startswith("http"):
                target = re.match(r"https?://[^/]+", answer.url).group(0) + target
            if "/login/oidc/callback" in target:
                return target
            answer = client.get(target, max_redirects=0)
            continue
        page = answer.text()
        form = re.search(r'<form[^>]*action="([^"]+)"', page)
        prompt = re.search(r'name="prompt" value="(\w+)"', page)
        check(form and prompt, f"mallory is stuck at {answer.url} ({answer.status})")
        data = {"prompt": prompt.group(1)}
        if data["prompt"] == "login":
            data.update(login="mallory", password="any")
        action = form.group(1)
        if not action.startswith("http"):
            action = re.match(r"https?://[^/]+", answer.url).group(0) + action
        answer = client.post(action, form=data, max_redirects=0)
    raise AssertionError("mallory's sign-in never came back")


def person(browser):
    """A person signs in at SMS's OpenID issuer (oidc-provider's own pages)
    and sees and invokes only what TASK's "invokers" allow."""
    page = person_signs_in(browser, os.environ["PERSON"])
    # The redirect back, replayed: nothing opens twice.
    replayed = page.request.get(page.url)
    result["replayed"] = replayed.status
    # Login CSRF: mallory signs in at the issuer with her own client, stops
    # before the redirect back, and has this person's browser finish it.
    callback = mallory_signs_in(browser)
    forged = page.request.get(callback)
    result["login_csrf"] = [forged.status, forged.text()]
    page.click("#continue")
    page.wait_for_url(URL + "/tasks")
    result["role"] = page.inner_text(".role")
    result["nav"] = [a.inner_text() for a in page.locator("nav[aria-label=Sections] a").all()]
    result["tasks"] = [r.get_attribute("data-task") for r in page.locator("#tasks-table tbody tr").all()]
    result["recent_shown"] = page.locator("#invocations").count()
    task = os.environ["TASK"]
    page.goto(URL + "/tasks/" + task)
    page.fill("#invoke-input", "Who am I?")
    page.click("#invoke")
    page.wait_for_selector("#run-stdout", timeout=120_000)
    result["exit"] = page.inner_text("#run-result")
    shot(page, "person-run")
    for path in ("/audit", "/tasks/" + os.environ["OTHER_TASK"], "/oauth"):
        answer = page.request.get(URL + path)
        result[path] = [answer.status, answer.text()]
    # The run's own page, once its records reached SMS: hers to read.
    invocation = page.inner_text("h2:has-text('Trace of') .mono")
    run_page = f"{URL}/tasks/{task}?invocation={invocation}"
    page.goto(run_page)
    page.wait_for_selector("#trace-table tbody tr", timeout=WAIT_MS)
    result["own_trace_rows"] = page.locator("#trace-table tbody tr").count()
    page.goto(URL + "/")
    result["home"] = page.url
    # Another person listed on the same task opens her run's page by its
    # id: the page answers as for a run of nobody's, its trace empty,
    # and says nothing of her.
    other = person_signs_in(browser, os.environ["OTHER_PERSON"], seen={})
    other.click("#continue")
    other.wait_for_url(URL + "/tasks")
    other.goto(run_page)
    result["other_trace_rows"] = other.locator("#trace-table tbody tr").count()
    result["other_page"] = other.inner_text("main")
    # Nor does the page's live refresh bring her rows later.
    fragment = other.request.get(run_page)
    result["other_fetch"] = [fragment.status, fragment.text()]


def connect(browser):
    """PERSON connects their own account for SERVER (its authorization
    server is another oidc-provider) and invokes TASK, which calls it;
    OTHER, who never connected, invokes it too."""
    page = person_signs_in(browser, os.environ["PERSON"])
    page.click("#continue")
    page.goto(URL + "/accounts")
    row = page.locator(f"#accounts-table tr[data-server='{os.environ['SERVER']}']")
    result["before"] = row.get_attribute("data-state")
    row.locator("button[data-action=connect]").click()
    result["provider_page"] = at_provider(page, os.environ["PERSON"])
    page.wait_for_selector("#logged-in", timeout=WAIT_MS)
    result["connected"] = page.inner_text("#logged-in")
    page.goto(URL + "/accounts")
    result["after"] = page.locator(
        f"#accounts-table tr[data-server='{os.environ['SERVER']}']").get_attribute("data-state")
    shot(page, "accounts")
    result["person_run"] = invoke_page(page, os.environ["TASK"])
    other = person_signs_in(browser, os.environ["OTHER"])
    other.click("#continue")
    result["other_run"] = invoke_page(other, os.environ["TASK"])


def usage(browser):
    """Issue 40: TASK's usage page, its totals and its chart."""
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    page.goto(URL + "/usage?task=" + os.environ["TASK"])
    page.wait_for_selector("#usage-chart rect.bar", state="attached")
    result["totals"] = {row.get_attribute("data-key"): row.get_attribute("data-value")
                        for row in page.locator("#usage-totals tr").all()}
    result["bars"] = [{"start": int(r.get_attribute("data-start")),
                       "runs": int(r.get_attribute("data-runs")),
                       "cost": int(r.get_attribute("data-cost-nano-usd")),
                       "height": float(r.get_attribute("height"))}
                      for r in page.locator("#usage-chart rect.bar").all()]
    result["nav"] = page.locator("nav a[href='/usage']").count()
    shot(page, "usage")


def timings(browser):
    """Page timings: each PAGES path, ROUNDS times; SMS's own time
    (Server-Timing) and the browser's, in ms."""
    page = new_context(browser).new_page()
    sign_in(page, ADMIN)
    rounds = int(os.environ.get("ROUNDS", "10"))
    out = {}
    for path in os.environ["PAGES"].split(","):
        server, total = [], []
        for _ in range(rounds):
            page.goto(URL + path)
            nav = page.evaluate("""() => {
                const n = performance.getEntriesByType('navigation')[0];
                const t = n.serverTiming.find(s => s.name === 'render');
                return {server: t ? t.duration : -1, total: n.responseEnd - n.requestStart};
            }""")
            server.append(nav["server"])
            total.append(nav["total"])
        out[path] = {"server_ms": sorted(server), "response_ms": sorted(total),
                     "bytes": len(page.content())}
    result["timings"] = out
    # Live: a file dropped into the MCP directory, until its row shows on
    # an open page (the hub's change, the event, the page re-read).
    if os.environ.get("MCP_DIR"):
        page.goto(URL + "/?q=live-")
        wait_live(page)
        live = []
        for i in range(rounds):
            started = time.monotonic()
            write_atomically(os.path.join(os.environ["MCP_DIR"], f"live-{i:03}.json"),
                             json.dumps({"mcpServers": {f"live-{i:03}": {"command": "echo"}}}))
            page.wait_for_selector(f"tr[data-server=live-{i:03}]", timeout=WAIT_MS)
            live.append((time.monotonic() - started) * 1000)
        result["live_ms"] = sorted(live)
    for name, path in (("registry-10k", "/"), ("nodes-1k", "/nodes")):
        if path in out:
            page.goto(URL + path)
            shot(page, name)


SCENARIOS = {f.__name__: f for f in (signin, registry, nodes, fs_agent, explain, trust, oauth, person, connect,
                                     usage, timings)}

if __name__ == "__main__":
    scenario = SCENARIOS[sys.argv[1]]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
            args=["--no-sandbox"],
        )
        try:
            scenario(browser)
        finally:
            browser.close()
    print("RESULT " + json.dumps(result))
