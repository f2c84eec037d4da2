"""Real headless Chromium (Debian's, never a downloaded build) driven by Playwright."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Playwright's sync API runs an event loop in this thread; Django's ORM, used by the test
# itself for setup and checks, must be allowed beside it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@contextmanager
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
            headless=True,
            args=CHROMIUM_ARGS,
        )
        try:
            yield browser
        finally:
            browser.close()


def log_in(page: Page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"pw-{username}-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


@contextmanager
def watched_page(
    browser: Browser, base_url: str, username: str, *, timeout_ms: int = 10_000, **context_options
) -> Iterator[Page]:
    """A signed-in page whose script errors, console errors (a refusal by the content
    security policy among them) and failed requests are collected: at the end there must be
    none."""
    context = browser.new_context(**context_options)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda message: (
            message.type == "error"
            and not message.text.startswith("Failed to load resource")
            and errors.append(message.text)
        ),
    )
    page.on(
        "response",
        lambda response: (
            response.status >= 400 and errors.append(f"{response.status} {response.url}")
        ),
    )
    log_in(page, base_url, username)
    yield page
    context.close()
    assert errors == []
