"""Socket-level helpers for bench/run.sh, standard library only.

    run_probe.py free-ports N
        N distinct free TCP ports on 127.0.0.1, one a line.

    run_probe.py idle HOST:PORT COUNT READY_FILE
        Opens COUNT keep-alive connections to HOST:PORT, one after the
        other, sends one `GET /` on each and reads its answer, keeps them
        all open, then writes `open=COUNT` to READY_FILE and waits to be
        terminated.

    run_probe.py ready LANYARD RUNS
        Starts `LANYARD run` RUNS times, one after the other, with the
        environment it is given plus an admin listener on a fresh loopback
        port, and times each from just before the process is started to
        the first `/readyz` answered 200, polling every millisecond. Then
        reads the token request's own duration from /metrics and stops the
        process with SIGTERM. One line a run:
            run=I ready_ms=X token_ms=Y tokens=N exit=CODE
        Each run's log goes to LOG_DIR/startup-I.log (LOG_DIR from the
        environment, default the current directory).

Everything it connects to is on 127.0.0.1.
"""

import os
import re
import signal
import socket
import subprocess
import sys
import time

LOOPBACK = "127.0.0.1"


def free_ports(count):
    held = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((LOOPBACK, 0))
            held.append(s)
        for s in held:
            print(s.getsockname()[1])
    finally:
        for s in held:
            s.close()


def read_answer(sock):
    """Reads one HTTP/1.1 answer with a Content-Length; returns its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the headers")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    match = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    length = int(match.group(1)) if match else 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the body")
        rest += chunk
    return int(head.split(b" ", 2)[1])


def idle(target, count, ready_file):
    host, port = target.rsplit(":", 1)
    if host != LOOPBACK:
        sys.exit(f"run_probe: {host} is not {LOOPBACK}")
    request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    conns = []
    for i in range(count):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(request)
        status = read_answer(s)
        if status != 200:
            sys.exit(f"run_probe: connection {i + 1} was answered {status}")
        conns.append(s)
    tmp = ready_file + ".tmp"
    with open(tmp, "w") as out:
        out.write(f"open={len(conns)}\n")
    os.rename(tmp, ready_file)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def get(port, path):
    """One HTTP/1.0 GET on loopback: (status, body), or None when refused."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=2) as s:
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: {LOOPBACK}\r\n\r\n".encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b" ", 2)
    if len(parts) < 2:
        return None
    return int(parts[1]), body.decode(errors="replace")


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and re.match(re.escape(name) + r"(\{|$)", fields[0]):
            total += float(fields[1])
    return total


def ready(lanyard, runs):
    log_dir = os.environ.get("LOG_DIR", ".")
    for run in range(1, runs + 1):
        with socket.socket() as s:
            s.bind((LOOPBACK, 0))
            port = s.getsockname()[1]
        env = dict(os.environ, LANYARD_ADMIN_LISTEN=f"{LOOPBACK}:{port}")
        with open(os.path.join(log_dir, f"startup-{run}.log"), "wb") as log:
            started = time.monotonic()
            proc = subprocess.Popen(
                [lanyard, "run"], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
            ready_s = None
            while time.monotonic() - started < 30:
                answer = get(port, "/readyz")
                if answer is not None and answer[0] == 200:
                    ready_s = time.monotonic() - started
                    break
                if proc.poll() is not None:
                    break
                time.sleep(0.001)
            token_s, tokens = float("nan"), 0
            if ready_s is not None:
                answer = get(port, "/metrics")
                if answer is not None and answer[0] == 200:
                    token_s = metric(answer[1], "lanyard_token_request_duration_seconds_sum")
                    tokens = int(metric(answer[1], "lanyard_token_request_duration_seconds_count"))
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        if ready_s is None:
            sys.exit(f"run_probe: lanyard run {run} was not ready within 30 s (exit {proc.returncode})")
        print(
            f"run={run} ready_ms={ready_s * 1000:.1f} token_ms={token_s * 1000:.1f}"
            f" tokens={tokens} exit={code}",
            flush=True,
        )


def main(argv):
    if len(argv) == 3 and argv[1] == "free-ports":
        free_ports(int(argv[2]))
    elif len(argv) == 5 and argv[1] == "idle":
        idle(argv[2], int(argv[3]), argv[4])
    elif len(argv) == 4 and argv[1] == "ready":
        ready(argv[2], int(argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
