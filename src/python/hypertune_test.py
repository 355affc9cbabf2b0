"""Tests for Stoker's cloudml-hypertune compatible module.

Run: /usr/bin/python3 -m unittest discover -s src/python -p '*_test.py'
"""

import json
import os
import shutil
import stat
import sys
import tempfile
import time
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hypertune  # noqa: E402


class HyperTuneTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='hypertune_test_')
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.path = os.path.join(self.dir, 'sub', 'dir', 'output.metrics')
        env = {'CLOUD_ML_HP_METRIC_FILE': self.path}
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)
        os.environ.pop('CLOUD_ML_TRIAL_ID', None)

    def read_lines(self):
        with open(self.path) as f:
            text = f.read()
        self.assertTrue(text.endswith('\n'))
        return text.splitlines()

    def test_env_path_and_parent_created_at_construction(self):
        hpt = hypertune.HyperTune()
        self.assertEqual(hpt.metric_path, self.path)
        self.assertTrue(os.path.isdir(os.path.dirname(self.path)))
        self.assertFalse(os.path.exists(self.path))

    def test_default_path(self):
        with mock.patch.dict(os.environ):
            os.environ.pop('CLOUD_ML_HP_METRIC_FILE', None)
            with mock.patch('os.makedirs') as makedirs, \
                    mock.patch('os.path.isdir', return_value=False):
                hpt = hypertune.HyperTune()
        self.assertEqual(hpt.metric_path, '/tmp/hypertune/output.metrics')
        makedirs.assert_called_once()
        self.assertEqual(makedirs.call_args[0][0], '/tmp/hypertune')

    def test_line_format(self):
        os.environ['CLOUD_ML_TRIAL_ID'] = '7'
        hpt = hypertune.HyperTune()
        before = time.time()
        hpt.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag='my_metric_tag', metric_value=0.987,
            global_step=1000, checkpoint_path='/ckpt/1000')
        after = time.time()
        lines = self.read_lines()
        self.assertEqual(len(lines), 1)
        entry = json.loads(lines[0])
        self.assertEqual(set(entry), {'checkpoint_path', 'global_step',
                                      'my_metric_tag', 'timestamp', 'trial'})
        self.assertEqual(entry['my_metric_tag'], '0.987')
        self.assertEqual(entry['global_step'], '1000')
        self.assertEqual(entry['trial'], '7')
        self.assertEqual(entry['checkpoint_path'], '/ckpt/1000')
        self.assertIsInstance(entry['timestamp'], float)
        self.assertTrue(before <= entry['timestamp'] <= after)
        # Exactly json.dumps(..., sort_keys=True), keys in sorted order.
        self.assertEqual(lines[0], json.dumps(entry, sort_keys=True))
        self.assertTrue(lines[0].startswith('{"checkpoint_path": '))

    def test_value_and_step_coercion(self):
        hpt = hypertune.HyperTune()
        hpt.report_hyperparameter_tuning_metric('acc', 1)          # int
        hpt.report_hyperparameter_tuning_metric('acc', '0.5', 3.9)  # str/float
        hpt.report_hyperparameter_tuning_metric('acc', 2, global_step=0)
        entries = [json.loads(l) for l in self.read_lines()]
        self.assertEqual([e['acc'] for e in entries], ['1.0', '0.5', '2.0'])
        self.assertEqual([e['global_step'] for e in entries], ['0', '3', '0'])
        self.assertEqual([e['trial'] for e in entries], ['0', '0', '0'])
        self.assertEqual([e['checkpoint_path'] for e in entries], ['', '', ''])

    def test_default_tag(self):
        hpt = hypertune.HyperTune()
        hpt.report_hyperparameter_tuning_metric('', 0.25)
        hpt.report_hyperparameter_tuning_metric(None, 0.5)
        entries = [json.loads(l) for l in self.read_lines()]
        for e, v in zip(entries, ['0.25', '0.5']):
            self.assertEqual(e['training/hptuning/metric'], v)

    def test_rewrites_whole_file_in_order(self):
        hpt = hypertune.HyperTune()
        for step in range(1, 6):
            hpt.report_hyperparameter_tuning_metric('loss', step / 10.0, step)
            self.assertEqual(len(self.read_lines()), step)
        entries = [json.loads(l) for l in self.read_lines()]
        self.assertEqual([e['global_step'] for e in entries],
                         ['1', '2', '3', '4', '5'])

    def test_keeps_last_100_entries(self):
        hpt = hypertune.HyperTune()
        for step in range(1, 151):
            hpt.report_hyperparameter_tuning_metric('m', step, step)
        entries = [json.loads(l) for l in self.read_lines()]
        self.assertEqual(len(entries), 100)
        self.assertEqual(entries[0]['global_step'], '51')
        self.assertEqual(entries[-1]['global_step'], '150')
        self.assertEqual(entries[-1]['m'], '150.0')

    def test_no_temp_files_left_and_readable_mode(self):
        hpt = hypertune.HyperTune()
        for i in range(3):
            hpt.report_hyperparameter_tuning_metric('m', i)
        self.assertEqual(os.listdir(os.path.dirname(self.path)),
                         ['output.metrics'])
        # Same mode as open(path, 'w') would give, not mkstemp's 0600.
        umask = os.umask(0o22)
        os.umask(umask)
        mode = stat.S_IMODE(os.stat(self.path).st_mode)
        self.assertEqual(mode, 0o666 & ~umask)

    def test_bad_value_raises_and_leaves_file(self):
        hpt = hypertune.HyperTune()
        hpt.report_hyperparameter_tuning_metric('m', 1)
        with self.assertRaises(ValueError):
            hpt.report_hyperparameter_tuning_metric('m', 'not a number')
        self.assertEqual(len(self.read_lines()), 1)


if __name__ == '__main__':
    unittest.main()


class RealPackageWinsTest(unittest.TestCase):
    """Where cloudml-hypertune is installed, `import hypertune` gives it."""

    def test_an_installed_hypertune_later_on_the_path_is_used(self):
        import subprocess
        import sys
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, 'hypertune'))
            with open(os.path.join(d, 'hypertune', '__init__.py'), 'w') as f:
                f.write('REAL = True\n')
            here = os.path.dirname(os.path.abspath(__file__))
            env = dict(os.environ, PYTHONPATH=here + os.pathsep + d)
            out = subprocess.run([sys.executable, '-c', 'import hypertune; print(hypertune.REAL)'],
                                 env=env, capture_output=True, text=True, check=True).stdout
            self.assertEqual(out.strip(), 'True')
            env = dict(os.environ, PYTHONPATH=here)
            out = subprocess.run([sys.executable, '-c',
                                  'import hypertune; print(hasattr(hypertune, "REAL"), hypertune.HyperTune)'],
                                 env=env, capture_output=True, text=True, check=True).stdout
            self.assertTrue(out.startswith('False'), out)
