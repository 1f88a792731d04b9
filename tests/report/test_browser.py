"""The headless-browser fixture itself: a local page is opened, clicked and screenshotted."""

from __future__ import annotations


def test_browser_opens_a_local_page_and_runs_its_script(page, tmp_path):
    html = tmp_path / "page.html"
    html.write_text(
        "<!doctype html><html><body><table><tr><td>a</td><td>b</td></tr></table>"
        "<button onclick=\"document.body.dataset.clicked = 'yes'\">go</button></body></html>"
    )
    page.goto(html.as_uri())
    assert page.locator("td").count() == 2
    page.click("button")
    assert page.evaluate("document.body.dataset.clicked") == "yes"
    shot = tmp_path / "page.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
