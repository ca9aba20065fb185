"""Serve a Rerun recording with the set-up's web viewer and save a screenshot of it from headless
Chromium: how the docs' pictures of recordings are made (regenerate them in the same commit as
any change to experiments/src/logging/layout.rs).

    python3 scripts/screenshot.py RECORDING.rrd OUT.png [--size 1600x900] [--wait 40]

Needs Debian's Chromium (`apt-get install chromium`; scripts/setup.sh does not install it, as
no test uses it) and the venv's `rerun` (scripts/setup.sh). Standard library only: Chromium is
driven over its DevTools pipe (`--remote-debugging-pipe`, JSON messages ending in a NUL byte).
`--wait` is how many seconds the page gets to load the viewer and the recording before the
picture: the software renderer of a machine without a GPU needs a while. The viewer binds
127.0.0.1 only (ports --web-port 9090 and --grpc-port 9876).
"""
import argparse
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def wait_for_port(port: int, seconds: float) -> None:
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.25)
    sys.exit(f"the web viewer did not start on 127.0.0.1:{port}")


class DevTools:
    """Chromium's DevTools protocol over the two pipes it reads on fd 3 and writes on fd 4."""

    def __init__(self, chromium: str, args: list):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()

        def plumb():
            # Through spare numbers first, in case a pipe end already sits on 3 or 4.
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        # The kept descriptors are closed last in the child, so 3 and 4 must be among them.
        keep = tuple(sorted({3, 4, to_child_r, from_child_w}))
        self.proc = subprocess.Popen([chromium, "--remote-debugging-pipe", *args], pass_fds=keep, preexec_fn=plumb,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.next_id = 0
        self.buffer = b""

    def call(self, method: str, params: dict = None, session: str = None) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    sys.exit(f"Chromium closed its DevTools pipe during {method}")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    sys.exit(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("recording")
    p.add_argument("out")
    p.add_argument("--size", default="1600x900", help="WIDTHxHEIGHT of the page")
    p.add_argument("--wait", type=float, default=40.0, help="seconds to let the viewer load before the picture")
    p.add_argument("--web-port", type=int, default=9090)
    p.add_argument("--grpc-port", type=int, default=9876)
    args = p.parse_args()
    width, height = (int(x) for x in args.size.split("x"))
    venv = os.environ.get("O2O_VENV", os.path.expanduser("~/.cache/o2o/venv"))
    rerun = os.path.join(venv, "bin", "rerun")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not os.path.isfile(args.recording):
        sys.exit(f"{args.recording}: no such recording")
    if not os.access(rerun, os.X_OK):
        sys.exit(f"{rerun} is missing: run scripts/setup.sh")
    if not chromium:
        sys.exit("Chromium is missing: apt-get install chromium")

    for port in (args.web_port, args.grpc_port):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                sys.exit(f"127.0.0.1:{port} is in use (another viewer?): choose other ports with --web-port / --grpc-port")
    server = subprocess.Popen([rerun, "--web-viewer", "--bind", "127.0.0.1", "--web-viewer-port", str(args.web_port), "--port", str(args.grpc_port), args.recording],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    profile = tempfile.mkdtemp(prefix="o2o-chromium-")
    browser = None
    try:
        wait_for_port(args.web_port, 30)
        # Software WebGL (SwiftShader): no GPU or display needed.
        browser = DevTools(chromium, ["--headless=new", "--no-sandbox", f"--user-data-dir={profile}", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
                                      "--ignore-gpu-blocklist", "--hide-scrollbars", f"--window-size={width},{height}", "about:blank"])
        url = f"http://127.0.0.1:{args.web_port}/?url=rerun%2Bhttp%3A%2F%2F127.0.0.1%3A{args.grpc_port}%2Fproxy"
        target = browser.call("Target.createTarget", {"url": url})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        time.sleep(args.wait)
        shot = browser.call("Page.captureScreenshot", {"format": "png"}, session)
        with open(args.out, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        print(args.out)
    finally:
        if browser:
            browser.close()
        # The venv's `rerun` is a wrapper that starts the real viewer: end its whole group.
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
