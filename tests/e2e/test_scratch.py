"""Chromium on a server of its own: the folders of a session that has ended are gone.

The server runs with its scratch root in a temporary folder and a grace period of 1 s
(``LPIPS_EXPLORER_SCRATCH_GRACE_S``; 150 s by default, longer than Streamlit keeps a
disconnected session for a reconnect). A folder a dead server left behind is there before the
first upload and gone after it (start-up clean-up); a tab uploads a zip on "Score a dataset"
(its folder appears under ``server-<pid>-*/``); the tab is closed, and within a few seconds its
folder is deleted while another tab's folder stays; the demo set is one shared folder.
"""

from __future__ import annotations

import io
import time
import zipfile

import pytest
from PIL import Image

from .driver import OUT, AppPage, start_server


@pytest.fixture(scope="module")
def scratch_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("scratch")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LPIPS_EXPLORER_SCRATCH", str(root))
        mp.setenv("LPIPS_EXPLORER_SCRATCH_GRACE_S", "1")
        server = start_server(OUT / "scratch-server.log")
    yield server, root
    server.stop()


def _zip(colour: int) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for folder in ("ref", "mine"):
            png = io.BytesIO()
            Image.new("RGB", (40, 40), (colour, 0, 0) if folder == "ref" else (0, colour, 0)).save(png, "PNG")
            zf.writestr(f"{folder}/p.png", png.getvalue())
    return buf.getvalue()


def _upload(ap: AppPage, data: bytes) -> None:
    ap.open("score_a_dataset")
    ap.wait_until(lambda: ap.title() == "Score a dataset", "the dataset page")
    ap.choose_radio("A zip of folders")
    uploader = ap.page.get_by_test_id("stMain").get_by_test_id("stFileUploader").locator("input[type=file]")
    uploader.wait_for(state="attached")
    ap.rerun(lambda: uploader.set_input_files(files=[{"name": "set.zip", "mimeType": "application/zip",
                                                      "buffer": data}]))
    ap.wait_until(lambda: "Reference folder" in ap.main_text(), "the folder pickers")


def _zip_folders(root):
    return sorted(root.glob("server-*/zip-*"))


def test_the_folders_of_ended_sessions_are_gone(scratch_server, browser):
    server, root = scratch_server
    dead = root / "server-999999-gone" / "zip-old"
    dead.mkdir(parents=True)
    (dead / "left.png").write_bytes(b"x" * 1000)

    contexts = [browser.new_context(viewport={"width": 1400, "height": 1800}) for _ in range(2)]
    try:
        pages = [AppPage(c.new_page(), server) for c in contexts]
        _upload(pages[0], _zip(200))
        first = _zip_folders(root)
        assert len(first) == 1 and (first[0] / "ref" / "p.png").is_file()
        assert not dead.parent.exists()  # the dead server's leftovers went when the registry started
        _upload(pages[1], _zip(100))
        both = _zip_folders(root)
        assert len(both) == 2 and first[0] in both
        second = [f for f in both if f != first[0]]

        contexts[0].close()  # the first tab ends its session
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and first[0].exists():
            time.sleep(0.25)
        assert not first[0].exists(), "the ended session's folder is still there after 60 s"
        assert _zip_folders(root) == second  # the open tab keeps its own

        pages[1].choose_radio("Built-in demo set")
        pages[1].wait_until(lambda: "Patches of the sample photos" in pages[1].main_text(), "the demo set")
        demos = sorted(p.name for p in root.glob("demo-*"))
        assert len(demos) == 1 and (root / demos[0] / ".complete").is_file()
    finally:
        for c in contexts:
            try:
                c.close()
            except Exception:  # already closed
                pass
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and _zip_folders(root):
        time.sleep(0.25)
    assert _zip_folders(root) == []  # every session has ended: nothing is left
    server.assert_healthy()
