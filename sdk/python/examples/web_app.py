#!/usr/bin/env python3
"""A minimal web front end of fusiond on Python's standard library (http.server): upload a
source and a target image, watch the job's progress, see the result and fusiond's memory
figures (as `fusionctl mem`); and a live page that streams the browser's camera through a
fusiond live session (fusiond.Client.live) and draws the swapped frames back with their
latency. The kind of page WebUI users run.

  python web_app.py [--socket PATH] [--port 8000] [--host 127.0.0.1]

One fusiond.Client serves every request thread (it is thread-safe); it is made in main(), in
the process that serves (no fork). Routes:
  GET  /                     the page
  POST /jobs                 body: source bytes then target bytes; header X-Source-Bytes:
                             the source's length. -> {"job_id": ...} or {"error": ...}
  GET  /jobs/ID/events       the job's progress as server-sent events (JSON per event)
  GET  /jobs/ID/result.png   the result image
  GET  /memory               device and host tier figures and models, JSON
  GET  /live                 the live page (camera -> fusiond -> canvas)
  POST /live/sessions        body: the source image. Opens a live session ->
                             {"session": ID, "device": ..., "models": [...]} or {"error": ...}
  POST /live/sessions/ID/frames  body: one camera frame, JPEG. -> the swapped frame, JPEG, with
                             headers X-Sequence, X-Faces-Swapped, X-Keyframe, X-Frames-Dropped,
                             X-Daemon-Ms (fusiond's total for the frame); 204 with X-Dropped: 1
                             when fusiond dropped it (a newer frame came first); JSON error
                             (409 for a session that ended with an error, 404 unknown)
  POST /live/sessions/ID/close   ends the session -> its summary, JSON
A page may keep two frames in flight, so the next one travels while fusiond swaps the one before;
when fusiond is slower than that, it keeps the newest frame and drops the other. Sessions a page
left without closing end after IDLE_SECONDS without a frame.
"""
from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

import fusiond

MAX_UPLOAD = 64 << 20  # bytes, both images together
MAX_FRAME = 8 << 20  # bytes, one camera frame
IDLE_SECONDS = 10.0  # a live session without a frame for this long is closed
FRAME_WAIT_SECONDS = 30.0  # longest wait for one frame's result
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fusiond: face swap</title>
<style>
 body { font: 15px system-ui, sans-serif; margin: 24px; max-width: 980px; color: #222 }
 fieldset { border: 1px solid #ccc; padding: 12px 16px; margin-bottom: 16px }
 label { display: inline-block; width: 64px } progress { width: 320px }
 table { border-collapse: collapse; margin-top: 8px } td, th { padding: 2px 10px; text-align: right }
 th:first-child, td:first-child { text-align: left } #result { max-width: 320px; display: none; margin-top: 8px }
 #error { color: #b00020 }
</style></head><body>
<h1>fusiond: face swap</h1>
<p><a href="/live">Live: swap your camera</a></p>
<fieldset><legend>Images</legend>
 <div><label for="source">source</label><input type="file" id="source" accept="image/*"></div>
 <div><label for="target">target</label><input type="file" id="target" accept="image/*"></div>
 <div style="margin-top:8px"><button id="swap">Swap</button>
  <progress id="bar" max="1" value="0"></progress> <span id="status">idle</span></div>
 <div id="error"></div>
 <img id="result" alt="result">
</fieldset>
<fieldset><legend>fusiond memory</legend><div id="memory">...</div></fieldset>
<script>
const $ = id => document.getElementById(id);
const mib = b => (b / 1048576).toFixed(1) + " MiB";
$("swap").onclick = async () => {
  const s = $("source").files[0], t = $("target").files[0];
  $("error").textContent = "";
  if (!s || !t) { $("error").textContent = "choose a source and a target image"; return; }
  $("status").textContent = "uploading"; $("bar").value = 0; $("result").style.display = "none";
  const r = await fetch("/jobs", {method: "POST", headers: {"X-Source-Bytes": String(s.size)},
                                  body: new Blob([s, t])});
  const j = await r.json();
  if (j.error) { $("status").textContent = "refused"; $("error").textContent = j.error; return; }
  const events = new EventSource("/jobs/" + j.job_id + "/events");
  events.onmessage = m => {
    const e = JSON.parse(m.data);
    if (e.progress !== undefined) $("bar").value = e.progress;
    if (e.kind === "Queued") $("status").textContent = "queued, position " + e.position;
    if (e.kind === "StageStarted") $("status").textContent = e.stage ? "stage " + e.stage : "running";
    if (e.kind === "Done") {
      events.close(); $("bar").value = 1; $("status").textContent = "job " + e.state;
      if (e.state === "SUCCEEDED") {
        $("result").src = "/jobs/" + j.job_id + "/result.png"; $("result").style.display = "block";
      } else { $("error").textContent = e.error; }
    }
  };
};
async function memory() {
  const m = await (await fetch("/memory")).json();
  let h = "<table><tr><th>tier</th><th>kind</th><th>used</th><th>reserved</th><th>budget</th><th>peak</th></tr>";
  for (const t of [m.device, m.host])
    h += `<tr><td>${t.tier}</td><td>${t.kind}</td><td>${mib(t.used_bytes)}</td><td>${mib(t.reserved_bytes)}</td>` +
         `<td>${mib(t.budget_bytes)}</td><td>${mib(t.peak_bytes)}</td></tr>`;
  h += "</table><table><tr><th>model</th><th>tier</th><th>bytes</th><th>leases</th><th>pinned</th></tr>";
  for (const x of m.models.filter(x => x.tier !== "storage"))
    h += `<tr><td>${x.name}</td><td>${x.tier}</td><td>${mib(x.bytes)}</td><td>${x.leases}</td><td>${x.pinned ? "yes" : ""}</td></tr>`;
  $("memory").innerHTML = h + "</table>";
}
memory(); setInterval(memory, 1000);
</script></body></html>
"""

LIVE_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fusiond: live</title>
<style>
 body { font: 15px system-ui, sans-serif; margin: 24px; max-width: 1100px; color: #222 }
 fieldset { border: 1px solid #ccc; padding: 12px 16px; margin-bottom: 16px }
 .views { display: flex; gap: 16px; align-items: flex-start } .views div { font-size: 13px; color: #555 }
 video, canvas { width: 480px; background: #111; display: block } #error { color: #b00020 }
 table { border-collapse: collapse } td { padding: 2px 10px } td:last-child { text-align: right; font-variant-numeric: tabular-nums }
</style></head><body>
<h1>fusiond: live</h1>
<p><a href="/">one image</a></p>
<fieldset><legend>Session</legend>
 <label for="source">source face</label> <input type="file" id="source" accept="image/*">
 <button id="start">Start camera</button> <button id="stop" disabled>Stop</button>
 <span id="status">idle</span>
 <div id="error"></div>
</fieldset>
<div class="views">
 <div>camera<video id="video" muted playsinline></video></div>
 <div>swapped by fusiond<canvas id="out" width="640" height="480"></canvas></div>
</div>
<fieldset><legend>Frames</legend><table>
 <tr><td>frames drawn</td><td id="frames">0</td></tr>
 <tr><td>latency, camera frame to canvas (last / median of 30), ms</td><td><span id="latency">-</span> / <span id="p50">-</span></td></tr>
 <tr><td>of it in fusiond (receive to result), ms</td><td id="daemon">-</td></tr>
 <tr><td>faces swapped in the last frame</td><td id="faces">-</td></tr>
 <tr><td>dropped by fusiond (newer frame first)</td><td id="dropped">0</td></tr>
 <tr><td>summary</td><td id="summary">-</td></tr>
</table></fieldset>
<script>
const $ = id => document.getElementById(id);
const video = $("video"), out = $("out"), grab = document.createElement("canvas");
let session = null, running = false, drawn = 0, lastSeq = -1, latencies = [];
const sleep = ms => new Promise(r => setTimeout(r, ms));
function fail(text) { $("error").textContent = text; $("status").textContent = "stopped"; running = false; }
function stopCamera() { if (video.srcObject) video.srcObject.getTracks().forEach(t => t.stop()); video.srcObject = null; }
$("start").onclick = async () => {
  $("error").textContent = ""; $("summary").textContent = "-";
  const source = $("source").files[0];
  if (!source) { fail("choose a source image (the face to put in)"); return; }
  try {
    video.srcObject = await navigator.mediaDevices.getUserMedia({video: {width: 640, height: 480}, audio: false});
    await video.play();
  } catch (e) { fail("camera: " + e.message); return; }
  $("status").textContent = "opening the session";
  const j = await (await fetch("/live/sessions", {method: "POST", body: source})).json();
  if (j.error) { stopCamera(); fail(j.error); return; }
  session = j.session; running = true; drawn = 0; lastSeq = -1; latencies = [];
  $("status").textContent = "live on " + j.device + " (" + j.models.join(", ") + ")";
  $("start").disabled = true; $("stop").disabled = false;
  pump(); pump();  // two frames in flight: one travels while fusiond swaps the other
};
$("stop").onclick = async () => {
  running = false; $("stop").disabled = true; $("start").disabled = false; stopCamera();
  if (!session) return;
  const j = await (await fetch("/live/sessions/" + session + "/close", {method: "POST"})).json();
  session = null;
  if (j.error) { fail(j.error); return; }
  $("summary").textContent = "in " + j.frames_received + ", out " + j.frames_returned + ", dropped " + j.frames_dropped;
  $("status").textContent = "stopped";
};
window.addEventListener("pagehide", () => { if (session) navigator.sendBeacon("/live/sessions/" + session + "/close"); });
async function pump() {
  while (running) {
    if (video.readyState < 2 || !video.videoWidth) { await sleep(20); continue; }
    grab.width = video.videoWidth; grab.height = video.videoHeight;
    grab.getContext("2d").drawImage(video, 0, 0);
    const t0 = performance.now();
    const frame = await new Promise(resolve => grab.toBlob(resolve, "image/jpeg", 0.85));
    let r;
    try { r = await fetch("/live/sessions/" + session + "/frames", {method: "POST", body: frame}); }
    catch (e) { if (running) fail("network: " + e.message); return; }
    if (!running) return;
    if (r.status === 204) continue;  // fusiond dropped it: a newer frame came first
    if (!r.ok) { const j = await r.json().catch(() => ({error: r.statusText})); fail(j.error); return; }
    const seq = Number(r.headers.get("X-Sequence"));
    const bitmap = await createImageBitmap(await r.blob());
    if (seq < lastSeq) continue;  // the other request's newer frame is already drawn
    lastSeq = seq;
    if (out.width !== bitmap.width || out.height !== bitmap.height) { out.width = bitmap.width; out.height = bitmap.height; }
    out.getContext("2d").drawImage(bitmap, 0, 0);
    const ms = performance.now() - t0;
    latencies.push(ms); if (latencies.length > 30) latencies.shift();
    const sorted = [...latencies].sort((a, b) => a - b);
    $("frames").textContent = ++drawn;
    $("latency").textContent = ms.toFixed(0);
    $("p50").textContent = sorted[Math.floor((sorted.length - 1) / 2)].toFixed(0);
    $("daemon").textContent = Number(r.headers.get("X-Daemon-Ms")).toFixed(0);
    $("faces").textContent = r.headers.get("X-Faces-Swapped");
    $("dropped").textContent = r.headers.get("X-Frames-Dropped");
  }
}
</script></body></html>
"""


class SessionEnded(Exception):
    """A frame for a live session that has ended (closed, or after its error)."""


class WebLive:
    """One page's live session. Request threads call frame() (several at once: a page keeps
    two frames in flight); one reader thread reads the session's results and hands each to the
    request that sent its frame. Results come in the order the frames were sent, so a result
    also answers every earlier frame still waiting: fusiond dropped those (None). Thread-safe."""

    def __init__(self, client: fusiond.Client, source: bytes) -> None:
        self.session = client.live(source)  # fusiond.Error: no face in the source, no room, ...
        self.lock = threading.Lock()        # waiting, next, ended
        self.send_lock = threading.Lock()   # sends in sequence order
        self.waiting: Dict[int, Tuple[threading.Event, List[Any]]] = {}
        self.next = 0
        self.ended: Optional[BaseException] = None
        self.last_frame = time.monotonic()
        self.reader = threading.Thread(target=self.read, name="live-reader", daemon=True)
        self.reader.start()

    def read(self) -> None:
        end: BaseException = SessionEnded("the live session has ended")
        try:
            for r in self.session:
                with self.lock:
                    for seq in [s for s in self.waiting if s <= r.sequence]:
                        event, box = self.waiting.pop(seq)
                        box.append(r if seq == r.sequence else None)
                        event.set()
        except fusiond.Error as e:
            end = e
        with self.lock:
            self.ended = end
            for event, box in self.waiting.values():
                box.append(end)
                event.set()
            self.waiting.clear()

    def frame(self, image: bytes) -> Optional[fusiond.LiveResult]:
        """The swapped frame, or None when fusiond dropped it. Raises the session's error
        (fusiond.Error) or SessionEnded."""
        self.last_frame = time.monotonic()
        event = threading.Event()
        box: List[Any] = []  # the outcome: a LiveResult, None (dropped) or the end
        with self.send_lock:
            with self.lock:
                if self.ended is not None:
                    raise self.ended
                seq = self.next
                self.next += 1
                self.waiting[seq] = (event, box)
            try:
                self.session.send(image, sequence=seq)
            except BaseException:
                with self.lock:
                    self.waiting.pop(seq, None)
                raise
        if not event.wait(FRAME_WAIT_SECONDS):
            with self.lock:
                self.waiting.pop(seq, None)
            raise SessionEnded(f"no result for frame {seq} within {FRAME_WAIT_SECONDS:g} s")
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def close(self) -> Optional[fusiond.LiveSummary]:
        """Ends the session after the frames sent (fusiond swaps the one waiting) and returns
        its summary (None when it had ended with an error)."""
        self.session.close_send()
        self.reader.join(FRAME_WAIT_SECONDS)
        self.session.close()
        return self.session.summary


class LiveSessions:
    """The open sessions by id; closes those idle for IDLE_SECONDS (a page gone without its
    close). Thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_id: Dict[str, WebLive] = {}
        self.ids = itertools.count(1)
        threading.Thread(target=self.reap, name="live-reaper", daemon=True).start()

    def add(self, live: WebLive) -> str:
        with self.lock:
            sid = f"s{next(self.ids)}"
            self.by_id[sid] = live
            return sid

    def get(self, sid: str) -> Optional[WebLive]:
        with self.lock:
            return self.by_id.get(sid)

    def pop(self, sid: str) -> Optional[WebLive]:
        with self.lock:
            return self.by_id.pop(sid, None)

    def reap(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            with self.lock:
                idle = [sid for sid, live in self.by_id.items() if now - live.last_frame > IDLE_SECONDS]
                gone = [self.by_id.pop(sid) for sid in idle]
            for live in gone:
                live.session.close()  # cancels: fusiond releases the session at once


def event_json(e: fusiond.JobEvent) -> Dict[str, Any]:
    d: Dict[str, Any] = {"kind": type(e).__name__}
    if isinstance(e, fusiond.Queued):
        d["position"] = e.position
    elif isinstance(e, (fusiond.StageStarted, fusiond.StageFinished)):
        d.update(stage=e.stage, progress=e.progress)
    elif isinstance(e, fusiond.Degradation):
        d["text"] = e.text
    elif isinstance(e, fusiond.FramesDone):
        d.update(progress=e.progress, frames_done=e.frames_done, frames_total=e.frames_total)
    elif isinstance(e, fusiond.Done):
        d.update(state=e.job.state.name, error=e.job.error_message)
    return d


class Handler(BaseHTTPRequestHandler):
    client: fusiond.Client  # set by main(): one Client for every request thread
    live: LiveSessions      # set by main()

    def log_message(self, format: str, *args: Any) -> None:  # quiet; errors still go to stderr
        pass

    def send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, value: Any, status: int = 200) -> None:
        self.send(status, json.dumps(value).encode(), "application/json")

    def do_GET(self) -> None:
        try:
            if self.path == "/":
                self.send(200, PAGE.encode(), "text/html; charset=utf-8")
            elif self.path == "/live":
                self.send(200, LIVE_PAGE.encode(), "text/html; charset=utf-8")
            elif self.path == "/memory":
                m = self.client.memory()
                self.send_json({"device": m.device.__dict__, "host": m.host.__dict__,
                                "models": [x.__dict__ for x in m.models]})
            elif m := re.fullmatch(r"/jobs/([\w-]+)/events", self.path):
                self.stream_events(m.group(1))
            elif m := re.fullmatch(r"/jobs/([\w-]+)/result\.png", self.path):
                self.send(200, self.client.job(m.group(1)).result().image_bytes, "image/png")
            else:
                self.send_json({"error": "not found"}, 404)
        except fusiond.NotFound as e:
            self.send_json({"error": e.message}, 404)
        except fusiond.Error as e:
            self.send_json({"error": str(e)}, 502)

    def stream_events(self, job_id: str) -> None:
        job = self.client.job(job_id)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for e in job.events():
            self.wfile.write(f"data: {json.dumps(event_json(e))}\n\n".encode())
            self.wfile.flush()

    def body(self, limit: int) -> Optional[bytes]:
        """The request's body; None after answering 400 when it is empty or over ``limit``."""
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            length = -1
        if not 0 < length <= limit:
            self.send_json({"error": f"send a body of 1 to {limit} bytes"}, 400)
            return None
        return self.rfile.read(length)

    def do_POST(self) -> None:
        if self.path.startswith("/live/"):
            return self.post_live()
        if self.path != "/jobs":
            return self.send_json({"error": "not found"}, 404)
        try:
            length = int(self.headers.get("Content-Length", "0"))
            source_bytes = int(self.headers.get("X-Source-Bytes", "-1"))
        except ValueError:
            return self.send_json({"error": "bad Content-Length or X-Source-Bytes"}, 400)
        if not 0 < source_bytes < length <= MAX_UPLOAD:
            return self.send_json({"error": f"send a source and a target, {MAX_UPLOAD} bytes at most"}, 400)
        body = self.rfile.read(length)
        try:
            job = self.client.submit(body[:source_bytes], body[source_bytes:])
        except fusiond.Error as e:  # e.g. InvalidArgument naming the image
            return self.send_json({"error": str(e)}, 400)
        self.send_json({"job_id": job.id})

    def post_live(self) -> None:
        if self.path == "/live/sessions":
            source = self.body(MAX_UPLOAD)
            if source is None:
                return
            try:
                opened = WebLive(self.client, source)
            except fusiond.Error as e:  # no face in the source, no room on the device, ...
                return self.send_json({"error": str(e)}, 400)
            o = opened.session.opened
            return self.send_json({"session": self.live.add(opened), "device": o.device, "models": o.models})
        m = re.fullmatch(r"/live/sessions/(\w+)/(frames|close)", self.path)
        live = self.live.get(m.group(1)) if m else None
        if m is None or live is None:
            return self.send_json({"error": "no such live session"}, 404)
        if m.group(2) == "close":
            self.live.pop(m.group(1))
            summary = live.close()
            return self.send_json(summary.__dict__ if summary else {"error": str(live.ended)})
        frame = self.body(MAX_FRAME)
        if frame is None:
            return
        try:
            r = live.frame(frame)
        except (fusiond.Error, SessionEnded, ValueError) as e:  # InvalidArgument stage 'decode'; closed
            self.live.pop(m.group(1))
            stage = getattr(e, "stage", "")
            return self.send_json({"error": str(e) + (f" (stage '{stage}')" if stage else "")}, 409)
        if r is None:
            self.send_response(204)
            self.send_header("X-Dropped", "1")
            return self.end_headers()
        self.send_response(200)
        for name, value in (("Content-Type", "image/" + r.format), ("Content-Length", len(r.image_bytes)),
                            ("X-Sequence", r.sequence), ("X-Faces-Swapped", r.faces_swapped),
                            ("X-Keyframe", int(r.keyframe)), ("X-Frames-Dropped", r.frames_dropped),
                            ("X-Daemon-Ms", f"{r.timings.total_ms:.1f}")):
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(r.image_bytes)


def main() -> int:
    ap = argparse.ArgumentParser(description="a web page in front of fusiond")
    ap.add_argument("--socket", help="fusiond socket (default $FUSIOND_SOCKET, else /run/fusiond/fusiond.sock)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 = any free port")
    a = ap.parse_args()
    with fusiond.Client(a.socket, timeout=30) as client:
        Handler.client = client
        Handler.live = LiveSessions()
        server = ThreadingHTTPServer((a.host, a.port), Handler)
        server.daemon_threads = True
        print(f"serving on http://{a.host}:{server.server_address[1]}/ (fusiond at {client.target})", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
