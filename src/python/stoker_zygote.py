# Stoker's warm interpreter (a "zygote"): docs/warm-starts.md,
# docs/decisions/0026-warm-starts.md, docs/decisions/0035-warm-interpreters-per-user.md.
#
# stoker-run starts one per (submitting user, interpreter, preload list,
# trainer account), as that account (never as root for another account),
# and leaves it running for later trials:
#
#   python3 stoker_zygote.py --socket PATH --listen-fd 4 --dir-fd 5 --client-uid UID
#                            --preload torch,numpy --idle SECONDS --ready-fd 3
#
# It makes itself non-dumpable first (so that no other process of its account
# can trace it or read its memory), imports the preload modules (before
# anything of its own, so that what it imports for itself can be told apart
# and dropped in the children), listens on the Unix socket stoker-run bound
# at PATH and passed as --listen-fd (the path is in stoker-run's directory,
# which this account cannot even enter), writes one JSON line to the ready
# fd and closes it. --dir-fd is that directory (O_PATH): once it is removed
# (a deleted data dir) the zygote exits. SIGTERM (stoker-run ending an idle
# zygote to make room for another): it stops accepting and exits once its
# children have ended.
#
# Protocol, one connection per trainer (stoker-run is the only client; the
# peer must have the uid --client-uid, SO_PEERCRED):
#   client -> zygote  a 4-byte big-endian length and that many bytes of a
#                     JSON header {"fds": [NAME...], "home": PATH|null}, with
#                     the fds named in "fds" (stdin, out, go, and userns/mntns
#                     when the trainer is isolated) passed by SCM_RIGHTS; then
#                     a 4-byte length and a JSON body {"mode": "module"|
#                     "script", "target", "args", "python", "flag_u", "env",
#                     "cwd", "run_as": {"uid", "gid", "umask"}}. The zygote
#                     never decodes the body: it reads it into a buffer that it
#                     zeroes right after the fork; only the child parses it.
#   zygote -> client  one line: {"pid": N, "preloaded": [...], "skipped":
#                     {...}} once the child is forked, or {"error": TEXT} when
#                     none was (the client may then start the trainer cold).
#   client -> child   one byte "g" on the go pipe: only then does the child
#                     run anything of the trainer's. EOF instead: it exits
#                     without running anything (so a trainer never starts
#                     twice: the client falls back to a cold start only when
#                     it never wrote "g").
#   zygote -> client  one line {"status": WAIT_STATUS} when the child ended.
#                     If the client's connection closes first, the child's
#                     process group is killed (like a trainer whose
#                     supervisor died).
#
# The child becomes exactly what a cold `python3 -m mod args` (or
# `python3 script.py args`) would have been: own session and process group,
# the parent-death signal, the isolated view (by joining the namespaces the
# trainer's account made: one implementation of isolation, in C++), umask,
# cwd, argv, environment, fds 0-2, fresh sys.stdout/stderr, default signal
# handlers, sys.path as a fresh run computes it, and sys.modules of a fresh
# interpreter plus the preloaded modules (everything this file imported for
# itself is dropped). CUDA is never initialised here: a request finding
# torch.cuda initialised is refused.
#
# What wiping can and cannot do in Python: the body's bytes exist once in
# this process, in a bytearray filled by recv_into and zeroed after the fork.
# The zygote makes no str, bytes or dict of it (json.loads would: freed
# objects keep their bytes until reused, and strs may be interned), so no
# later child inherits an earlier trainer's argv or environment. The header
# (fd names, the account's home) is not secret. Kernel socket buffers are
# not this process's memory.
import sys


def _not_dumpable():
    """PR_SET_DUMPABLE 0 through ctypes, leaving no trace of ctypes in
    sys.modules (a child must see what a fresh interpreter has)."""
    before = set(sys.modules)
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    for name in set(sys.modules) - before:
        del sys.modules[name]


_not_dumpable()
_FRESH_MODULES = set(sys.modules)
_BASE_PATH = list(sys.path[1:])  # without path0 (this file's directory)


def _arg(name, default=None):
    argv = sys.argv
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
    return default


_PRELOADED = []
_SKIPPED = {}
for _name in [m for m in (_arg("--preload", "") or "").split(",") if m]:
    try:
        __import__(_name)
        _PRELOADED.append(_name)
    except BaseException as _e:  # noqa: BLE001 - any failure means "not preloaded"
        _SKIPPED[_name] = "%s: %s" % (type(_e).__name__, _e)
_PRELOAD_MODULES = set(sys.modules) - _FRESH_MODULES

# Our own imports, after the preload: dropped from the children's sys.modules
# unless the preload imported them too.
import atexit  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import selectors  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_MM = 35
_PR_SET_MM_MAP = 14
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_KEEP_ALIVE = []  # buffers /proc/self/cmdline and environ point into
_ZYGOTE_FDS = []  # the zygote's own fds that no child keeps


def _log(msg):
    try:
        os.write(2, ("stoker-zygote[%d]: %s\n" % (os.getpid(), msg)).encode())
    except OSError:
        pass


def _cuda_initialised():
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # noqa: BLE001
        return False


def _prctl(option, arg2, arg3=0):
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                       ctypes.c_ulong(0), ctypes.c_ulong(0))


def _prctl4(option, arg2, arg3, arg4):
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                       ctypes.c_ulong(arg4), ctypes.c_ulong(0))


def _show_as(argv, env):
    """Points /proc/self/cmdline and /proc/self/environ at the trainer's argv
    and environment (what a cold exec would show), so that `ps`, the
    telemetry sampler and the STOKER_REPLICA clean-up see the trainer as it
    is. PR_SET_MM_MAP (the one-shot form, which needs no capability): every
    other field of the map as it is now. Best effort: False when refused."""
    bufs = []
    for items in ([a.encode("utf-8", "surrogateescape") for a in argv],
                  [("%s=%s" % kv).encode("utf-8", "surrogateescape")
                   for kv in sorted(env.items())]):
        data = b"".join(i + b"\0" for i in items)
        buf = ctypes.create_string_buffer(data, len(data) + 1)
        bufs.append((ctypes.addressof(buf), ctypes.addressof(buf) + len(data)))
        _KEEP_ALIVE.append(buf)
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        field = lambda n: int(fields[n - 3])  # noqa: E731 - /proc/PID/stat field numbers
        _libc.sbrk.restype = ctypes.c_void_p
        mm = struct.pack("=11QQII", field(26), field(27), field(45), field(46), field(47),
                         _libc.sbrk(0) or field(47), field(28), bufs[0][0], bufs[0][1],
                         bufs[1][0], bufs[1][1], 0, 0, 0xFFFFFFFF)
    except (OSError, ValueError, IndexError):
        return False
    mm_buf = ctypes.create_string_buffer(mm, len(mm))
    return _prctl4(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.addressof(mm_buf), len(mm)) == 0


def _drop_capabilities():
    """What exec would do for a trainer whose uid is not 0: no capability
    left, also none in the user namespace it joined (so it cannot undo the
    isolated view's mounts)."""
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    _prctl4(47, 4, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        os._exit(127)


def _fail(out_fd, text):
    try:
        os.write(out_fd, ("stoker-run: %s\n" % text).encode())
    finally:
        os._exit(127)


def _new_stdio(fd, like, unbuffered, write):
    raw = io.FileIO(fd, "w" if write else "r", closefd=False)
    if not write:
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=like.encoding, errors=like.errors)
    buf = raw if unbuffered else io.BufferedWriter(raw)
    return io.TextIOWrapper(buf, encoding=like.encoding, errors=like.errors,
                            line_buffering=like.line_buffering,
                            write_through=unbuffered or like.write_through)


def _strip_own_frames(tb):
    me = __file__
    while tb is not None and tb.tb_frame.f_code.co_filename == me:
        tb = tb.tb_next
    return tb


def _child(body, fds, zygote_pid, close_zygote):
    """In the forked child. Never returns: ends in os._exit, through _finish
    once the trainer's code has run. `body`: the request's buffer, this
    process's own copy (its parent zeroes its)."""
    # The zygote's objects (the preloaded modules: hundreds of thousands of
    # them with torch) go to the collector's permanent generation, so that
    # neither the trainer's collections nor its exit walk them: a walk
    # writes to every object's header and so copies every page the fork
    # shared (bench/RESULTS.md "Trial throughput").
    gc.freeze()
    os.setsid()
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote_pid:
        os._exit(1)  # the zygote died before prctl
    signal.set_wakeup_fd(-1)
    close_zygote()
    for sig in range(1, signal.NSIG):
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    out_fd = fds["out"]

    # Nothing of the trainer's runs before the go byte.
    try:
        go = os.read(fds["go"], 1)
    except OSError:
        go = b""
    if go != b"g":
        os._exit(0)
    os.close(fds["go"])

    try:
        req = json.loads(body)
    except ValueError as e:
        _fail(out_fd, "the warm start request is not JSON: %s" % e)
    del body
    env = req["env"]
    argv = [req["python"]] + (["-u"] if req.get("flag_u") else []) + (
        ["-m", req["target"]] if req["mode"] == "module" else [req["target"]]) + req["args"]
    _show_as(argv, env)

    for name, nstype in (("userns", _CLONE_NEWUSER), ("mntns", _CLONE_NEWNS)):
        if name in fds:
            if _libc.setns(fds[name], nstype) != 0:
                _fail(out_fd, "cannot enter the trainer's isolated view (setns %s): %s" %
                      (name, os.strerror(ctypes.get_errno())))
            os.close(fds[name])
    # The zygote already runs as the trainer's account (stoker-run started it
    # so): check, as the cold path checks after its setuid.
    run_as = req["run_as"]
    if os.getresuid() != (run_as["uid"],) * 3 or os.getresgid() != (run_as["gid"],) * 3:
        _fail(out_fd, "the warm interpreter runs as uid %d gid %d, not the trainer's uid %d "
              "gid %d" % (os.geteuid(), os.getegid(), run_as["uid"], run_as["gid"]))
    os.umask(run_as.get("umask", 0o22))
    # Traceable and readable in /proc by its own account again, as after an
    # exec: only now, inside its view (the zygote itself stays non-dumpable).
    _prctl(_PR_SET_DUMPABLE, 1)
    if os.geteuid() != 0:
        _drop_capabilities()
    try:
        os.chdir(req["cwd"])
    except OSError as e:
        _fail(out_fd, "cannot enter %s: %s" % (req["cwd"], e.strerror))
    os.dup2(fds["stdin"], 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    for fd in {fds["stdin"], out_fd} - {0, 1, 2}:
        os.close(fd)

    # The interpreter state of a fresh run.
    os.environ.clear()
    os.environ.update(env)
    for name in list(sys.modules):
        if name not in _FRESH_MODULES and name not in _PRELOAD_MODULES:
            del sys.modules[name]
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = sys.modules["builtins"]
    sys.modules["__main__"] = main
    if "__mp_main__" in sys.modules:  # multiprocessing's alias of __main__, set at its import
        sys.modules["__mp_main__"] = main
    target = req["target"]
    pythonpath = env.get("PYTHONPATH", "")
    path0 = os.getcwd() if req["mode"] == "module" else os.path.dirname(os.path.realpath(target))
    sys.path[:] = [path0] + ([os.path.abspath(p) for p in pythonpath.split(":")]
                             if pythonpath else []) + _BASE_PATH
    sys.path_importer_cache.clear()
    if env.get("PYTHONDONTWRITEBYTECODE"):
        sys.dont_write_bytecode = True
    unbuffered = bool(req.get("flag_u") or env.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = _new_stdio(0, sys.__stdin__, False, False)
    sys.stdout = sys.__stdout__ = _new_stdio(1, sys.__stdout__, unbuffered, True)
    sys.stderr = sys.__stderr__ = _new_stdio(2, sys.__stderr__, unbuffered, True)
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()  # numpy seeds its global state from the OS at import: so does a fresh run

    at_start = set(sys.modules)
    status = 0
    try:
        if req["mode"] == "module":
            import runpy
            sys.argv = ["-m"] + req["args"]
            runpy._run_module_as_main(target, alter_argv=True)
        else:
            sys.argv = [target] + req["args"]
            with open(target, "rb") as f:
                source = f.read()
            main.__dict__.update(__file__=target, __cached__=None)
            code = compile(source, target, "exec", dont_inherit=True)
            del source
            exec(code, main.__dict__)
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException as e:  # noqa: BLE001 - as the interpreter's top level
        tb = _strip_own_frames(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        del tb  # its frames hold the trainer's locals, released before _finish
        if isinstance(e, KeyboardInterrupt):
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        status = 1
    _finish(status, at_start)


def _exit_status(code):
    """The exit status of `raise SystemExit(code)` as the interpreter computes
    it: None is 0, an int is itself (the low 8 bits reach the parent), and
    anything else is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:  # noqa: BLE001 - as the interpreter: nothing left to tell
        pass
    return 1


def _finish(status, at_start):
    """Ends the trainer with `status` the way the interpreter's own exit
    would, without tearing down the preloaded modules (their teardown touches
    every object they made, copying the pages the fork shared: ~300 ms with
    torch, measured in bench/RESULTS.md). What a trainer can see of an exit
    is kept, in the interpreter's order: non-daemon threads are joined, atexit
    functions run, the globals of __main__ and of every module the trainer
    imported are released (newest module first, so their objects' __del__
    run and files they left open are closed), the trainer's own garbage is
    collected, files still open are flushed, stdout and stderr are flushed
    (a failing stdout flush makes a status of 0 into 120, as the interpreter
    does). `at_start`: the names in sys.modules when the trainer's code
    began. Never returns."""
    threading = sys.modules.get("threading")  # the trainer's, as the interpreter looks it up
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:  # noqa: BLE001 - printed, as the interpreter does
            sys.excepthook(*sys.exc_info())
    atexit._run_exitfuncs()
    for name in reversed([n for n in sys.modules if n not in at_start or n == "__main__"]):
        module = sys.modules.get(name)
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict):
            for key in [k for k in namespace if k != "__builtins__"]:
                namespace[key] = None
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase) and obj not in (sys.stdout, sys.stderr):
            try:
                if not obj.closed:
                    obj.flush()
            except Exception:  # noqa: BLE001 - as a closing file at exit: ignored
                pass
    for stream in (sys.stderr, sys.stdout):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            if stream is sys.stdout and status == 0:
                status = 120
    os._exit(status)


def _user_site(home):
    """The user site-packages directory a fresh run would add, if any (`home`:
    the trainer's HOME; None when it has none or sets PYTHONNOUSERSITE)."""
    if not home:
        return None
    path = os.path.join(home, ".local", "lib", "python%d.%d" % sys.version_info[:2],
                        "site-packages")
    return path if os.path.isdir(path) else None


def _recv_exact(conn, n):
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise ValueError("request cut short")
        data += more
    return data


def _read_request(conn):
    """(header, fds, body): the header decoded, the body a bytearray never
    decoded here (the caller zeroes it)."""
    conn.settimeout(10)
    data, fds, _, _ = socket.recv_fds(conn, 4, 8)
    try:
        data += _recv_exact(conn, 4 - len(data))
        (n,) = struct.unpack(">I", data)
        if n > (1 << 20):
            raise ValueError("header too large")
        header = json.loads(_recv_exact(conn, n))
        names = header.get("fds", []) if isinstance(header, dict) else None
        if names is None or len(names) != len(fds):
            raise ValueError("%d fds for %s" % (len(fds), names))
        (m,) = struct.unpack(">I", _recv_exact(conn, 4))
        if m > (64 << 20):
            raise ValueError("request too large")
    except (OSError, ValueError):
        for fd in fds:
            os.close(fd)
        raise
    body = bytearray(m)
    view = memoryview(body)
    try:
        got = 0
        while got < m:
            k = conn.recv_into(view[got:], m - got)
            if not k:
                raise ValueError("request cut short")
            got += k
    except (OSError, ValueError):
        view.release()
        _wipe(body)
        for fd in fds:
            os.close(fd)
        raise
    view.release()
    return header, dict(zip(names, fds)), body


def _wipe(buf):
    """Zeroes a bytearray in place (no copy of it is made)."""
    if len(buf):
        ctypes.memset((ctypes.c_char * len(buf)).from_buffer(buf), 0, len(buf))


def _send(conn, obj):
    try:
        conn.sendall((json.dumps(obj) + "\n").encode())
        return True
    except OSError:
        return False


def main():
    sock_path = _arg("--socket")
    idle = float(_arg("--idle", "600"))
    ready_fd = int(_arg("--ready-fd", "-1"))
    dir_fd = int(_arg("--dir-fd", "-1"))
    if dir_fd >= 0:
        os.set_inheritable(dir_fd, False)
        _ZYGOTE_FDS.append(dir_fd)
    client_uid = int(_arg("--client-uid", "0"))
    zygote_pid = os.getpid()
    # Bound by stoker-run; listening here, so that its SO_PEERCRED is ours.
    listener = socket.socket(fileno=int(_arg("--listen-fd")))
    listener.listen(64)
    listener.setblocking(False)
    _log("ready at %s as uid %d: preloaded %s%s" % (
        sock_path, os.geteuid(), ", ".join(_PRELOADED) or "nothing",
        "".join("; %s not: %s" % kv for kv in _SKIPPED.items())))
    if ready_fd >= 0:
        try:
            os.write(ready_fd, (json.dumps({"ready": True, "pid": zygote_pid,
                                            "preloaded": _PRELOADED,
                                            "skipped": _SKIPPED}) + "\n").encode())
        except OSError:
            pass
        os.close(ready_fd)

    def dir_removed():
        try:
            return dir_fd >= 0 and os.fstat(dir_fd).st_nlink == 0
        except OSError:
            return True

    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    ending = []
    signal.signal(signal.SIGTERM, lambda *_: ending.append(True))
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    children = {}  # pid -> conn
    conns = {}  # conn fd -> pid
    last_busy = time.monotonic()

    def end_child(pid, status):
        conn = children.pop(pid, None)
        if conn is None:
            return
        conns.pop(conn.fileno(), None)
        try:
            sel.unregister(conn)
        except (KeyError, ValueError):
            pass  # its client went away before (EOF, below)
        _send(conn, {"status": status})
        conn.close()

    while True:
        if ending and listener.fileno() >= 0:  # no new requests; the running ones finish
            sel.unregister(listener)
            listener.close()
        gone = dir_removed()
        if children:
            last_busy = time.monotonic()
        elif ending or gone or time.monotonic() - last_busy >= idle:
            _log("exiting: %s" % ("asked to (SIGTERM)" if ending else
                                  "its directory is gone" if gone else "idle for %.0fs" % idle))
            return
        for key, _ in sel.select(timeout=max(0.5, min(idle, 2.0))):
            what = key.data
            if what == "wake":
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                for pid in list(children):
                    try:
                        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                    except ChildProcessError:
                        info = None
                    if info is None:
                        continue
                    try:  # the rest of its group, while its zombie pins the group id
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    _, status = os.waitpid(pid, 0)
                    end_child(pid, status)
                while True:  # anything else (none expected)
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    end_child(pid, status)
            elif what == "accept":
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                last_busy = time.monotonic()
                try:
                    _serve(conn, zygote_pid, client_uid, listener, wake_r, wake_w, conns,
                           children, sel)
                except Exception as e:  # noqa: BLE001 - one bad request must not end the others
                    _log("serving a request failed: %s: %s" % (type(e).__name__, e))
                    conn.close()
            else:  # a client's connection: EOF means its supervisor is gone
                conn = key.fileobj
                try:
                    data = conn.recv(64)
                except OSError:
                    data = b""
                if not data:
                    pid = conns.get(conn.fileno())
                    if pid is not None:
                        _log("stoker-run of child %d went away: killing its process group" % pid)
                        for target in (lambda: os.killpg(pid, signal.SIGKILL),
                                       lambda: os.kill(pid, signal.SIGKILL)):
                            try:
                                target()
                            except OSError:
                                pass
                    sel.unregister(conn)
                    conns.pop(conn.fileno(), None)


def _serve(conn, zygote_pid, client_uid, listener, wake_r, wake_w, conns, children, sel):
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, peer_uid, _ = struct.unpack("3i", creds)
    if peer_uid != client_uid:
        _log("refused a connection from uid %d" % peer_uid)
        conn.close()
        return
    try:
        header, fds, body = _read_request(conn)
    except (OSError, ValueError) as e:
        _send(conn, {"error": "bad request: %s" % e})
        conn.close()
        return
    try:
        _fork_child(conn, header, fds, body, zygote_pid, listener, wake_r, wake_w, conns,
                    children, sel)
    finally:
        _wipe(body)  # in this process: the child has its own copy
        del body


def _fork_child(conn, header, fds, body, zygote_pid, listener, wake_r, wake_w, conns, children,
                sel):
    missing = [n for n in ("stdin", "out", "go") if n not in fds]
    if missing:
        err = "bad request: missing %s" % missing
    elif _user_site(header.get("home")):
        err = ("the trainer's account has a user site-packages directory %s, which a fresh run "
               "puts on sys.path" % _user_site(header.get("home")))
    elif _cuda_initialised():
        err = "CUDA was initialised in the warm interpreter by its preload"
    else:
        err = None
    if err:
        _send(conn, {"error": err})
        for fd in fds.values():
            os.close(fd)
        conn.close()
        return
    conn.setblocking(True)

    def close_zygote():
        # Through their objects, so that nothing closes the numbers again
        # later (at exit), when the trainer may have reused them.
        for c in [conn] + [c for c in children.values() if c is not None]:
            c.close()
        sel.close()
        listener.close()
        os.close(wake_r)
        os.close(wake_w)
        for fd in _ZYGOTE_FDS:
            os.close(fd)

    pid = os.fork()
    if pid == 0:
        _child(body, fds, zygote_pid, close_zygote)
        os._exit(127)  # not reached
    for fd in fds.values():
        os.close(fd)
    if not _send(conn, {"pid": pid, "preloaded": _PRELOADED, "skipped": _SKIPPED}):
        # The client is gone before it could say go: the child exits on EOF.
        conn.close()
        children[pid] = None
        return
    conn.setblocking(False)
    children[pid] = conn
    conns[conn.fileno()] = pid
    sel.register(conn, selectors.EVENT_READ, "conn")


if __name__ == "__main__":
    main()
