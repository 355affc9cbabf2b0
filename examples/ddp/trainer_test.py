"""Tests of the DDP example without Stoker: the environment reader, and the
trainer run as one process and as two processes that form a gloo group the way
Stoker's replicas do (RANK, WORLD_SIZE, MASTER_ADDR/PORT in the environment).

Run: /usr/bin/python3 -m unittest discover -s examples/ddp -p '*_test.py'
(about 15 s; needs a Python with torch and numpy, e.g. Debian's).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from trainer import cluster as cluster_lib  # noqa: E402  (no torch import)


def find_python():
    """A Python that has torch and numpy: this one, else Debian's."""
    for exe in (sys.executable, '/usr/bin/python3'):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, '-c', 'import torch, numpy'], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return exe
    return None


PYTHON = find_python()
ARGS = ['--epochs=3', '--global_batch_size=48', '--train_size=960', '--val_size=240']


class ClusterTest(unittest.TestCase):

    def test_no_environment_is_a_world_of_one(self):
        c = cluster_lib.Cluster({})
        self.assertEqual((c.rank, c.world_size, c.local_rank), (0, 1, 0))
        self.assertTrue(c.is_chief)
        self.assertFalse(c.distributed)

    def test_reads_ranks_and_the_cluster_spec(self):
        spec = {'cluster': {'workerpool0': ['h:1'], 'workerpool1': ['h:2']},
                'task': {'type': 'workerpool1', 'index': 0}}
        c = cluster_lib.Cluster({'RANK': '1', 'WORLD_SIZE': '2', 'MASTER_ADDR': 'h',
                                 'MASTER_PORT': '1', 'CLUSTER_SPEC': json.dumps(spec)})
        self.assertEqual((c.rank, c.world_size), (1, 2))
        self.assertFalse(c.is_chief)
        self.assertEqual(c.cluster_spec, spec)
        line = json.loads(c.env_line()[len('ddp env: '):])
        self.assertEqual(line['CLUSTER_SPEC']['task']['type'], 'workerpool1')
        self.assertEqual(line['RANK'], '1')

    def test_rejects_a_rank_outside_the_world(self):
        with self.assertRaisesRegex(ValueError, r'RANK is 2 but WORLD_SIZE is 2'):
            cluster_lib.Cluster({'RANK': '2', 'WORLD_SIZE': '2', 'MASTER_ADDR': 'h',
                                 'MASTER_PORT': '1'})

    def test_a_world_of_two_needs_the_master_address(self):
        with self.assertRaisesRegex(ValueError, r'MASTER_ADDR is not set but WORLD_SIZE is 2'):
            cluster_lib.Cluster({'RANK': '0', 'WORLD_SIZE': '2'})

    def test_process_start_time_is_in_the_past(self):
        import time
        start = cluster_lib.process_start_time()
        self.assertLessEqual(start, time.time())
        self.assertGreater(start, time.time() - 24 * 3600)


@unittest.skipIf(PYTHON is None, 'no Python with torch and numpy')
class TrainerTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix='ddp-test-')

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, name, extra_env, args=ARGS):
        env = {k: v for k, v in os.environ.items()
               if k not in cluster_lib.ENV_KEYS and k != 'AIP_MODEL_DIR'}
        env.update(extra_env, PYTHONPATH=HERE, CUDA_VISIBLE_DEVICES='',
                   AIP_MODEL_DIR=os.path.join(self.tmp, name))
        return subprocess.Popen([PYTHON, '-m', 'trainer.task'] + args, env=env, cwd=self.tmp,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def finish(self, proc):
        out, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, out)
        return out

    def metrics(self, name):
        with open(os.path.join(self.tmp, name, 'metrics.json')) as f:
            return json.load(f)

    def test_two_ranks_reach_the_loss_of_one(self):
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            port = str(s.getsockname()[1])
        one = self.start('one', {})
        ranks = [self.start('two', {'RANK': str(r), 'WORLD_SIZE': '2', 'MASTER_ADDR': '127.0.0.1',
                                    'MASTER_PORT': port}) for r in (0, 1)]
        self.finish(one)
        outs = [self.finish(p) for p in ranks]
        m1, m2 = self.metrics('one'), self.metrics('two')
        self.assertEqual((m1['world_size'], m2['world_size']), (1, 2))
        self.assertEqual((m2['backend'], m2['local_batch_size']), ('gloo', 24))
        self.assertAlmostEqual(m1['final_val_loss'], m2['final_val_loss'],
                               delta=1e-4 * m1['final_val_loss'])
        self.assertIn('"start_to_pg_s"', outs[1])

    def test_a_global_batch_that_does_not_split_evenly_is_refused(self):
        p = self.start('x', {'RANK': '0', 'WORLD_SIZE': '5', 'MASTER_ADDR': '127.0.0.1',
                             'MASTER_PORT': '1'})
        out, _ = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 2, out)
        self.assertIn('--global_batch_size (48) must be a multiple of WORLD_SIZE (5)', out)


if __name__ == '__main__':
    unittest.main()
