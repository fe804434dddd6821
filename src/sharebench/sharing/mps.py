"""A private CUDA MPS control daemon for one cell.

NVIDIA MPS: a control daemon (``nvidia-cuda-mps-control -d``) listens in
``CUDA_MPS_PIPE_DIRECTORY`` and logs to ``CUDA_MPS_LOG_DIRECTORY``; a CUDA
process whose environment names the same pipe folder becomes a client of the
MPS server the daemon starts on first use. ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``
in a client's environment caps the SMs that client may use (Volta and newer).
The daemon is stopped with ``echo quit | nvidia-cuda-mps-control`` (same
environment), always: on success, on error, on Ctrl-C and on SIGTERM/SIGHUP
(turned into KeyboardInterrupt while the daemon runs), and at interpreter exit
as a last resort.

sharebench never touches a system-wide MPS daemon: its pipe and log folders are
fresh temporary folders, so it neither uses nor stops anyone else's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psutil

from sharebench.devices import DeviceInfo, as_device
from sharebench.errors import Stopped, UserError
from sharebench.sharing.orphans import stop_orphans, write_owner

CONTROL = "nvidia-cuda-mps-control"
_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


def is_nvidia_gpu(device: DeviceInfo | dict[str, Any] | None) -> bool:
    """A CUDA device, or an NVIDIA GPU through NVIDIA's OpenCL (which runs on the CUDA driver; whether its
    contexts really join the MPS server is checked for every cell, see MpsDaemon.clients)."""
    dev = as_device(device)
    if dev.backend == "cuda":
        return True
    text = f"{dev.platform} {dev.name}".lower()
    return dev.backend == "opencl" and dev.kind == "gpu" and "nvidia" in text


def mps_client_problem(servers: dict[int, list[int]], pids: list[int]) -> str:
    """'' if every replica pid is a client of an MPS server of ours, else why not (one line)."""
    if not servers:
        return "no MPS server was started: the replicas did not connect to MPS"
    joined = {c for cs in servers.values() for c in cs}
    missing = [p for p in pids if p not in joined]
    if missing:
        return (
            f"replica process(es) {missing} are not clients of the MPS server {sorted(servers)} "
            f"(clients: {sorted(joined)}): they did not run under MPS"
        )
    return ""


def exec_client_check(
    check: Callable[[list[int]], str] | None, timing: str | None, ready_files: Sequence[Path] = ()
) -> Callable[[list[int]], str] | None:
    """The MPS check for exec replicas: each replica's program must be a client. A replica's programs are
    its descendants and the process that wrote its ready file (``ready_files[i]``, the protocol's ready file
    of replica ``i``: ``PID TIME``): a program forked by the fork server (``workloads.forkserver``) is the
    server's child, not the replica's. None under process timing, where the program starts only at the
    barrier instant."""
    if check is None or timing == "process":
        return None

    def check_programs(pids: list[int]) -> str:
        problems = []
        for i, pid in enumerate(pids):
            try:
                kids = [c.pid for c in psutil.Process(pid).children(recursive=True)]
            except psutil.Error:
                kids = []
            writer = ready_pid(ready_files[i]) if i < len(ready_files) else None
            programs = [*kids, *([writer] if writer is not None and writer not in kids else [])]
            # a replica passes when one of its programs' processes is a client
            if not programs or all(check([k]) for k in programs):
                problems.append(f"no process started by replica process {pid} ({programs}) is an MPS client")
        return "; ".join(problems) + (": they did not run under MPS" if problems else "")

    return check_programs


def ready_pid(path: Path) -> int | None:
    """The pid a program wrote into its ready file (``PID TIME``, ``sharebench.workloads.protocol.ready``);
    None when the file is absent or names none (a program that only touched it)."""
    try:
        first = path.read_text(errors="replace").split()[:1]
    except OSError:
        return None
    return int(first[0]) if first and first[0].isdigit() else None


def check_mps_available(
    device: DeviceInfo | dict[str, Any] | None, mode_label: str = "mps", control: str = CONTROL
) -> str:
    """The control program's path, or a one-line UserError saying why MPS cannot run here."""
    dev = as_device(device)
    backend, spec, name = dev.backend, dev.spec, dev.name
    if not is_nvidia_gpu(device):
        raise UserError(
            f"{mode_label} needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is "
            f"{spec or backend} ({name}): MPS exists only on NVIDIA GPUs"
        )
    path = shutil.which(control)
    if not path:
        raise UserError(f"{mode_label} needs {control} (NVIDIA driver utilities) on the PATH; it was not found")
    return path


class MpsDaemon:
    """Context manager: a private MPS control daemon, always stopped on the way out.

    >>> with MpsDaemon(device) as mps:                         # doctest: +SKIP
    ...     env = mps.client_env(thread_pct=50)                # give to each replica process
    """

    def __init__(
        self,
        device: Any = None,
        *,
        control: str = CONTROL,
        keep_logs_in: Path | None = None,
        start_timeout_s: float = 20.0,
        stop_timeout_s: float = 60.0,
        mode_label: str = "mps",
    ):
        self.device = device
        self.control = control
        self.mode_label = mode_label
        self.keep_logs_in = Path(keep_logs_in) if keep_logs_in else None
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.root: Path | None = None
        self.pipe_dir: Path | None = None
        self.log_dir: Path | None = None
        self.daemon_pids: list[int] = []
        self.running = False
        self._keep_dirs = False
        self._old_handlers: dict[int, Any] = {}
        self._lock = threading.Lock()

    # -- environment ---------------------------------------------------------------

    def daemon_env(self) -> dict[str, str]:
        if self.pipe_dir is None or self.log_dir is None:
            raise RuntimeError("MPS daemon folders not created yet")
        env = dict(os.environ)
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(self.pipe_dir)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(self.log_dir)
        return env

    def client_env(self, thread_pct: int | None = None) -> dict[str, str]:
        """Variables a replica needs to be a client of this daemon's server."""
        if self.pipe_dir is None or self.log_dir is None:
            raise RuntimeError("MPS daemon folders not created yet")
        env = {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir)}
        if thread_pct is not None:
            if not 1 <= int(thread_pct) <= 100:
                raise UserError(f"MPS active-thread percentage {thread_pct!r} is out of range; allowed: 1..100")
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(int(thread_pct))
        return env

    # -- lifecycle -----------------------------------------------------------------

    def make_dirs(self) -> None:
        # short paths: the pipe folder holds UNIX sockets (path length limit ~108 bytes)
        self.root = Path(tempfile.mkdtemp(prefix="sbmps-"))
        self.pipe_dir = self.root / "pipe"
        self.log_dir = self.root / "log"
        self.pipe_dir.mkdir()
        self.log_dir.mkdir()
        write_owner(self.root)  # a daemon a SIGKILLed sweep leaves is found by its dead owner (orphans)

    def start(self) -> MpsDaemon:
        path = check_mps_available(self.device, self.mode_label, self.control)
        for line in stop_orphans(control=self.control):  # what a killed sweep left on this machine
            print(f"sharebench: {line}", file=sys.stderr)
        self.make_dirs()
        try:
            self.install_signal_handlers()
            atexit.register(self.stop)
            out = subprocess.run(
                [path, "-d"], env=self.daemon_env(), capture_output=True, text=True, timeout=self.start_timeout_s
            )
            if out.returncode != 0:
                raise UserError(
                    f"{self.control} -d failed (exit {out.returncode}): "
                    f"{(out.stderr or out.stdout).strip() or 'no message'}; see {self.log_dir}"
                )
            self.running = True
            self._wait_ready(path)
            self.daemon_pids = self._find_daemon_pids()
        except BaseException:
            self.stop()
            raise
        return self

    def _query(self, path: str, command: str, timeout_s: float = 10.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            [path], input=command + "\n", env=self.daemon_env(), capture_output=True, text=True, timeout=timeout_s
        )

    def _wait_ready(self, path: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        last = ""
        while time.monotonic() < deadline:
            try:
                q = self._query(path, "get_server_list", timeout_s=5)
                if q.returncode == 0:
                    return
                last = (q.stderr or q.stdout).strip()
            except subprocess.TimeoutExpired:
                last = "no answer"
            time.sleep(0.2)
        raise UserError(
            f"MPS control daemon did not answer within {self.start_timeout_s:.0f} s ({last}); "
            f"see {self.log_dir}/control.log"
        )

    def clients(self) -> dict[int, list[int]]:
        """{MPS server pid: [client pids]} as the control daemon reports them (empty: no server started)."""
        path = shutil.which(self.control) or self.control
        out: dict[int, list[int]] = {}
        servers = self._query(path, "get_server_list")
        for tok in servers.stdout.split():
            if tok.isdigit():
                q = self._query(path, f"get_client_list {tok}")
                out[int(tok)] = [int(t) for t in q.stdout.split() if t.isdigit()]
        return out

    def check_clients(self, pids: list[int]) -> str:
        """'' if every pid is a client of this daemon's MPS server, else why not (one line)."""
        try:
            servers = self.clients()
        except (OSError, subprocess.SubprocessError) as exc:
            return f"could not ask the MPS control daemon for its clients ({exc})"
        return mps_client_problem(servers, pids)

    def _find_daemon_pids(self) -> list[int]:
        """Our daemon's process: the control program whose environment names our pipe folder."""
        pids = []
        for p in psutil.process_iter(["name"]):
            try:
                if (
                    p.info["name"]
                    and p.info["name"].startswith("nvidia-cuda-mps")
                    and p.environ().get("CUDA_MPS_PIPE_DIRECTORY") == str(self.pipe_dir)
                ):
                    pids.append(p.pid)
            except (psutil.Error, OSError):
                continue
        return pids

    def stop(self) -> None:
        """``echo quit | nvidia-cuda-mps-control``; idempotent; waits for the daemon to exit."""
        with self._lock:
            try:
                if self.running:
                    self.running = False
                    path = shutil.which(self.control) or self.control
                    try:
                        self._query(path, "quit", timeout_s=self.stop_timeout_s)
                    except (OSError, subprocess.SubprocessError) as exc:
                        self._keep_dirs = True  # the daemon may live on: keep its pipe folder reachable
                        print(
                            f"sharebench: warning: could not stop the MPS daemon ({exc}); stop it with "
                            f"CUDA_MPS_PIPE_DIRECTORY={self.pipe_dir} {self.control} <<< quit",
                            file=sys.stderr,
                        )
                    self._wait_gone()
            finally:
                self._restore_signal_handlers()
                try:
                    atexit.unregister(self.stop)
                except Exception:  # pragma: no cover  # noqa: BLE001 - interpreter shutting down
                    pass
                self._cleanup_dirs()

    def _wait_gone(self) -> None:
        if not self.daemon_pids:
            return
        procs = []
        for pid in self.daemon_pids:
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:  # already gone
                continue
        _gone, alive_procs = psutil.wait_procs(procs, timeout=self.stop_timeout_s)
        if alive_procs:
            print(
                f"sharebench: warning: MPS control daemon pid {[p.pid for p in alive_procs]} still running "
                f"{self.stop_timeout_s:.0f} s after quit",
                file=sys.stderr,
            )

    def _cleanup_dirs(self) -> None:
        if self.root is None:
            return
        if self.keep_logs_in is not None and self.log_dir is not None and self.log_dir.exists():
            try:
                self.keep_logs_in.mkdir(parents=True, exist_ok=True)
                for f in self.log_dir.iterdir():
                    if f.is_file():
                        shutil.copy2(f, self.keep_logs_in / f"mps-{f.name}")
            except OSError:
                pass
        if not self._keep_dirs:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    # -- signals -------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """Make SIGTERM and SIGHUP raise KeyboardInterrupt, so that a ``with`` block around the daemon
        unwinds and :meth:`stop` still sends quit; :meth:`stop` puts the previous handlers back.
        :meth:`start` calls it; main thread only (elsewhere it does nothing)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, _frame: object) -> None:
            raise Stopped(signum)  # a KeyboardInterrupt: the sweep exits 128 + signum

        for sig in _SIGNALS:
            try:
                self._old_handlers[sig] = signal.signal(sig, handler)
            except (ValueError, OSError):  # pragma: no cover
                pass

    def _restore_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError, TypeError):  # pragma: no cover
                pass
        self._old_handlers.clear()

    def __enter__(self) -> MpsDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
