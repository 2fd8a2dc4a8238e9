"""Sums `perf report --sort dso,sym -n --stdio` samples by where the code
comes from, for bench/profile.sh: reads the report on stdin, prints a
Markdown table of the groups, largest first."""

import re
import sys
from collections import Counter

LINE = re.compile(r"^\s+[\d.]+%\s+(\d+)\s+(\S+)\s+\[(.)\]\s+(.*?)\s*$")

# lanyard's own modules worth telling apart; the rest is "lanyard, other".
LANYARD_MODULES = {
    "server": "lanyard: server (connections, framing, stalls)",
    "proxy": "lanyard: proxy (the handler, headers, bodies)",
    "pool": "lanyard: upstream pool",
    "token": "lanyard: token and accounts",
    "accounts": "lanyard: token and accounts",
    "metrics": "lanyard: metrics",
}

CRATES = {
    "hyper": "hyper",
    "h2": "h2",
    "tokio": "tokio",
    "mio": "tokio",
    "http": "http (header maps, URIs)",
    "httparse": "httparse",
    "bytes": "bytes",
    "tracing": "tracing",
    "tracing_core": "tracing",
    "tracing_subscriber": "tracing",
    "prometheus": "prometheus",
    "std": "Rust std, core, alloc",
    "core": "Rust std, core, alloc",
    "alloc": "Rust std, core, alloc",
}


def crate_path(symbol):
    """The path a demangled symbol's code belongs to: `<A as B>::f` is A's,
    unless A is a bare generic (`<T as hyper::…>`), then B's."""
    s = symbol
    while s.startswith("<"):
        s = s[1:]
        head, sep, tail = s.partition(" as ")
        if sep and "::" not in head.split("<")[0]:
            s = tail
    return s


def group(dso, kind, symbol):
    if kind == "k":
        return "kernel (system calls, loopback TCP)"
    if dso.startswith("libc"):
        if re.search(r"malloc|free|_int_|unlink_chunk|tcache|realloc|calloc", symbol):
            return "libc: malloc and free"
        if re.search(r"mem(move|cpy|set|cmp)", symbol):
            return "libc: memmove, memcpy"
        return "libc: system call wrappers, other"
    if dso == "[vdso]":
        return "vDSO (clock reads)"
    path = crate_path(symbol)
    parts = path.split("::")
    if parts[0] == "lanyard":
        module = parts[1] if len(parts) > 1 else ""
        return LANYARD_MODULES.get(module, "lanyard: other")
    if parts[0] in CRATES:
        return CRATES[parts[0]]
    if re.match(r"^0x[0-9a-f]+$", symbol) or symbol.startswith("[unknown]"):
        return "unknown (no symbol)"
    return "other"


def main():
    groups = Counter()
    for line in sys.stdin:
        m = LINE.match(line)
        if m:
            samples, dso, kind, symbol = m.groups()
            groups[group(dso, kind, symbol)] += int(samples)
    total = sum(groups.values())
    if not total:
        print("(no samples)")
        return
    print("| where | samples | share |")
    print("| --- | ---: | ---: |")
    for name, n in groups.most_common():
        print(f"| {name} | {n} | {100 * n / total:.1f}% |")
    print(f"| all | {total} | 100% |")


if __name__ == "__main__":
    main()
