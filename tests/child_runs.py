"""One child Python interpreter that runs several ``python -c CODE`` runs one after another, each with its own cwd,
its own stdout and stderr (captured at the file descriptors, as a child's would be) and its own exit status.

A run in a fresh child paid the interpreter's start and torch's import (~1.5 s idle, ~6 s on a loaded 2-core CI
machine) only to check a line or an exit status; the tests whose runs need no fresh process (no signals, no "was X
imported before Y") share one. What a run imports stays imported for the runs after it, as in any long process."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

# The child's loop: a JSON request a line on stdin, the JSON reply a line on the stdout it started with (fd 1 itself
# is a run's stdout while the run is going). A run's SystemExit is its exit status as the interpreter makes it one.
_SERVE = r"""
import json, os, sys, traceback
replies = os.fdopen(os.dup(1), "w")
for line in sys.stdin:
    request = json.loads(line)
    before = {name: sys.modules[name] for name in request["blocked"] if name in sys.modules}
    sys.modules.update(dict.fromkeys(request["blocked"]))  # None: `import X` raises, find_spec(X) says absent
    saved = os.dup(1), os.dup(2)
    with open(request["out"], "wb") as out, open(request["err"], "wb") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
    os.chdir(request["cwd"])
    try:
        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
        status = 0
    except SystemExit as e:
        status = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, copy in zip((1, 2), saved):
        os.dup2(copy, fd)
        os.close(copy)
    for name in request["blocked"]:
        if name in before:
            sys.modules[name] = before[name]
        elif sys.modules.get(name, 0) is None:
            del sys.modules[name]
    replies.write(json.dumps(status) + "\n")
    replies.flush()
os._exit(0)  # (nothing is left to flush, and an interpreter that imported torch took seconds to tear down)
"""


class ChildRuns:
    """``with ChildRuns(pythonpath) as child: child.run(code, cwd)``: a ``subprocess.CompletedProcess`` per run
    (text stdout and stderr), from one child interpreter started with PYTHONPATH ``pythonpath``."""

    def __init__(self, pythonpath: list[Path], timeout_s: float = 600.0) -> None:
        self.timeout_s = timeout_s
        self._scratch = tempfile.TemporaryDirectory(prefix="child-runs-")
        self._runs = 0
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "OMP_NUM_THREADS": "1"}
        self._child = subprocess.Popen([sys.executable, "-c", _SERVE], cwd=pythonpath[0], env=env, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, code: str, cwd: Path, blocked: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """``code`` run as ``python -c code`` in ``cwd`` would run it, with ``blocked`` modules unimportable."""
        self._runs += 1
        out, err = (Path(self._scratch.name) / f"{self._runs}.{name}" for name in ("out", "err"))
        request = dict(code=code, cwd=str(cwd), blocked=list(blocked), out=str(out), err=str(err))
        self._child.stdin.write(json.dumps(request) + "\n")
        self._child.stdin.flush()
        ready, _, _ = select.select([self._child.stdout], [], [], self.timeout_s)
        reply = self._child.stdout.readline() if ready else ""
        if not reply:  # (a hang, or the child died: a run that killed its interpreter is no run to report)
            said = err.read_text(errors="replace")[-3000:] if err.exists() else ""
            self._child.kill()
            self.close()
            raise AssertionError(f"the child interpreter gave no exit status for {code!r} (exit "
                                 f"{self._child.returncode}); its stderr: {said}")
        return subprocess.CompletedProcess(code, json.loads(reply), out.read_text(), err.read_text())

    def close(self) -> None:
        if self._child.poll() is None:
            try:
                self._child.stdin.close()  # (its loop ends at the end of its stdin)
                self._child.wait(60)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self._child.kill()
                self._child.wait()
        self._child.stdout.close()
        self._scratch.cleanup()

    def __enter__(self) -> ChildRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
