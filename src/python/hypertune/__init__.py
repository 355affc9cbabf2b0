"""Stoker's dependency-free drop-in for the ``cloudml-hypertune`` package.

Trainers written for Vertex AI report hyperparameter-tuning metrics with::

    import hypertune
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag='accuracy', metric_value=0.91, global_step=5)

Stoker puts this directory on ``PYTHONPATH`` for every trial, so such trainers
run unchanged. The on-disk protocol matches cloudml-hypertune:

* output file: ``$CLOUD_ML_HP_METRIC_FILE``, default
  ``/tmp/hypertune/output.metrics``; its parent directory is created when
  ``HyperTune()`` is constructed;
* trial id: ``$CLOUD_ML_TRIAL_ID``, default ``'0'``;
* each report appends one entry to an in-memory history of at most the last
  100 entries, and the whole history is rewritten to the file, one
  ``json.dumps(entry, sort_keys=True)`` object per line;
* an entry is ``{"timestamp": <float>, "trial": "<id>", "<tag>": "<float as
  str>", "global_step": "<int as str>", "checkpoint_path": "<str>"}``; the tag
  defaults to ``training/hptuning/metric`` when empty.

Deliberate difference: the file is written to a temporary file in the same
directory and then moved over the old one with ``os.replace`` (an atomic
rename on POSIX), so a reader polling the file (Stoker's runner) never sees a
truncated or half-written file. The final content is byte-for-byte what the
original library would have written.

Written from the protocol description only; no code was taken from
cloudml-hypertune.
"""

import collections
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import time


def _load_real_hypertune():
    """Returns the installed cloudml-hypertune module when there is one.

    Stoker's directory comes first on ``PYTHONPATH``, ahead of site-packages;
    where the real package is installed it should win, so look for another
    ``hypertune`` on the rest of ``sys.path`` and load that instead.
    """
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rest = [p for p in sys.path if os.path.abspath(p or '.') != here]
    spec = importlib.machinery.PathFinder.find_spec(__name__, rest)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)
    return module


if os.environ.get('STOKER_HYPERTUNE_REAL_CHECKED') != '1':
    os.environ['STOKER_HYPERTUNE_REAL_CHECKED'] = '1'
    try:
        _real = _load_real_hypertune()
    finally:
        del os.environ['STOKER_HYPERTUNE_REAL_CHECKED']
    if _real is not None:
        globals().update(_real.__dict__)
        # The import statement hands out sys.modules['hypertune'], now the real one.

__all__ = ['HyperTune', 'DEFAULT_METRIC_PATH', 'DEFAULT_METRIC_TAG',
           'MAX_ENTRIES']

DEFAULT_METRIC_PATH = '/tmp/hypertune/output.metrics'
DEFAULT_METRIC_TAG = 'training/hptuning/metric'
MAX_ENTRIES = 100


def _current_umask():
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


# mkstemp creates files with mode 0600; give the metrics file the mode a plain
# open(path, 'w') would have, so a runner under another uid can still read it.
_FILE_MODE = 0o666 & ~_current_umask()


class HyperTune(object):
    """Records hyperparameter-tuning metrics for the current trial."""

    def __init__(self):
        self.metric_path = os.environ.get('CLOUD_ML_HP_METRIC_FILE',
                                          DEFAULT_METRIC_PATH)
        self.trial_id = os.environ.get('CLOUD_ML_TRIAL_ID', '0')
        self._history = collections.deque(maxlen=MAX_ENTRIES)
        parent = os.path.dirname(self.metric_path)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)

    def report_hyperparameter_tuning_metric(self, hyperparameter_metric_tag,
                                            metric_value, global_step=None,
                                            checkpoint_path=''):
        """Records one measurement and rewrites the metrics file.

        Args:
          hyperparameter_metric_tag: the metric's name (the study's metricId);
            'training/hptuning/metric' when empty.
          metric_value: a number (anything float() accepts).
          global_step: the training step of this measurement; '0' when None.
          checkpoint_path: optional path of the checkpoint it belongs to.
        """
        tag = hyperparameter_metric_tag or DEFAULT_METRIC_TAG
        entry = {
            'timestamp': time.time(),
            'trial': str(self.trial_id),
            tag: str(float(metric_value)),
            'global_step': str(int(global_step)) if global_step else '0',
            'checkpoint_path': str(checkpoint_path),
        }
        self._history.append(entry)
        self._write()

    def _write(self):
        text = ''.join(json.dumps(e, sort_keys=True) + '\n'
                       for e in self._history)
        parent = os.path.dirname(self.metric_path) or '.'
        fd, tmp = tempfile.mkstemp(
            prefix='.' + os.path.basename(self.metric_path) + '.',
            suffix='.tmp', dir=parent)
        try:
            with os.fdopen(fd, 'w') as f:
                f.write(text)
            os.chmod(tmp, _FILE_MODE)
            os.replace(tmp, self.metric_path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
