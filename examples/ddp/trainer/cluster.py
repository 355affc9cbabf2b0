"""This replica's place in the job, read from the Vertex / PyTorch environment.

Stoker (like Vertex AI's PyTorch images) gives every replica
  RANK, WORLD_SIZE            node rank and node count over all pools:
                              chief 0, workers 1..n, then servers, evaluators
  MASTER_ADDR, MASTER_PORT    where rank 0 listens for the rendezvous
  LOCAL_RANK, LOCAL_WORLD_SIZE  0 and 1: one process per replica
  CUDA_VISIBLE_DEVICES        only the replica's own GPUs ("" = none)
  CLUSTER_SPEC, TF_CONFIG     the same cluster as JSON (workerpool0.. / chief..)
With none of them set (run by hand) the trainer is a world of one.

Nothing here imports torch, so the process clock can be read before the
(slow, seconds) torch import.
"""

import json
import os
import time

# Variables a data-parallel replica reads or prints; the order of the log line.
ENV_KEYS = ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR',
            'MASTER_PORT', 'CUDA_VISIBLE_DEVICES', 'CLUSTER_SPEC', 'TF_CONFIG')


def process_start_time():
    """Wall-clock time (Unix seconds) at which this process was created.

    Read from /proc (10 ms resolution), so it counts the interpreter's own
    start-up too; falls back to "now" where /proc is missing.
    """
    try:
        with open('/proc/self/stat') as f:
            # Field 22 (starttime, clock ticks after boot) follows "(comm)".
            fields = f.read().rsplit(')', 1)[1].split()
        start_ticks = int(fields[19])
        with open('/proc/uptime') as f:
            uptime = float(f.read().split()[0])
        age = uptime - start_ticks / os.sysconf('SC_CLK_TCK')
        return time.time() - max(age, 0.0)
    except (OSError, ValueError, IndexError):
        return time.time()


class Cluster:
    """Rank, world size and role of this replica; immutable after reading."""

    def __init__(self, environ=None):
        env = os.environ if environ is None else environ
        self.rank = _int_env(env, 'RANK', 0)
        self.world_size = _int_env(env, 'WORLD_SIZE', 1)
        self.local_rank = _int_env(env, 'LOCAL_RANK', 0)
        self.local_world_size = _int_env(env, 'LOCAL_WORLD_SIZE', 1)
        if self.world_size < 1:
            raise ValueError('WORLD_SIZE is %d; it must be at least 1' % self.world_size)
        if not 0 <= self.rank < self.world_size:
            raise ValueError('RANK is %d but WORLD_SIZE is %d; RANK must be in [0, %d)' %
                             (self.rank, self.world_size, self.world_size))
        if self.world_size > 1:
            for key in ('MASTER_ADDR', 'MASTER_PORT'):
                if not env.get(key):
                    raise ValueError('%s is not set but WORLD_SIZE is %d; run the job through '
                                     'Stoker or set %s yourself' % (key, self.world_size, key))
        self.cluster_spec = _json_env(env, 'CLUSTER_SPEC')
        self.tf_config = _json_env(env, 'TF_CONFIG')
        self.env = {k: env.get(k) for k in ENV_KEYS}

    @property
    def is_chief(self):
        return self.rank == 0

    @property
    def distributed(self):
        return self.world_size > 1

    def env_line(self):
        """One log line with every variable above, JSON values parsed."""
        shown = dict(self.env)
        shown['CLUSTER_SPEC'] = self.cluster_spec
        shown['TF_CONFIG'] = self.tf_config
        return 'ddp env: ' + json.dumps(shown, sort_keys=False)


def init_process_group(cluster, use_cuda, timeout_s):
    """Joins the job's process group (env:// rendezvous at MASTER_ADDR:PORT).

    Blocks until all WORLD_SIZE ranks have joined, or raises after timeout_s.
    Returns the backend used: 'nccl' with CUDA, else 'gloo'. A world of one
    needs no group and returns None.
    """
    if not cluster.distributed:
        return None
    import datetime

    import torch.distributed as dist
    backend = 'nccl' if use_cuda else 'gloo'
    dist.init_process_group(backend=backend, init_method='env://', rank=cluster.rank,
                            world_size=cluster.world_size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return backend


def _int_env(env, key, default):
    value = env.get(key)
    if value is None or value == '':
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError('%s is %r; it must be an integer' % (key, value)) from None


def _json_env(env, key):
    value = env.get(key)
    if not value:
        return None
    try:
        return json.loads(value)
    except ValueError:
        raise ValueError('%s is not valid JSON: %r' % (key, value[:200])) from None
