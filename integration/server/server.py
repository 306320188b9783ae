"""A small multi-process server shaped like SGLang's: the main process serves HTTP on
loopback and starts worker processes with multiprocessing's spawn method; each worker compiles
at start-up (see worker.py) and answers the requests the main process hands it over a pipe.

    python integration/server/server.py [--workers 2] [--port-file FILE]

Prints `READY <port>` once every worker has compiled (and writes the port to --port-file);
exits 1 with the workers' errors when one fails to start. GET /status lists the workers,
GET /compute?x=N is answered by the next worker. SIGTERM or SIGINT stops the workers and
exits 0.
"""
import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import worker

START_TIMEOUT = float(os.environ.get("SERVER_START_TIMEOUT", "300"))
REPLY_TIMEOUT = 30.0


class Workers:
    def __init__(self, n):
        ctx = mp.get_context("spawn")
        self.procs, self.conns, self.status = [], [], []
        for i in range(n):
            ours, theirs = ctx.Pipe()
            p = ctx.Process(target=worker.main, args=(theirs,), name=f"worker-{i}", daemon=True)
            p.start()
            theirs.close()
            self.procs.append(p)
            self.conns.append(ours)
        self.next = 0
        self.lock = threading.Lock()

    def wait_ready(self):
        for conn, p in zip(self.conns, self.procs):
            if not conn.poll(START_TIMEOUT):
                self.status.append({"pid": p.pid, "ok": False, "error": "no status in time"})
                continue
            try:
                self.status.append(conn.recv())
            except EOFError:
                self.status.append({"pid": p.pid, "ok": False, "error": f"died ({p.exitcode})"})
        return all(s.get("ok") for s in self.status)

    def ask(self, x):
        with self.lock:
            conn = self.conns[self.next % len(self.conns)]
            self.next += 1
            conn.send(x)
            if not conn.poll(REPLY_TIMEOUT):
                raise TimeoutError("worker did not answer")
            return conn.recv()

    def stop(self):
        for conn in self.conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for p in self.procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
                p.join(5)


def handler(workers):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            try:
                if url.path == "/status":
                    body = {"workers": workers.status}
                elif url.path == "/compute":
                    body = workers.ask(float(parse_qs(url.query)["x"][0]))
                else:
                    self.send_error(404)
                    return
                code = 200
            except Exception as e:
                body, code = {"error": f"{type(e).__name__}: {e}"}, 500
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--port-file")
    args = ap.parse_args()
    # CPU only: FlashInfer's JIT-spec code asks for a target architecture it cannot detect.
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "10.0")

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    workers = Workers(args.workers)
    if not workers.wait_ready():
        for s in workers.status:
            print(f"worker {s.get('pid')} failed: {s.get('error')}", file=sys.stderr)
        workers.stop()
        sys.exit(1)
    httpd = HTTPServer(("127.0.0.1", 0), handler(workers))
    port = httpd.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    print(f"READY {port}", flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    stop.wait()
    httpd.shutdown()
    workers.stop()
    print("STOPPED", flush=True)


if __name__ == "__main__":
    main()
