"""Fixtures for the browser tests: one real server and one Chromium per test session.

Full tier only: ``tests/conftest.py`` marks every test here ``e2e`` and a plain ``pytest``
deselects them; run them with ``pytest --full`` (``pytest --full -m e2e`` for these alone).

- ``server``: ``streamlit run app.py`` on a free loopback port with the headless flags, started
  once, healthy (``/_stcore/health`` says ``ok``) before any test uses it, its process group
  killed at the end. stdout and stderr go to ``test-output/e2e/server.log``.
- ``browser``: Debian's Chromium through Playwright's sync API (``/usr/bin/chromium``; a missing
  browser fails the tests with the fix, it never skips them).
- ``app_page``: a fresh browser context (so a fresh Streamlit session) wrapped in
  :class:`~e2e.driver.AppPage`, closed after the test.

The load test runs first (see :func:`pytest_collection_modifyitems`): eight people opening the
Distortion lab on a server nobody has visited yet is the moment a deployment really meets
(cold caches, first model builds, deep links into a page), and the only one in which "the model
is loaded once" says something about concurrent sessions.
"""

from __future__ import annotations

import pytest

from .driver import OUT, AppPage, launch_options, require_chromium, start_server


def pytest_collection_modifyitems(session, config, items):
    """Within ``tests/e2e``, run the load test before the other browser tests (cold server)."""
    def rank(item) -> int:
        return 0 if item.module.__name__.endswith("test_load") else 1

    e2e = [i for i in items if "/tests/e2e/" in str(i.path).replace("\\", "/")]
    if not e2e:
        return
    first = items.index(e2e[0])
    rest = [i for i in items if i not in e2e]
    items[:] = rest[:first] + sorted(e2e, key=rank) + rest[first:]


@pytest.fixture(scope="session")
def server():
    """The real app, one process for the whole session."""
    require_chromium()  # fail before paying for a server start
    srv = start_server(OUT / "server.log")
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def browser():
    require_chromium()
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    try:
        browser = pw.chromium.launch(**launch_options())
    except Exception as exc:  # a broken install: say what to do, do not skip
        pw.stop()
        pytest.fail(f"Chromium at {launch_options()['executable_path']} did not start: {exc}. "
                    "Reinstall it with `bash scripts/setup.sh --test`.", pytrace=False)
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture
def app_page(server, browser):
    """A new browser context (a new Streamlit session) on the app, 1400 px wide."""
    context = browser.new_context(viewport={"width": 1400, "height": 1800})
    page = context.new_page()
    try:
        yield AppPage(page, server)
    finally:
        context.close()
