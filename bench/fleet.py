"""Load generator, scraper and report for bench/fleet.sh; standard library
only. SIDECARS is a file of one sidecar a line, `PROXY ADMIN PID`, with
PROXY and ADMIN as HOST:PORT; a sidecar's number is its line's, from 0.

    fleet.py load SIDECARS OUT
        Keeps one keep-alive HTTP/1.1 connection to each sidecar's proxy
        and sends `GET /` on it every 0.5-1 s (drawn afresh each time, so
        the sidecars are not asked in step), until SIGTERM. Appends one
        line per request to OUT:
            SENT_MS SIDECAR STATUS ERROR
        SENT_MS is the wall-clock time the request was sent, STATUS the
        answer's status or `-` when none came, ERROR the answer's
        `lanyard-error` header, the name of the socket error, or `-`.

    fleet.py scrape SIDECARS OUT
        Writes `SIDECAR EXPIRY_UNIX_S DURATION_SUM_S DURATION_COUNT` to OUT
        for each sidecar, from its /metrics now: its held token's expiry
        (lanyard_token_expiry_timestamp_seconds) and its token requests'
        duration histogram so far.

    fleet.py report OPTIONS (see --help)
        Reads what bench/fleet.sh gathered (the sidecars' JSON logs,
        `lanyard-I.log` in --logs, among it), prints the table, and exits 1
        when a check fails.

Everything it connects to is on 127.0.0.1.
"""

import argparse
import asyncio
import bisect
import collections
import datetime
import json
import os
import random
import re
import signal
import socket
import sys
import time

LOOPBACK = "127.0.0.1"
# Each sidecar gets a request every GAP_MIN-GAP_MAX seconds: light load,
# but dense enough that every second of every phase is sampled.
GAP_MIN, GAP_MAX = 0.5, 1.0
# Far above any answer on loopback; an answer this late is a failure.
TIMEOUT_S = 5.0
# lanyard renews at a uniformly drawn 70-85% of each token's lifetime
# (RefreshPolicy::renew_fraction in src/token/refresher.rs).
MEAN_RENEW_FRACTION = 0.775
# docs/tokens.md "Renewal and retries": while no usable token is held, failed token requests are
# retried at least every 15 s, jittered; an equal-jitter backoff capped at
# 15 s waits 7.5-15 s.
RETRY_CAP_S = 15.0
# While a token is held, retries are spread over the time it has left
# (docs/tokens.md "Renewal and retries"): the outage's busiest second of token
# requests from sidecars still holding one must stay under N / this, about
# the no-token phase's own busiest seconds (7.5-15 s apart, N/11.25 a
# second on average). Judged with tokens of HELD_JUDGED_FROM_S or more:
# shorter ones renew so often (N / (0.775 x lifetime) a second) that their
# renewals alone, failing, come near it.
HELD_PEAK_DIVISOR = 5
HELD_JUDGED_FROM_S = 60


def sidecars(path):
    """[(proxy, admin, pid)], each address as (host, port)."""
    result = []
    with open(path) as f:
        for line in f:
            proxy, admin, pid = line.split()
            result.append((address(proxy), address(admin), int(pid)))
    return result


def address(text):
    host, port = text.rsplit(":", 1)
    if host != LOOPBACK:
        sys.exit(f"fleet.py: {text} is not on {LOOPBACK}")
    return host, int(port)


async def read_answer(reader):
    """One HTTP/1.1 answer: (status, lanyard-error or None, keep-alive)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower().endswith("chunked"):
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":
                    pass
                break
            await reader.readexactly(size + 2)
    elif "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    else:
        await reader.read()
        return status, headers.get("lanyard-error"), False
    keep = headers.get("connection", "").lower() != "close"
    return status, headers.get("lanyard-error"), keep


async def ask(index, proxy, records):
    host, port = proxy
    request = f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    rng = random.Random()
    writer = None
    # A random start spreads the sidecars over the first gap.
    await asyncio.sleep(rng.uniform(0, GAP_MAX))
    while True:
        # Microseconds, not whole milliseconds: a request sent a fraction
        # of a millisecond before its sidecar's retirement must not read
        # as sent a millisecond earlier.
        sent_ms = time.time_ns() / 1e6
        status, error = "-", "-"
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), TIMEOUT_S
                )
            writer.write(request)
            code, lanyard_error, keep = await asyncio.wait_for(read_answer(reader), TIMEOUT_S)
            status, error = str(code), lanyard_error or "-"
            if not keep:
                writer.close()
                writer = None
        except (OSError, EOFError, ValueError, IndexError, asyncio.TimeoutError) as err:
            error = type(err).__name__
            if writer is not None:
                writer.close()
            writer = None
        # When the answer came: lanyard saw the request between the two.
        answered_ms = time.time_ns() / 1e6
        records.append(f"{sent_ms:.3f} {answered_ms:.3f} {index} {status} {error}\n")
        await asyncio.sleep(rng.uniform(GAP_MIN, GAP_MAX))


async def load(sidecars_path, out_path):
    records = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    tasks = [
        asyncio.create_task(ask(i, proxy, records))
        for i, (proxy, _, _) in enumerate(sidecars(sidecars_path))
    ]
    with open(out_path, "a") as out:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except asyncio.TimeoutError:
                pass
            # Written every second, so a run cut short still leaves them.
            out.writelines(records)
            out.flush()
            records.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        out.writelines(records)


def http_get(addr, path):
    """One HTTP/1.0 GET: the body, or None."""
    try:
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(f"GET {path} HTTP/1.0\r\nHost: {addr[0]}\r\n\r\n".encode())
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    except OSError:
        return None
    head, _, body = data.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.") or head.split(b" ", 2)[1] != b"200":
        return None
    return body.decode(errors="replace")


def metric(text, name, labels=""):
    """Sum of metric `name`'s samples whose labels contain `labels`."""
    total = 0.0
    for line in text.splitlines():
        fields = line.split()
        if (
            len(fields) == 2
            and re.fullmatch(re.escape(name) + r"(\{.*\})?", fields[0])
            and labels in fields[0]
        ):
            total += float(fields[1])
    return total


def scrape(sidecars_path, out_path):
    with open(out_path, "w") as out:
        for i, (_, admin, _) in enumerate(sidecars(sidecars_path)):
            text = http_get(admin, "/metrics")
            if text is not None:
                expiry = metric(text, "lanyard_token_expiry_timestamp_seconds")
                total = metric(text, "lanyard_token_request_duration_seconds_sum")
                done = metric(text, "lanyard_token_request_duration_seconds_count")
                out.write(f"{i} {expiry} {total} {done}\n")


def read_scrape(path):
    """{sidecar: (expiry_s, duration_sum_s, duration_count)}"""
    with open(path) as f:
        return {int(i): (float(e), float(s), float(c)) for i, e, s, c in map(str.split, f)}


# --- report -------------------------------------------------------------


def read_mock(path):
    """Token request times (ms), outage on/off times (ms), events lost."""
    requests, on, off, lost = [], None, None, 0
    pattern = re.compile(r"^(token_request|token_outage|token_events_lost)=(\S+) unix_ms=(\d+)")
    with open(path) as f:
        for line in f:
            m = pattern.match(line)
            if not m:
                continue
            key, value, ms = m.group(1), m.group(2), int(m.group(3))
            if key == "token_request":
                requests.append(ms)
            elif key == "token_outage":
                if value == "on" and on is None:
                    on = ms
                elif value == "off" and on is not None and off is None:
                    off = ms
            else:
                lost += int(value)
    requests.sort()
    return requests, on, off, lost


def unix_ms(timestamp):
    """Milliseconds since the epoch of an RFC 3339 timestamp."""
    moment = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


def failed_token_requests(logs, n):
    """{sidecar: [ms]}: when each sidecar's failed token requests ended,
    from its JSON log. On loopback the mock answers a 503 within a
    millisecond or two, so this is when the request was sent, near
    enough for one-second windows."""
    failed = {}
    for i in range(n):
        times = []
        with open(os.path.join(logs, f"lanyard-{i}.log"), errors="replace") as f:
            for line in f:
                if '"token request failed"' not in line:
                    continue
                try:
                    times.append(unix_ms(json.loads(line)["timestamp"]))
                except (ValueError, KeyError, TypeError):
                    continue
        failed[i] = sorted(times)
    return failed


def held_requests(failed, retired, on, off):
    """The token requests sent in the outage by sidecars that still held a
    token, as sorted times (ms), and the first of each sidecar's among
    them (its scheduled renewal, failing)."""
    held, first = [], []
    for i, times in failed.items():
        until = min(retired.get(i, on), off)
        mine = [t for t in times if on <= t < until]
        held.extend(mine)
        first.extend(mine[:1])
    return sorted(held), sorted(first)


def count(times, start, end):
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def peak_second(times, start, end):
    """Most events in any 1000 ms window within [start, end), and where
    that window starts."""
    inside = times[bisect.bisect_left(times, start) : bisect.bisect_left(times, end)]
    best, best_at, j = 0, start, 0
    for i, t in enumerate(inside):
        while inside[j] <= t - 1000:
            j += 1
        if i - j + 1 > best:
            best, best_at = i - j + 1, inside[j]
    return best, best_at


def proc_fields(pid):
    """VmRSS and VmHWM in KiB, threads, CPU seconds and seconds alive."""
    status = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            status[name] = value.split()
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces; the fields after it do not.
        stat = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    cpu_s = (int(stat[11]) + int(stat[12])) / ticks
    alive_s = uptime - int(stat[19]) / ticks
    return (
        int(status["VmRSS"][0]),
        int(status["VmHWM"][0]),
        int(status["Threads"][0]),
        cpu_s,
        alive_s,
    )


def mib(kib):
    return f"{kib / 1024:.1f} MiB"


# Phases of a proxied request, by when it was sent, in the table's order.
PHASES = {
    "steady": "steady state",
    "held": "outage, held token still valid",
    "retired": "outage, held token retired",
    "waiting": "recovery, no token yet",
    "renewed": "recovery, token held",
}
# Where a sidecar may have no token to send, so lanyard's own 503
# token_unavailable is the expected answer.
NO_TOKEN_PHASES = ("retired", "waiting")


def classify(records, on, off, end, retired):
    """Tallies proxied requests by phase: {phase: [requests, 2xx,
    token_unavailable, other failures]}, the failures that count against
    the run by kind, how many sidecars served again after the outage and
    when the last did, and the sidecars whose retirement was unknown."""
    first_ok_after = {}
    for sent, _, i, status, _ in records:
        if sent >= off and status.startswith("2") and i not in first_ok_after:
            first_ok_after[i] = sent
    tally = {phase: [0, 0, 0, 0] for phase in PHASES}
    failures = collections.Counter()
    unknown = set()
    for sent, answered, i, status, error in records:
        if sent >= end:
            continue
        if sent < on:
            phase = "steady"
        elif sent < off:
            if i not in retired:
                unknown.add(i)
            # Judged by when lanyard could have seen it: only a request
            # answered before the retirement was certainly seen while the
            # token was valid. One sent just before and seen just after is
            # in transit, not a failure with a valid token.
            phase = "held" if answered < retired.get(i, on) else "retired"
        else:
            phase = "renewed" if sent >= first_ok_after.get(i, end) else "waiting"
        unavailable = status == "503" and error == "token_unavailable"
        column = 1 if status.startswith("2") else 2 if unavailable else 3
        tally[phase][0] += 1
        tally[phase][column] += 1
        if column == 3 or (column == 2 and phase not in NO_TOKEN_PHASES):
            failures[f"{PHASES[phase]}: {status} {error}"] += 1
    last_back = max(first_ok_after.values(), default=off)
    return tally, failures, (len(first_ok_after), last_back), unknown


def fleet_usage(fleet, at_steady):
    """The sidecars' processes and their own counts: per-process
    (VmRSS, VmHWM, threads, CPU s, alive s), token requests by outcome, and
    the token requests' total duration and count since the steady state
    began (the start-up's, a hundred processes making their first RSA
    signature at once, say little)."""
    procs = [proc_fields(pid) for _, _, pid in fleet]
    outcomes = collections.Counter()
    durations = [0.0, 0.0]
    for i, (_, admin, _) in enumerate(fleet):
        text = http_get(admin, "/metrics")
        if text is None:
            outcomes["unscraped"] += 1
            continue
        for line in text.splitlines():
            # Token series carry client_id (one account here) beside outcome.
            m = re.match(r'lanyard_token_requests_total\{[^}]*\boutcome="([^"]+)"[^}]*\} (\S+)', line)
            if m:
                outcomes[m.group(1)] += int(float(m.group(2)))
        _, sum_before, count_before = at_steady.get(i, (0, 0.0, 0.0))
        durations[0] += metric(text, "lanyard_token_request_duration_seconds_sum") - sum_before
        durations[1] += metric(text, "lanyard_token_request_duration_seconds_count") - count_before
    return procs, outcomes, durations


def write_series(path, times, start, end, on):
    with open(path, "w") as out:
        out.write("second_from_outage_start token_requests\n")
        for k in range(int((end - start) // 1000)):
            at = start + k * 1000
            out.write(f"{(at - on) / 1000:.0f} {count(times, at, at + 1000)}\n")


def report(args):
    n, lifetime = args.sidecars, args.expires_in
    fleet = sidecars(args.sidecars_file)
    # The sidecars' counts first: the mock's, read after, then include
    # every request they counted, and any answered in between.
    at_steady = read_scrape(args.scrape_steady)
    procs, outcomes, durations = fleet_usage(fleet, at_steady)
    tokens, on, off, lost = read_mock(args.mock_out)
    if on is None or off is None:
        sys.exit("fleet.py: the mock's output has no outage on and off")
    steady_from, end = args.steady_from_ms, args.end_ms
    expiry = {i: e * 1000 for i, (e, _, _) in read_scrape(args.scrape_outage).items() if e > 0}
    # lanyard_token_expiry_timestamp_seconds is the token's retirement, its
    # expiry less LANYARD_EXPIRY_MARGIN (docs/tokens.md "Token lifetime"): until
    # then a sidecar holds a token it may send.
    retired = expiry
    with open(args.requests) as f:
        records = sorted(
            (float(sent), float(answered), int(i), status, error)
            for sent, answered, i, status, error in map(str.split, f)
        )
    tally, failures, (recovered, last_back), unknown = classify(records, on, off, end, retired)
    failed_valid = sum(tally[p][0] - tally[p][1] for p in PHASES if p not in NO_TOKEN_PHASES)
    failed_other = sum(tally[p][3] for p in NO_TOKEN_PHASES)
    write_series(args.series, tokens, steady_from, end, on)

    verdicts = []

    def check(ok):
        verdicts.append(ok)
        return "PASS" if ok else "FAIL"

    def row(name, value, verdict=""):
        print(f"{name:<44} {value:<52} {verdict}".rstrip())

    def rate(start, stop):
        seconds = (stop - start) / 1000
        return f"{count(tokens, start, stop) / seconds:.2f} ({count(tokens, start, stop)} in {seconds:.0f} s)"

    def peak(start, stop, since):
        most, at = peak_second(tokens, start, stop)
        return most, f"{most} at +{(at - since) / 1000:.1f} s"

    steady_peak, steady_peak_text = peak(steady_from, on, steady_from)
    recovery_peak, recovery_peak_text = peak(off, end, off)
    # From when the last held token expired, no sidecar holds one.
    none_held_from = max(expiry.values(), default=on)
    none_held_rate = count(tokens, none_held_from, off) / max(off - none_held_from, 1) * 1000
    failed = failed_token_requests(args.logs, n)
    held, first = held_requests(failed, retired, on, off)
    held_peak, held_at = peak_second(held, on, off)
    first_peak, _ = peak_second(first, on, off)
    logged = sum(count(times, on, off) for times in failed.values())
    judged = lifetime >= HELD_JUDGED_FROM_S
    held_limit = n / HELD_PEAK_DIVISOR
    rule = "-" * 102

    print()
    start = f"started over {args.start_over} s" if args.start_over else "started at once"
    print(
        f"lanyard fleet: {n} sidecars ({start}), tokens of {lifetime} s; steady state {(on - steady_from) / 1000:.0f} s"
        f" (after {lifetime} s of warm-up), outage {(off - on) / 1000:.0f} s, recovery {(end - off) / 1000:.0f} s"
    )
    print(rule)
    row("token requests/s, steady state", rate(steady_from, on))
    row("  expected: N / (0.775 x lifetime)", f"{n / (MEAN_RENEW_FRACTION * lifetime):.2f}")
    row("  busiest second", steady_peak_text)
    outage_peak, outage_peak_text = peak(on, off, on)
    row("token requests/s, whole outage", rate(on, off))
    row("  busiest second", outage_peak_text)
    held_for = (none_held_from - on) / 1000
    row(
        "outage, sidecars still holding a token",
        f"{len(held)} token requests in the {held_for:.0f} s to the last retirement"
        f" ({len(held) / max(held_for, 1):.2f}/s)",
    )
    row(
        "  per sidecar",
        f"{len(held) / max(len(first), 1):.2f} token requests: its failed renewal, then"
        f" {(len(held) - len(first)) / max(len(first), 1):.2f} retries",
    )
    held_text = f"{held_peak} at +{(held_at - on) / 1000:.1f} s"
    if judged:
        row(
            "  busiest second",
            f"{held_text} (limit < N/{HELD_PEAK_DIVISOR} = {held_limit:g})",
            check(held_peak < held_limit),
        )
    else:
        row("  busiest second", f"{held_text} (not judged: tokens under {HELD_JUDGED_FROM_S} s)")
    in_peak = count(first, held_at, held_at + 1000)
    row(
        "  of it: failed renewals, retries",
        f"{in_peak}, {held_peak - in_peak} (failed renewals alone: {first_peak} in their busiest second)",
    )
    if off - none_held_from >= 5000:
        nothing_peak, nothing_peak_text = peak(none_held_from, off, on)
        row("token requests/s, outage, no token held", rate(none_held_from, off))
        row("  busiest second", nothing_peak_text)
    else:
        row("token requests/s, outage, no token held", "n/a: the outage ended as the last token expired")
    row(
        "  contract: retries at most 15 s apart",
        f">= N/15 = {n / RETRY_CAP_S:.2f}; 7.5-15 s once capped: up to {n / (RETRY_CAP_S / 2):.2f}",
    )
    row(
        "token requests, busiest second of recovery",
        f"{recovery_peak_text} (limit < N/2 = {n / 2:g})",
        check(recovery_peak < n / 2),
    )
    row("  contract: retries 7.5-15 s apart", f"about N/11.25 = {n / 11.25:.1f} a second, plus noise")
    row(
        "sidecars serving again after the outage",
        f"{recovered}/{n} within {(end - off) / 1000:.0f} s; the last after {(last_back - off) / 1000:.1f} s",
    )
    print(rule)
    print(
        f"{'proxied requests, by phase':<44} {'requests':>9} {'2xx':>9}"
        f" {'503 token_unavailable':>22} {'other failures':>15}"
    )
    for phase, label in PHASES.items():
        print(f"  {label:<42} " + " ".join(f"{v:>{w}}" for v, w in zip(tally[phase], (9, 9, 22, 15))))
    row("failed while a valid token was held", f"{failed_valid} (must be 0)", check(failed_valid == 0))
    row("other failures while no token was held", f"{failed_other} (must be 0)", check(failed_other == 0))
    for kind, times in failures.most_common(5):
        row(f"  {kind}", f"x{times}")
    print(rule)
    rss = [p[0] for p in procs]
    hwm = [p[1] for p in procs]
    cpu_s = sum(p[3] for p in procs)
    row(
        "RSS of the N lanyard processes",
        f"{mib(sum(rss))} in all; {mib(sum(rss) / n)} each ({mib(min(rss))}-{mib(max(rss))})",
    )
    row("  peak RSS (VmHWM) per process", f"{mib(sum(hwm) / n)} mean, {mib(max(hwm))} max")
    row("  threads per process", f"{procs[0][2]}")
    row(
        "CPU of the N lanyard processes",
        f"{cpu_s:.1f} s in all: {1000 * cpu_s / sum(p[4] for p in procs):.2f} ms/s per sidecar",
    )
    if args.mock_pid:
        mock = proc_fields(args.mock_pid)
        row("mock (one thread): CPU, RSS", f"{mock[3]:.1f} s, {mib(mock[0])}")
    counted = sum(v for k, v in outcomes.items() if k != "unscraped")
    row("token requests, mock / sidecars' /metrics", f"{len(tokens)} / {counted}")
    row("  by outcome", ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    if durations[1]:
        row(
            "  mean duration, from the steady state on",
            f"{1000 * durations[0] / durations[1]:.1f} ms",
        )
    print(rule)
    if lost:
        print(f"note: the mock did not print {lost} token requests; the rates above are low by that much")
    if unknown:
        print(f"note: {len(unknown)} sidecars reported no token expiry at the outage's start")
    if off - none_held_from >= 5000 and none_held_rate < n / RETRY_CAP_S:
        print("note: with no token held, sidecars retried less often than every 15 s (docs/tokens.md, Renewal and retries)")
    if abs(logged - count(tokens, on, off)) > max(2, count(tokens, on, off) // 50):
        print(
            f"note: the sidecars' logs show {logged} failed token requests in the outage, the mock"
            f" {count(tokens, on, off)}: the split by held token above is off by the difference"
        )
    if held_peak >= held_limit and not args.start_over:
        print(
            "note: the sidecars started at once, so their renewals come, and fail, in clumps (the steady"
            " state's busiest second above), which no retry rule spreads; --start-over spreads them"
        )
    if outage_peak >= n / 2:
        print(
            "note: the outage's busiest second had N/2 or more token requests: sidecars that renew"
            " together fail together, and their backoffs' first, short steps pile up"
        )
    if steady_peak >= recovery_peak:
        print(
            "note: the steady state's busiest second is the recovery's or busier: sidecars that start"
            " together renew together, and 70-85% jitter spreads them only slowly"
        )
    return 0 if all(verdicts) else 1


def main(argv):
    if len(argv) == 4 and argv[1] == "load":
        asyncio.run(load(argv[2], argv[3]))
    elif len(argv) == 4 and argv[1] == "scrape":
        scrape(argv[2], argv[3])
    elif len(argv) >= 2 and argv[1] == "report":
        parser = argparse.ArgumentParser(prog="fleet.py report")
        parser.add_argument("--sidecars-file", required=True)
        parser.add_argument("--requests", required=True, help="the load's output")
        parser.add_argument("--mock-out", required=True, help="the mock's stdout")
        parser.add_argument("--scrape-steady", required=True, help="`scrape` as the steady state began")
        parser.add_argument("--scrape-outage", required=True, help="`scrape` a second into the outage")
        parser.add_argument("--series", required=True, help="token requests per second go here")
        parser.add_argument("--logs", required=True, help="the directory of the sidecars' lanyard-I.log")
        parser.add_argument("--start-over", type=int, default=0, help="seconds the start was spread over")
        parser.add_argument("--sidecars", type=int, required=True)
        parser.add_argument("--expires-in", type=int, required=True)
        parser.add_argument("--steady-from-ms", type=int, required=True)
        parser.add_argument("--end-ms", type=int, required=True)
        parser.add_argument("--mock-pid", type=int)
        sys.exit(report(parser.parse_args(argv[2:])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
