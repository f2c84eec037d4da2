"""The token page on a phone: the new token and its curl line wrap, and copy."""

import pytest

from tests.browser import chromium, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_tokens_curl_line_wraps_on_a_phone_and_has_a_copy_button(live_server, reviewer):
    with chromium() as browser:
        context = browser.new_context(
            viewport={"width": 390, "height": 844},
            permissions=["clipboard-read", "clipboard-write"],
        )
        page = context.new_page()
        log_in(page, live_server.url, "rita")
        page.goto(f"{live_server.url}/tokens/")
        page.fill("#id_name", "nightly export")
        page.click("button.primary")
        page.wait_for_selector("#curl-line")
        curl = page.locator("#curl-line")
        assert "Authorization: Bearer" in curl.inner_text()
        # Wrapped, not scrolled: the line is as wide as its box.
        assert curl.evaluate("e => e.scrollWidth <= e.clientWidth")
        assert page.locator('button[data-copy="curl-line"]').is_visible()
        page.click('button[data-copy="curl-line"]')
        page.wait_for_selector('button[data-copy="curl-line"] >> text=Copied')
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("curl -X POST") and "/api/v1/traces" in copied
