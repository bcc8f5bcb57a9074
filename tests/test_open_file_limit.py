"""Review224 #5: `serve` under a low open-file limit stopped accepting clients past it (49 of 70 control clients
answered under `ulimit -n 64`) and said nothing, on stderr or in stats. A start now raises the soft limit to the hard
one and says a low one (with the connections it leaves room for); a heartbeat that finds no descriptor free counts
it (stats descriptors_exhausted, /metrics) and says it, rate-limited (engine/service/descriptor_limit.py). A real
`flashtick serve` process started with a soft limit of 48 under a hard one of 64; real clients past it."""

from __future__ import annotations

import os
import resource
import select
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import zmq

from engine.service.client import ControlClient

ROOT = Path(__file__).resolve().parents[1]


def _low_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (48, 64))


def read_until(proc: subprocess.Popen, text: list[str], wanted: str, wait_s: float = 120) -> str:
    """The first line of ``proc``'s stderr holding ``wanted``; the lines read are added to ``text``. (A wait for
    the line, not a timed assertion: the deadline only ends a wait that would never end.)"""
    deadline = time.monotonic() + wait_s
    pending = ""
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            pending += os.read(proc.stderr.fileno(), 65536).decode(errors="replace")
            *lines, pending = pending.split("\n")
            text.extend(lines)
            for line in lines:
                if wanted in line:
                    return line
    raise AssertionError(f"no {wanted!r} on serve's stderr:\n" + "\n".join(text + [pending]))


def test_serve_raises_a_low_open_file_limit_says_it_and_counts_descriptors_exhausted(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text('endpoints: {ingest: "tcp://127.0.0.1:0", answers: "tcp://127.0.0.1:0", '
                      'control: "tcp://127.0.0.1:0", metrics_port: 0}\nlimits: {heartbeat_s: 0.1}\n')
    # a real process (not tests/forked_cli.py's): its open-file limit is set before exec (preexec_fn), and the
    # descriptors it holds are counted
    proc = subprocess.Popen([sys.executable, "-m", "engine.service.cli", "serve", "--config", str(config),
                             "--no-log"], stderr=subprocess.PIPE, preexec_fn=_low_limit,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    text: list[str] = []
    clients: list[zmq.Socket] = []
    try:
        serving = read_until(proc, text, "flashtick serving ")
        endpoints = dict(word.split("=", 1) for word in serving.split()[2:])
        low = [line for line in text if "open-file limit" in line]
        assert len(low) == 1 and low[0].startswith("flashtick: WARNING: the open-file limit is 64 (the hard limit "
                                                   "too): at most "), text  # raised from 48 to the hard 64
        assert "ulimit -n 65536" in low[0] and "LimitNOFILE=65536" in low[0]
        # review261 #6: the figure is the limit less the descriptors the service holds as it starts serving (its
        # sockets, ZeroMQ's own, its files), as configuration.md says, not a constant: 64 - those held, idle here
        room = int(low[0].split("at most ", 1)[1].split()[0])
        assert room == 64 - len(os.listdir(f"/proc/{proc.pid}/fd")), (room, os.listdir(f"/proc/{proc.pid}/fd"))
        context = zmq.Context.instance()
        for _ in range(80):  # past what 64 descriptors hold: libzmq's accept fails with EMFILE for the rest
            sock = context.socket(zmq.DEALER)
            sock.linger = 0
            sock.connect(endpoints["control"])
            clients.append(sock)
        said = read_until(proc, text, "no file descriptor is free")
        assert said.startswith("flashtick: WARNING: no file descriptor is free (this process's open-file limit is "
                               "reached: 64): ZeroMQ cannot accept new connections, so clients beyond it wait "
                               "unanswered (stats descriptors_exhausted counts the heartbeats that found none); "), said
        # review412 #5: the probes and the scrape answer while no descriptor is free (the metrics thread's
        # descriptor table is its own): a liveness probe does not kill a healthy engine, the count can be scraped
        probes = endpoints["metrics"].removesuffix("/metrics")
        with urllib.request.urlopen(probes + "/healthz", timeout=60) as page:
            assert page.status == 200 and b'"live": true' in page.read()
        with urllib.request.urlopen(endpoints["metrics"], timeout=60) as page:
            assert b"\nflashtick_descriptors_exhausted_total " in page.read()
        for sock in clients:
            sock.close(linger=0)
        clients.clear()
        with ControlClient(endpoints["control"], timeout_s=60) as control:  # room again once they are gone
            stats = control.call("stats")["stats"]
        assert stats["descriptors_exhausted"] >= 1, stats
        with urllib.request.urlopen(endpoints["metrics"], timeout=60) as page:
            metrics = page.read().decode()
        line = next(line for line in metrics.splitlines() if line.startswith("flashtick_descriptors_exhausted"))
        assert float(line.split()[-1]) >= 1, line
        assert sum("no file descriptor is free" in line for line in text) == 1  # said once a minute at most
    finally:
        for sock in clients:
            sock.close(linger=0)
        proc.terminate()
        proc.wait(60)
        proc.stderr.close()


def test_the_warning_says_the_hard_limit_is_low_only_when_it_is() -> None:
    """fix286 #4: the low-limit warning said "(the hard limit too)" whatever the hard limit was: a soft limit left
    low under a higher hard one (raising it failed: an unlimited hard limit over a small fs.nr_open) sent a user to
    raise a hard limit already high. Both limits read; a process of its own sets them (resource.setrlimit)."""
    probe = ("import resource\nfrom engine.service.descriptor_limit import low_limit_warning\n"
             "for hard in (128, 64):\n"
             "    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
             "    print(low_limit_warning())\n")
    lines = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, check=True, timeout=120).stdout.splitlines()
    assert [line.split(":", 2)[1] for line in lines] == [
        " the open-file limit is 64 (the hard limit is 128", " the open-file limit is 64 (the hard limit too)"], lines
