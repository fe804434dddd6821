"""A fork server for the built-in PyTorch programs: warm replicas that start once (issue 43, item 6).

A warm replica keeps its program between cells (``workloads.program.ProgramHost``), but each program still
starts a Python interpreter and imports PyTorch. A nine-mode ResNet-18 step primes 26 of them at once, and
those imports (on a host's few cores, together) took 13.8-14.6 s of its wall time. Here one server process
imports PyTorch and the built-in programs once (:data:`PROGRAMS`), and each replica's program is a fork of it:
the fork has PyTorch loaded and runs the program's ``main`` at once.

**CUDA does not survive a fork**, so the server never initialises it: it imports ``torch`` and the program
modules, which touch no device at import (the programs create their device, model and data in ``main``,
after the fork), and it checks ``torch.cuda.is_initialized()`` before every fork (a server that finds CUDA
initialised refuses to fork and says so: the replica then starts its program the usual way). Each child
initialises CUDA itself, in its own process, after the environment of its replica (``CUDA_VISIBLE_DEVICES``,
MPS's pipe and thread share, the protocol's variables) is in place: the driver reads them there.

What a fork keeps of its replica: its argv (``python -m MODULE ARGS``), environment, working directory,
CPU affinity (``os.sched_setaffinity``; PyTorch's thread count follows ``OMP_NUM_THREADS`` when set), and
its stdin, stdout and stderr (the replica's pipe and log, passed over the server's Unix socket with
SCM_RIGHTS). It leads a process group of its own and dies with the server (``PR_SET_PDEATHSIG``:
SIGKILL). The server reports its pid, then its exit status, on the replica's connection; a replica that goes
away (its connection closed) takes its program with it (SIGKILL to the program's group), and a server that
is stopped (SIGTERM: the sweep's end or death) kills every program it forked first.

:class:`ForkedProgram` is the replica's handle: ``pid``, ``stdin``, ``poll``, ``wait``, ``send_signal``, as
``subprocess.Popen`` has them, so ``sharebench.processes.stop`` ends it like any program. :func:`server`
is started by the pool of warm replicas (``sharing.pool.ReplicaPool.prime``) when a sweep's program is one of
:data:`PROGRAMS`; its socket reaches the replicas as :data:`SOCKET_ENV`.

    python -m sharebench.workloads.forkserver SOCKET      # the server (the pool starts it)
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

SOCKET_ENV = "SHAREBENCH_FORKSERVER"  # the server's socket, in a warm replica's environment
PROGRAMS = ("sharebench.workloads.infer", "sharebench.workloads.train")  # forked from the server
PRELOAD = ("torch", *PROGRAMS)
MAX_REQUEST_BYTES = 1 << 20
READY_TIMEOUT_S = 300.0  # the server's imports (PyTorch: seconds; on a busy host, more)
KILL_GRACE_S = 2.0
PR_SET_PDEATHSIG = 1


def module_of(argv: Sequence[str], python: str = sys.executable) -> str | None:
    """The program module ``argv`` runs when the server can fork it (``PYTHON -m MODULE ...``, this
    interpreter, one of :data:`PROGRAMS`); None otherwise."""
    if len(argv) < 3 or argv[1] != "-m" or argv[2] not in PROGRAMS:
        return None
    found = shutil.which(argv[0])  # what the program would run: the same interpreter as ours, or no fork
    return argv[2] if found is not None and os.path.realpath(found) == os.path.realpath(python) else None


# ---------------------------------------------------------------- the replica's side
class ForkedProgram:
    """A program forked by the server, as ``subprocess.Popen`` shows a child: ``pid``, ``stdin`` (text, the
    pipe the replica writes cells to), ``returncode``, ``poll``, ``wait``, ``send_signal``; it leads its own
    process group (``own_group``, as ``sharebench.processes`` reads it)."""

    own_group = True

    def __init__(self, sock: socket.socket, pid: int, stdin: IO[str] | None) -> None:
        self.sock, self.pid, self.stdin = sock, pid, stdin
        self.returncode: int | None = None
        self.buffer = b""

    def _read(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(4096)
        except (TimeoutError, BlockingIOError):
            return
        except OSError:
            data = b""
        if not data:  # the server is gone: so is its fork (PR_SET_PDEATHSIG)
            self.returncode = -signal.SIGKILL if self.returncode is None else self.returncode
            return
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            doc = json.loads(line)
            if "exit" in doc:
                self.returncode = int(doc["exit"])

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout or 0.0)
            self._read(left if left is not None else 1.0)
        with contextlib.suppress(OSError):
            self.sock.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def fork_program(
    socket_path: str, argv: Sequence[str], log: Path, env: dict[str, str], *, stdin_pipe: bool = True
) -> ForkedProgram | None:
    """``argv`` (a program of :data:`PROGRAMS`) forked by the server at ``socket_path``, its output to ``log``,
    ``env`` its environment, a text pipe on its stdin (``stdin_pipe``); None when the server cannot fork it
    (none there, CUDA initialised in it, gone): the caller starts it the usual way."""
    module = module_of(argv)
    if module is None or not socket_path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(30.0)
        sock.connect(socket_path)
    except OSError:
        sock.close()
        return None
    read_end, write_end = os.pipe() if stdin_pipe else (os.open(os.devnull, os.O_RDONLY), -1)
    with log.open("w") as out:
        request: dict[str, Any] = {"module": module, "args": list(argv[3:]), "env": env, "cwd": os.getcwd()}
        if hasattr(os, "sched_getaffinity"):
            request["cpus"] = sorted(os.sched_getaffinity(0))
        try:
            socket.send_fds(sock, [json.dumps(request).encode() + b"\n"], [read_end, out.fileno(), out.fileno()])
            answer = json.loads(sock.makefile("rb").readline() or b"{}")
        except (OSError, ValueError):
            answer = {}
        finally:
            os.close(read_end)
    if "pid" not in answer:
        sock.close()
        if write_end >= 0:
            os.close(write_end)
        return None
    stdin = io.TextIOWrapper(os.fdopen(write_end, "wb"), line_buffering=True) if write_end >= 0 else None
    return ForkedProgram(sock, int(answer["pid"]), stdin)


# ---------------------------------------------------------------- the server
def _prctl_deathsig(sig: int) -> None:
    import ctypes  # noqa: PLC0415 - Linux only, in the fork

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0)


def cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def run_child(request: dict[str, Any], fds: list[int]) -> None:  # pragma: no cover - runs in the fork
    """The fork: its replica's descriptors, environment, folder and CPUs, then the program's ``main``; it
    never returns (``os._exit`` with the program's status)."""
    code = 1
    try:
        os.setpgid(0, 0)
        _prctl_deathsig(signal.SIGKILL)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        os.chdir(request["cwd"])
        if request.get("cpus") and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, request["cpus"])
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
        sys.stdin = io.TextIOWrapper(os.fdopen(0, "rb", closefd=False))
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), write_through=True)
        sys.argv = [request["module"], *request["args"]]
        print(f"forkserver: {request['module']} forked as {os.getpid()}, PyTorch already imported", file=sys.stderr)
        code = int(importlib.import_module(request["module"]).main(list(request["args"])) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the fork reports what ended it, then exits
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


class Server:
    """The fork server's loop: accept a replica's request, fork, report the pid and later the exit status;
    kill the program of a replica that went away; on SIGTERM kill every program, then exit."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.selector = selectors.DefaultSelector()
        self.children: dict[int, socket.socket] = {}  # pid -> its replica's connection
        self.stopping = False

    def serve(self) -> None:
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        tmp = f"{self.path}.{os.getpid()}.tmp"
        self.listener.bind(tmp)
        self.listener.listen(64)
        os.replace(tmp, self.path)  # the socket appears once the server takes requests
        self.selector.register(self.listener, selectors.EVENT_READ)
        try:
            while not self.stopping:
                for key, _ in self.selector.select(timeout=0.05):
                    if key.fileobj is self.listener:
                        self.accept()
                    else:
                        self.gone(key.fileobj)  # type: ignore[arg-type]
                self.reap()
        finally:
            self.kill_all()
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(30.0)
        fds: list[int] = []
        try:
            msg, fds, _flags, _addr = socket.recv_fds(conn, MAX_REQUEST_BYTES, 3)
            while msg and not msg.endswith(b"\n") and len(msg) < MAX_REQUEST_BYTES:  # a stream: the rest
                more = conn.recv(MAX_REQUEST_BYTES)
                if not more:
                    break
                msg += more
            request = json.loads(msg)
        except (OSError, ValueError):
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        if cuda_initialised() or len(fds) != 3:
            conn.sendall(json.dumps({"error": "CUDA is initialised in the fork server"}).encode() + b"\n")
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the fork
            self.listener.close()
            for other in self.children.values():
                other.close()
            conn.close()
            run_child(request, fds)
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # as the fork does: its group exists before the replica can signal it
        for fd in fds:
            os.close(fd)
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        conn.setblocking(False)
        self.children[pid] = conn
        self.selector.register(conn, selectors.EVENT_READ)

    def gone(self, conn: socket.socket) -> None:
        """A replica's connection is readable: it closed (the replica went away), so its program goes too."""
        with contextlib.suppress(BlockingIOError):
            if conn.recv(1):
                return
        pid = next((p for p, c in self.children.items() if c is conn), None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(OSError, ValueError):
                self.selector.unregister(conn)
                conn.setblocking(True)
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()

    def kill_all(self) -> None:
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_GRACE_S
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.01)


def preload() -> list[str]:
    """Import PyTorch and the programs (no device touched); the names that would not import (absent extra)."""
    missing = []
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m sharebench.workloads.forkserver SOCKET", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    missing = preload()
    if cuda_initialised():  # nothing imported may touch the device: forks could not use it
        print("forkserver: CUDA was initialised by an import; not serving", file=sys.stderr)
        return 1
    print(
        f"forkserver: {', '.join(n for n in PRELOAD if n not in missing)} imported in "
        f"{time.perf_counter() - t0:.2f} s" + (f"; not importable: {', '.join(missing)}" if missing else ""),
        file=sys.stderr,
        flush=True,
    )
    Server(args[0]).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
