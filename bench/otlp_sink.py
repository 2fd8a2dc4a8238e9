#!/usr/bin/env python3
"""An OTLP/HTTP receiver for bench/run.sh --otel: answers every POST to
/v1/traces with 200 and an empty ExportTraceServiceResponse, and counts the
exports and their bytes (no OpenTelemetry Collector is packaged in the
registries this project installs from). Loopback only.

usage: otlp_sink.py PORT_FILE STATS_FILE
Writes its port to PORT_FILE once listening; on SIGTERM writes
`exports=N bytes=M` to STATS_FILE and exits."""
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file, stats_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()
counts = {"exports": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length)
        status = 200 if self.path == "/v1/traces" else 404
        if status == 200:
            with lock:
                counts["exports"] += 1
                counts["bytes"] += len(body)
        self.send_response(status)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
server.daemon_threads = True


def stop(*_):
    with lock, open(stats_file, "w") as out:
        out.write(f"exports={counts['exports']} bytes={counts['bytes']}\n")
    threading.Thread(target=server.shutdown).start()


signal.signal(signal.SIGTERM, stop)
with open(port_file, "w") as out:
    out.write(f"{server.server_address[1]}\n")
server.serve_forever()
