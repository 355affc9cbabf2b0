"""End-to-end test of the Titanic example: make_data.py, then the trainer.

Runs both as subprocesses, the way Stoker runs a replica: the environment
carries AIP_MODEL_DIR, CLOUD_ML_HP_METRIC_FILE, CLOUD_ML_TRIAL_ID and a
PYTHONPATH with Stoker's hypertune module (src/python).

Run: /usr/bin/python3 -m unittest discover -s examples/titanic -p '*_test.py'
(needs a Python with torch and numpy; Debian's /usr/bin/python3 has them).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
HYPERTUNE_DIR = os.path.normpath(os.path.join(HERE, '..', '..', 'src',
                                              'python'))


def find_python():
    """A Python that has torch and numpy: this one, else Debian's."""
    for exe in (sys.executable, '/usr/bin/python3'):
        if exe and os.path.exists(exe) and subprocess.run(
                [exe, '-c', 'import torch, numpy'],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return exe
    return None


PYTHON = find_python()


@unittest.skipIf(PYTHON is None, 'no Python with torch and numpy')
class TitanicTrainerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix='titanic_test_')
        cls.data = os.path.join(cls.tmp, 'data')
        proc = subprocess.run(
            [PYTHON, os.path.join(HERE, 'make_data.py'), '--out', cls.data],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=60)
        if proc.returncode != 0:
            raise AssertionError('make_data.py failed:\n' + proc.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_trainer(self, args, env_extra, pythonpath=HYPERTUNE_DIR):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('AIP_', 'CLOUD_ML_'))
               and k not in ('CLUSTER_SPEC', 'RANK', 'WORLD_SIZE',
                             'PYTHONPATH')}
        if pythonpath:
            env['PYTHONPATH'] = pythonpath
        env.update(env_extra)
        return subprocess.run(
            [PYTHON, '-m', 'trainer.task'] + args, cwd=HERE, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True, timeout=120)

    def data_args(self, epochs=3):
        return ['--train=' + os.path.join(self.data, 'train.npz'),
                '--val', os.path.join(self.data, 'val.npz'),
                '--epochs=%d' % epochs, '--learning_rate=0.01']

    def test_make_data_writes_splits(self):
        try:
            import numpy as np
        except ImportError:
            self.skipTest('numpy is not importable in this interpreter')
        with np.load(os.path.join(self.data, 'train.npz')) as train, \
                np.load(os.path.join(self.data, 'val.npz')) as val:
            self.assertEqual(train['X'].shape, (800, 9))
            self.assertEqual(val['X'].shape, (200, 9))
            self.assertEqual(train['X'].dtype, np.float32)
            self.assertEqual(sorted(set(train['y'].tolist())), [0.0, 1.0])
            self.assertEqual(train['feature_names'].tolist()[:2],
                             ['pclass', 'sex_male'])
            # Standardized with train statistics.
            self.assertLess(abs(float(train['X'][:, 2].mean())), 1e-4)

    def test_trains_saves_model_and_reports_metrics(self):
        out = os.path.join(self.tmp, 'run1')
        metrics = os.path.join(out, 'hp', 'output.metrics')
        proc = self.run_trainer(self.data_args(3), {
            'AIP_MODEL_DIR': os.path.join(out, 'model') + '/',
            'CLOUD_ML_HP_METRIC_FILE': metrics,
            'CLOUD_ML_TRIAL_ID': '4',
            'CLUSTER_SPEC': json.dumps({
                'cluster': {'workerpool0': ['localhost:2222']},
                'environment': 'cloud',
                'task': {'type': 'workerpool0', 'index': 0, 'trial': '4'}}),
            'RANK': '0', 'WORLD_SIZE': '1'})
        self.assertEqual(proc.returncode, 0, proc.stdout)
        log = proc.stdout
        self.assertIn('role: workerpool0 replica 0, trial 4, rank 0 of 1',
                      log)
        self.assertRegex(log, r'device: (cpu|cuda)')
        epochs = [l for l in log.splitlines() if l.startswith('epoch ')]
        self.assertEqual(len(epochs), 3)
        self.assertRegex(epochs[2], r'^epoch 3/3 loss=\d\.\d{4} '
                         r'train_acc=\d\.\d{4} val_loss=\d\.\d{4} '
                         r'val_acc=\d\.\d{4}$')
        self.assertIn('model saved to ' + os.path.join(out, 'model'), log)
        self.assertRegex(log, r'final val_acc=0\.\d{4}')

        self.assertTrue(os.path.isfile(os.path.join(out, 'model',
                                                    'model.pt')))
        with open(os.path.join(out, 'model', 'model.json')) as f:
            info = json.load(f)
        self.assertEqual(len(info['feature_names']), 9)
        self.assertEqual(len(info['normalization']['feature_mean']), 9)
        self.assertEqual(info['normalization']['transforms'],
                         {'fare': 'log1p'})
        self.assertEqual(info['hyperparameters']['epochs'], 3)

        with open(metrics) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 3)
        for step, line in enumerate(lines, 1):
            entry = json.loads(line)
            self.assertEqual(line, json.dumps(entry, sort_keys=True))
            self.assertEqual(set(entry), {'accuracy', 'checkpoint_path',
                                          'global_step', 'timestamp',
                                          'trial'})
            self.assertEqual(entry['global_step'], str(step))
            self.assertEqual(entry['trial'], '4')
            self.assertTrue(0.0 <= float(entry['accuracy']) <= 1.0)
        final = float(log.split('final val_acc=')[1].split()[0])
        self.assertAlmostEqual(float(json.loads(lines[-1])['accuracy']),
                               final, places=4)
        # Three epochs already beat always guessing "died" (~64%).
        self.assertGreater(final, 0.7)

    def test_job_dir_fallback_and_missing_hypertune(self):
        job_dir = os.path.join(self.tmp, 'jobdir')
        proc = self.run_trainer(self.data_args(1) + ['--job-dir', job_dir,
                                                     '--optimizer=sgd'],
                                {}, pythonpath=None)
        self.assertEqual(proc.returncode, 0, proc.stdout)
        self.assertIn('warning: the hypertune module is not importable',
                      proc.stdout)
        self.assertTrue(os.path.isfile(os.path.join(job_dir, 'model',
                                                    'model.pt')))

    def test_unmapped_gcs_model_dir_exits_2(self):
        proc = self.run_trainer(self.data_args(1), {
            'AIP_MODEL_DIR': 'gs://titanic/output/model/',
            'CLOUD_ML_HP_METRIC_FILE': os.path.join(self.tmp, 'gs', 'm')})
        self.assertEqual(proc.returncode, 2, proc.stdout)
        self.assertIn('AIP_MODEL_DIR is gs://titanic/output/model/',
                      proc.stdout)


if __name__ == '__main__':
    unittest.main()
