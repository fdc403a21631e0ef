"""The README's Python example, run as written, and sdk/python/examples/batch_swap.py, against
a real fusiond."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import ASTRONAUT, HOPPER, SOURCE_DIR, Daemon, read

EXAMPLES = os.path.join(SOURCE_DIR, "sdk", "python", "examples")


def readme_example() -> str:
    with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
    assert m, "README.md has no <!-- python-example --> block"
    return m.group(1)


def test_the_readme_example_runs_as_written(daemon: Daemon) -> None:
    code = readme_example()
    assert len([x for x in code.splitlines() if x.strip()]) <= 10  # the "10-line example"
    out = "/tmp/fusion-py.png"
    if os.path.exists(out):
        os.unlink(out)
    r = subprocess.run([sys.executable, "-c", code], cwd=SOURCE_DIR, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "FUSIOND_SOCKET": daemon.socket})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "fusiond SERVING"
    assert "  StageFinished blend" in lines and "  Done " in lines
    assert lines[-2].startswith("1 face(s): detect ")
    assert re.fullmatch(r"device tier: \d+ MiB used of 1024 MiB", lines[-1]), lines[-1]
    png = read(out)
    assert png.startswith(b"\x89PNG") and png[16:24] == (512).to_bytes(4, "big") + (600).to_bytes(4, "big")
    os.unlink(out)


def test_batch_swap_example(daemon: Daemon, tmp_path) -> None:
    cv2 = pytest.importorskip("cv2")
    photos = tmp_path / "photos"
    photos.mkdir()
    shutil.copy(HOPPER, photos / "grace.jpg")
    cv2.imwrite(str(photos / "grey.png"), np.full((200, 200, 3), 128, np.uint8))  # no face
    (photos / "notes.png").write_bytes(b"not an image")
    (photos / "README.txt").write_text("not an image, and not named like one: skipped")
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "batch_swap.py"), "--socket", daemon.socket,
                        "--source", ASTRONAUT, "--out", str(tmp_path / "out"), "--simple", str(photos)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # two of the three failed
    lines = r.stdout.splitlines()
    assert len(lines) == 3, lines
    assert any(re.match(r"\[\d/\d\] notes\.png: INVALID_ARGUMENT: .*target image", x) for x in lines), lines
    assert any(re.match(r"\[\d/2\] grey\.png: FAILED_PRECONDITION: job j-\w+ FAILED: .*no face", x) for x in lines), lines
    [ok] = [x for x in lines if "grace.jpg" in x]
    assert re.match(r"\[\d/2\] grace\.jpg: 1 face\(s\), \d+ ms of stages, waited [\d.]+ s -> .*grace\.png$", ok), ok
    assert read(str(tmp_path / "out" / "grace.png")).startswith(b"\x89PNG")
    assert sorted(os.listdir(tmp_path / "out")) == ["grace.png"]


def test_web_example_in_a_headless_browser(daemon: Daemon, tmp_path) -> None:
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_bin is None:
        pytest.skip("chromium or chromedriver absent (Debian: chromium chromium-driver python3-selenium)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="python3-selenium absent")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    app = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "web_app.py"), "--socket", daemon.socket,
                            "--port", "0"], stdout=subprocess.PIPE, text=True)
    browser = None
    try:
        line = app.stdout.readline()
        m = re.match(r"serving on (http://\S+/)", line)
        assert m, line
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1000,1100"):
            options.add_argument(arg)
        browser = webdriver.Chrome(service=Service(executable_path=driver_bin), options=options)
        browser.get(m.group(1))
        browser.find_element(By.ID, "source").send_keys(ASTRONAUT)  # real uploads through the inputs
        browser.find_element(By.ID, "target").send_keys(HOPPER)
        browser.find_element(By.ID, "swap").click()
        image = browser.find_element(By.ID, "result")
        WebDriverWait(browser, 90).until(
            lambda b: b.find_element(By.ID, "error").text or b.execute_script(
                "const i = document.getElementById('result');"
                "return i.style.display === 'block' && i.complete && i.naturalWidth > 0;"))
        assert browser.find_element(By.ID, "error").text == ""
        assert (image.get_property("naturalWidth"), image.get_property("naturalHeight")) == (512, 600)
        assert browser.find_element(By.ID, "status").text == "job SUCCEEDED"
        assert browser.find_element(By.ID, "bar").get_property("value") == 1
        memory = browser.find_element(By.ID, "memory").text
        assert "device cpu" in memory and "MiB" in memory and "ssd_mobilenetv1" in memory, memory
        shot = os.environ.get("FUSION_WEB_SCREENSHOT") or str(tmp_path / "web.png")
        browser.save_screenshot(shot)
        assert read(shot).startswith(b"\x89PNG")
    finally:
        if browser is not None:
            browser.quit()
        app.terminate()
        app.wait(10)


def fake_camera(tmp_path) -> str:
    """A Y4M clip for Chromium's fake camera (--use-file-for-fake-video-capture): Grace Hopper's
    photo scaled to 480 rows and centred on a black 640x480 frame, 10 frames (Chromium loops it)."""
    y4m = str(tmp_path / "camera.y4m")
    r = subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", HOPPER, "-frames:v", "10", "-r", "10",
                        "-vf", "scale=-2:480,pad=640:480:(ow-iw)/2:0,format=yuv420p", "-f", "yuv4mpegpipe", y4m],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return y4m


def test_web_live_page_streams_the_camera_through_a_session(daemon: Daemon, tmp_path) -> None:
    chromium, driver_bin = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_bin is None or shutil.which("ffmpeg") is None:
        pytest.skip("chromium, chromedriver or ffmpeg absent (Debian: chromium chromium-driver python3-selenium ffmpeg)")
    cv2 = pytest.importorskip("cv2")
    webdriver = pytest.importorskip("selenium.webdriver", reason="python3-selenium absent")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    import base64

    import fusiond

    camera = fake_camera(tmp_path)
    app = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "web_app.py"), "--socket", daemon.socket,
                            "--port", "0"], stdout=subprocess.PIPE, text=True)
    browser = None
    try:
        m = re.match(r"serving on (http://\S+/)", app.stdout.readline())
        assert m
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1200,1000", "--use-fake-device-for-media-stream",
                    "--use-fake-ui-for-media-stream", f"--use-file-for-fake-video-capture={camera}",
                    "--autoplay-policy=no-user-gesture-required"):
            options.add_argument(arg)
        browser = webdriver.Chrome(service=Service(executable_path=driver_bin), options=options)
        browser.get(m.group(1) + "live")
        text = lambda i: browser.find_element(By.ID, i).text  # noqa: E731
        browser.find_element(By.ID, "source").send_keys(ASTRONAUT)
        browser.find_element(By.ID, "start").click()
        WebDriverWait(browser, 90).until(lambda b: text("error") or int(text("frames")) >= 12)
        assert text("error") == ""
        assert text("status").startswith("live on cpu (ssd_mobilenetv1"), text("status")
        # One frame's figures, read at once (the page updates them frame by frame).
        faces, latency, p50, daemon_ms = browser.execute_script(
            "return ['faces', 'latency', 'p50', 'daemon'].map(i => document.getElementById(i).textContent)")
        assert faces == "1"  # the fake camera shows Hopper's face: swapped
        assert 0 < int(latency) < 5000 and 0 < int(p50) < 5000, (latency, p50)
        assert 0 < int(daemon_ms) <= int(latency) + 1, (daemon_ms, latency)  # fusiond's part of the round trip
        # The canvas holds the swapped frame: her face changed, the black padding and the rest not.
        url = browser.execute_script("return document.getElementById('out').toDataURL('image/png')")
        drawn = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
        assert drawn.shape == (480, 640, 3)
        frame = cv2.copyMakeBorder(cv2.resize(cv2.imread(HOPPER), (410, 480), interpolation=cv2.INTER_AREA),
                                   0, 0, 115, 115, cv2.BORDER_CONSTANT, value=(0, 0, 0))
        moved = np.abs(drawn.astype(np.int16) - frame.astype(np.int16)).max(axis=2) > 40  # over JPEG's noise
        assert moved[120:336, 219:435].mean() > 0.05, moved[120:336, 219:435].mean()  # her face
        assert moved[:, :100].mean() < 0.01 and moved[:, -100:].mean() < 0.01 and moved[440:].mean() < 0.02
        out_dir = os.environ.get("FUSION_TEST_OUTPUT_DIR") or str(tmp_path)
        shot = os.path.join(out_dir, "web_live.png")
        browser.save_screenshot(shot)
        assert read(shot).startswith(b"\x89PNG")
        browser.find_element(By.ID, "stop").click()
        WebDriverWait(browser, 30).until(lambda b: text("summary") != "-" or text("error"))
        assert text("error") == ""
        s = re.fullmatch(r"in (\d+), out (\d+), dropped (\d+)", text("summary"))
        assert s, text("summary")
        frames_in, frames_out, dropped = map(int, s.groups())
        assert frames_in == frames_out + dropped and frames_out >= 12, text("summary")
        with fusiond.Client(daemon.socket, timeout=10) as client:  # the session's leases went with it
            deadline = time.monotonic() + 2
            while any(x.leases for x in client.memory().models):
                assert time.monotonic() < deadline, [(x.name, x.leases) for x in client.memory().models]
                time.sleep(0.05)
    finally:
        if browser is not None:
            browser.quit()
        app.terminate()
        app.wait(10)
