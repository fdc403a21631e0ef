#!/usr/bin/env python3
"""A minimal web front end of fusiond on Python's standard library (http.server): upload a
source and a target image, watch the job's progress, see the result and fusiond's memory
figures (as `fusionctl mem`). The kind of page WebUI users run, in ~200 lines.

  python web_app.py [--socket PATH] [--port 8000] [--host 127.0.0.1]

One fusiond.Client serves every request thread (it is thread-safe); it is made in main(), in
the process that serves (no fork). Routes:
  GET  /                     the page
  POST /jobs                 body: source bytes then target bytes; header X-Source-Bytes:
                             the source's length. -> {"job_id": ...} or {"error": ...}
  GET  /jobs/ID/events       the job's progress as server-sent events (JSON per event)
  GET  /jobs/ID/result.png   the result image
  GET  /memory               device and host tier figures and models, JSON
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict

import fusiond

MAX_UPLOAD = 64 << 20  # bytes, both images together
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

    def do_POST(self) -> None:
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


def main() -> int:
    ap = argparse.ArgumentParser(description="a web page in front of fusiond")
    ap.add_argument("--socket", help="fusiond socket (default $FUSIOND_SOCKET, else /run/fusiond/fusiond.sock)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 = any free port")
    a = ap.parse_args()
    with fusiond.Client(a.socket, timeout=30) as client:
        Handler.client = client
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
