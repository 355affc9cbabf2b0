"""Checkpoint files in one directory: written atomically, checked on read,
the newest two kept. No torch here: a checkpoint's payload is opaque bytes
(task.py puts a torch.save() archive in it).

Layout of the directory (AIP_CHECKPOINT_DIR):

  ckpt-00000040.ckpt   the state after step 40
  ckpt-00000050.ckpt   the state after step 50 (the newest)
  .ckpt-00000060.ckpt.tmp-1234   a write in progress (or one that a killed
                       attempt left; removed by clean_partial_writes)

A checkpoint file is one header line and the payload:

  STOKER-CKPT 1 step=50 bytes=123456 sha256=<hex of the payload>\\n<payload>

The header lets a reader tell a whole file from a torn one (a truncated file,
or one whose bytes changed) without unpacking it: load_newest skips a file
whose length or digest does not match and tries the next older one.

Contract (what makes a crash at any instant safe):
  - save() writes to a temp file in the same directory, fsyncs it, renames it
    over the final name and fsyncs the directory. A reader sees the old file,
    or the new one whole, never a mix; after save() returns the checkpoint
    survives a power loss (on a file system that honours fsync).
  - Only one process writes a directory at a time (one attempt of a job runs
    at a time; in a multi-replica job only the chief should checkpoint).
  - Errors are OSError from the file system, raised to the caller with the
    path in them; reading never raises for a bad file, it reports it.
"""

import hashlib
import os
import re

MAGIC = b'STOKER-CKPT 1 '
KEEP = 2  # the newest checkpoint and one before it, in case the newest is torn
_NAME = re.compile(r'^ckpt-(\d{8,})\.ckpt$')
_PARTIAL = re.compile(r'^\.ckpt-\d{8,}\.ckpt\.tmp-')
_HEADER = re.compile(rb'^STOKER-CKPT 1 step=(\d+) bytes=(\d+) sha256=([0-9a-f]{64})$')
_MAX_HEADER = 256


def file_name(step):
    return 'ckpt-%08d.ckpt' % step


def list_steps(directory):
    """The steps that have a checkpoint file in `directory`, newest first
    (whole or not: load_newest checks)."""
    steps = []
    for name in os.listdir(directory):
        m = _NAME.match(name)
        if m:
            steps.append(int(m.group(1)))
    return sorted(steps, reverse=True)


def clean_partial_writes(directory):
    """Removes temp files of writes that never finished (their writer was
    killed) and returns their names. Call it only when no other process may
    be writing `directory`."""
    removed = []
    for name in sorted(os.listdir(directory)):
        if _PARTIAL.match(name):
            os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def check_writable(directory):
    """Creates `directory` if needed and proves that a file can be created,
    synced and removed in it. Raises OSError (with the failing path) if not;
    permission bits alone would not tell, e.g. for root or a read-only mount."""
    os.makedirs(directory, exist_ok=True)
    probe = os.path.join(directory, '.ckpt-00000000.ckpt.tmp-probe-%d' % os.getpid())
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b'probe')
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(directory, step, payload):
    """Writes `payload` (bytes) as the checkpoint of `step`, atomically and
    durably (see the module's contract), then prunes: keeps this checkpoint
    and the newest one before it, and removes any of a later step (those
    belong to a history this run has gone back on, e.g. a torn file that
    load_newest skipped). Returns the checkpoint's path."""
    final = os.path.join(directory, file_name(step))
    tmp = os.path.join(directory, '.%s.tmp-%d' % (file_name(step), os.getpid()))
    header = MAGIC + b'step=%d bytes=%d sha256=%s\n' % (
        step, len(payload), hashlib.sha256(payload).hexdigest().encode())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(header + payload)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, final)
    _fsync_dir(directory)
    _prune(directory, step)
    return final


def _prune(directory, step):
    older = [s for s in list_steps(directory) if s < step]
    doomed = [s for s in list_steps(directory) if s > step] + older[KEEP - 1:]
    for s in doomed:
        try:
            os.unlink(os.path.join(directory, file_name(s)))
        except FileNotFoundError:
            pass


def read(path):
    """(step, payload) of the checkpoint file at `path`, or raises
    ValueError saying why it is not a whole checkpoint (OSError if it
    cannot be read at all)."""
    with open(path, 'rb') as f:
        data = f.read()
    end = data.find(b'\n', 0, _MAX_HEADER)
    if not data.startswith(MAGIC) or end < 0:
        raise ValueError('no STOKER-CKPT header (%d bytes in the file)' % len(data))
    m = _HEADER.match(data[:end])
    if not m:
        raise ValueError('malformed header %r' % data[:end][:80])
    step, size, digest = int(m.group(1)), int(m.group(2)), m.group(3).decode()
    payload = data[end + 1:]
    if len(payload) != size:
        raise ValueError('truncated or torn: the header says %d bytes, the file has %d' %
                         (size, len(payload)))
    actual = hashlib.sha256(payload).hexdigest()
    if actual != digest:
        raise ValueError('torn or corrupt: sha256 %s... where the header says %s...' %
                         (actual[:12], digest[:12]))
    return step, payload


def load_newest(directory, decode, warn):
    """The newest whole checkpoint in `directory` as (step, path, decode(payload)),
    or None when there is none.

    Files that are torn, unreadable, name a step other than their header's,
    or whose payload `decode` rejects (by raising any Exception) are skipped;
    `warn` gets one message per skipped file saying which and why."""
    for step in list_steps(directory):
        path = os.path.join(directory, file_name(step))
        try:
            header_step, payload = read(path)
            if header_step != step:
                raise ValueError('the header says step %d' % header_step)
            state = decode(payload)
        except Exception as e:  # noqa: BLE001 -- any reason makes the file unusable
            warn('ignoring checkpoint %s: %s; trying an older one' % (path, e))
            continue
        return step, path, state
    return None
