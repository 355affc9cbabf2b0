"""A PyTorch trainer that survives preemption: it checkpoints every K steps
and on SIGTERM, and a restarted attempt resumes where the last one stopped
and ends with bit-for-bit the same model as an uninterrupted run.

  python -m trainer.task [--steps=200] [--checkpoint-every=20]
      [--sleep-per-step=0] [--seed=0] ...

What it relies on (Vertex AI sets the first two; Stoker sets all of them):
  AIP_CHECKPOINT_DIR     the same directory on every attempt of the job
                         (--checkpoint-dir overrides it; gs://b/p means the
                         Cloud Storage FUSE path /gcs/b/p)
  AIP_MODEL_DIR          where the final model goes (else --job-dir/model,
                         else ./model)
  STOKER_ATTEMPT         1 on the first attempt, 2 on the next, ...
  STOKER_RESTART_REASON  unset on attempt 1, else preemption, node_failure,
                         worker_restart or retry

The model is a small MLP with dropout, trained with Adam on a seeded
synthetic regression problem; each batch gets Gaussian input noise (numpy)
of a scale drawn by Python's random. So the run draws from four random
sources: torch's (initial weights, dropout), numpy's, Python's and the data
order's own torch.Generator. A checkpoint holds the step, the model, the
optimizer and the state of all four plus the epoch's order and position, so
that a resumed run draws exactly what an uninterrupted one would have.

Checkpoints (trainer/checkpoint.py): after every --checkpoint-every steps,
after the last step, and on SIGTERM; written atomically (temp file, fsync,
rename, fsync of the directory); the newest two kept. On start the trainer
resumes from the newest whole one; a torn one is skipped with a message.

Signals: on SIGTERM (a preemption, or a cancel) or SIGINT the trainer
finishes the step it is in, writes a checkpoint of it, and then dies by the
same signal (default handler restored, signal re-raised), so whoever sent it
sees the process end the way it asked: a cancelled job stays cancelled, and
Stoker requeues a preempted job whatever the exit status. The grace period
between SIGTERM and SIGKILL (preemption.grace_seconds on Stoker, 30 s by
default) must cover one step plus one checkpoint write. A signal that arrives
after the last step lets the trainer finish writing the model and exit 0.

Output, one line each, flushed at once:
  attempt 2 (restart reason: preemption): resuming from step 40 of 100 (<file>)
  step 41 loss 0.123...      after every step (the loss exactly, repr of a float)
  checkpoint step 50 -> <file>
  ignoring checkpoint <file>: <why>; trying an older one
  SIGTERM: checkpoint of step 43 written to <file>; stopping (the next attempt resumes there)
  final weights sha256 <hex> (model <dir>/model.pt)
The steps a restart redoes are the "step" lines beyond --steps across all
attempts: at most --checkpoint-every per SIGKILL, none after a SIGTERM.

Exit status: 0 done; 2 bad flags, an unusable checkpoint directory or a
checkpoint of another configuration; killed by SIGTERM/SIGINT after one.
"""

import argparse
import hashlib
import io
import os
import random
import select
import signal
import sys
import time

from trainer import checkpoint

EXIT_USAGE = 2

# Flags that shape the training; a checkpoint resumes only a run with the
# same values (--steps may grow: a longer run continues a shorter one).
CONFIG_FLAGS = ('seed', 'train_size', 'features', 'hidden_units', 'batch_size',
                'learning_rate', 'dropout', 'input_noise')


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog='python -m trainer.task',
                                description='Checkpointing, resumable PyTorch regression.')
    p.add_argument('--steps', type=int, default=200, help='optimizer steps in all')
    p.add_argument('--checkpoint-every', '--checkpoint_every', dest='checkpoint_every',
                   type=int, default=20, help='write a checkpoint after every K steps')
    p.add_argument('--sleep-per-step', '--sleep_per_step', dest='sleep_per_step', type=float,
                   default=0.0, help='seconds to idle after each step (to make a short run '
                   'slow enough to interrupt); a signal cuts it short')
    p.add_argument('--seed', type=int, default=0, help='seeds the data, weights and all draws')
    p.add_argument('--train-size', '--train_size', dest='train_size', type=int, default=2048)
    p.add_argument('--features', type=int, default=16)
    p.add_argument('--hidden-units', '--hidden_units', dest='hidden_units', type=int,
                   default=64)
    p.add_argument('--batch-size', '--batch_size', dest='batch_size', type=int, default=64)
    p.add_argument('--learning-rate', '--learning_rate', dest='learning_rate', type=float,
                   default=0.01)
    p.add_argument('--dropout', type=float, default=0.1)
    p.add_argument('--input-noise', '--input_noise', dest='input_noise', type=float,
                   default=0.1, help='largest standard deviation of the per-batch input noise')
    p.add_argument('--threads', type=int, default=1,
                   help='torch intra-op threads (bit-for-bit resumes need the same number)')
    p.add_argument('--checkpoint-dir', '--checkpoint_dir', dest='checkpoint_dir', default=None,
                   help='overrides $AIP_CHECKPOINT_DIR')
    p.add_argument('--job-dir', '--job_dir', dest='job_dir', default=None)
    args = p.parse_args(argv)
    for name in ('steps', 'checkpoint_every', 'train_size', 'features', 'hidden_units',
                 'batch_size', 'threads'):
        if getattr(args, name) < 1:
            p.error('--%s must be at least 1' % name.replace('_', '-'))
    if args.batch_size > args.train_size:
        p.error('--batch-size (%d) must not exceed --train-size (%d)' %
                (args.batch_size, args.train_size))
    if not 0 <= args.dropout < 1:
        p.error('--dropout must be in [0, 1)')
    if args.sleep_per_step < 0 or args.input_noise < 0 or not args.learning_rate > 0:
        p.error('--sleep-per-step and --input-noise must be >= 0, --learning-rate > 0')
    return args


def say(line):
    print(line, flush=True)


def die(message):
    print('error: ' + message, file=sys.stderr, flush=True)
    sys.exit(EXIT_USAGE)


def local_path(uri):
    """gs://bucket/path -> /gcs/bucket/path (Vertex AI's Cloud Storage FUSE
    mount); a local path as it is."""
    return '/gcs/' + uri[len('gs://'):] if uri.startswith('gs://') else uri


def checkpoint_dir(args):
    """(directory, where it came from for messages)."""
    if args.checkpoint_dir:
        return local_path(args.checkpoint_dir), '--checkpoint-dir'
    if os.environ.get('AIP_CHECKPOINT_DIR'):
        return local_path(os.environ['AIP_CHECKPOINT_DIR']), 'AIP_CHECKPOINT_DIR'
    die('no checkpoint directory: AIP_CHECKPOINT_DIR is not set (Stoker and Vertex AI set it '
        'when the job has baseOutputDirectory.outputUriPrefix); set it, or pass '
        '--checkpoint-dir=DIR')


def model_dir(args):
    """$AIP_MODEL_DIR, else --job-dir/model, else ./model."""
    if os.environ.get('AIP_MODEL_DIR'):
        return local_path(os.environ['AIP_MODEL_DIR'])
    return os.path.join(local_path(args.job_dir), 'model') if args.job_dir else 'model'


def attempt_prefix():
    """'attempt 2 (restart reason: preemption)' from STOKER_ATTEMPT and
    STOKER_RESTART_REASON; 'attempt unknown' outside Stoker."""
    attempt = os.environ.get('STOKER_ATTEMPT')
    if not attempt:
        return 'attempt unknown (STOKER_ATTEMPT is not set)'
    reason = os.environ.get('STOKER_RESTART_REASON')
    if attempt == '1' and not reason:
        return 'attempt 1'
    return 'attempt %s (restart reason: %s)' % (attempt, reason or 'not given')


class StopSignal:
    """Remembers a SIGTERM/SIGINT for the training loop to act on at the
    next step boundary, and lets nap() wake up when one arrives.

    The handler only records the signal (Python runs it between bytecodes
    of the main thread), so a step or a checkpoint write in progress always
    completes. The wakeup fd makes select() in nap() return at once."""

    def __init__(self):
        self.signum = None
        self._r, w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._note)

    def _note(self, signum, frame):
        if self.signum is None:
            self.signum = signum

    def nap(self, seconds):
        """Idles `seconds`, or less when a stop signal arrives."""
        deadline = time.monotonic() + seconds
        while self.signum is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            select.select([self._r], [], [], left)
            try:
                os.read(self._r, 512)
            except BlockingIOError:
                pass

    def die(self):
        """Ends the process by the signal it got, with its default action."""
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(self.signum, signal.SIG_DFL)
        os.kill(os.getpid(), self.signum)
        sys.exit(128 + self.signum)  # not reached: the default action ends the process


def make_data(args):
    """The regression problem, identical on every attempt: float32 tensors
    x (train_size, features) and y (train_size, 1)."""
    import numpy as np
    import torch
    rng = np.random.RandomState(args.seed)
    w = rng.normal(size=args.features) / np.sqrt(args.features)
    v = rng.normal(size=args.features)
    x = rng.normal(size=(args.train_size, args.features))
    y = x @ w + 0.5 * np.tanh(x @ v) + 0.1 * rng.normal(size=args.train_size)
    return (torch.from_numpy(x.astype(np.float32)),
            torch.from_numpy(y.astype(np.float32).reshape(-1, 1)))


def weights_digest(model):
    """sha256 over every tensor of the state dict in order: its name, dtype,
    shape and raw bytes. Equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(('%s %s %s\n' % (name, t.dtype, tuple(t.shape))).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def write_atomically(path, data):
    tmp = '%s.tmp-%d' % (path, os.getpid())
    with open(tmp, 'wb') as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Trainer:
    """The model, optimizer, data and every random source of one run, and
    the state() / restore() pair that checkpoints capture."""

    def __init__(self, args):
        import numpy as np
        import torch
        from torch import nn
        self.args, self.np, self.torch = args, np, torch
        torch.set_num_threads(args.threads)
        random.seed(args.seed)
        np.random.seed(args.seed)
        torch.manual_seed(args.seed)
        self.x, self.y = make_data(args)
        self.model = nn.Sequential(
            nn.Linear(args.features, args.hidden_units), nn.ReLU(), nn.Dropout(args.dropout),
            nn.Linear(args.hidden_units, args.hidden_units), nn.ReLU(),
            nn.Dropout(args.dropout), nn.Linear(args.hidden_units, 1))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.learning_rate)
        self.order_rng = torch.Generator().manual_seed(args.seed + 1)
        self.batches_per_epoch = args.train_size // args.batch_size  # the remainder is dropped
        self.epoch, self.position, self.order = 0, 0, None
        self.step = 0

    def _next_batch(self):
        if self.order is None or self.position == self.batches_per_epoch:
            if self.order is not None:
                self.epoch += 1
            self.order = self.torch.randperm(self.args.train_size, generator=self.order_rng)
            self.position = 0
        b = self.args.batch_size
        idx = self.order[self.position * b:(self.position + 1) * b]
        self.position += 1
        return self.x[idx], self.y[idx]

    def train_step(self):
        """One optimizer step; returns its loss as a Python float (exact)."""
        x, y = self._next_batch()
        scale = random.uniform(0.0, self.args.input_noise)
        noise = self.np.random.normal(0.0, 1.0, size=tuple(x.shape)) * scale
        x = x + self.torch.from_numpy(noise.astype(self.np.float32))
        self.model.train()
        self.optimizer.zero_grad()
        loss = self.torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        self.step += 1
        return loss.item()

    def state(self):
        return {
            'step': self.step,
            'config': {k: getattr(self.args, k) for k in CONFIG_FLAGS},
            'model': self.model.state_dict(),
            'optimizer': self.optimizer.state_dict(),
            'rng': {
                'torch': self.torch.get_rng_state(),
                'numpy': self.np.random.get_state(),
                'python': random.getstate(),
                'data_order': self.order_rng.get_state(),
            },
            'data': {'epoch': self.epoch, 'position': self.position, 'order': self.order},
        }

    def restore(self, s):
        self.step = s['step']
        self.model.load_state_dict(s['model'])
        self.optimizer.load_state_dict(s['optimizer'])
        self.torch.set_rng_state(s['rng']['torch'])
        self.np.random.set_state(s['rng']['numpy'])
        random.setstate(s['rng']['python'])
        self.order_rng.set_state(s['rng']['data_order'])
        self.epoch, self.position, self.order = (s['data']['epoch'], s['data']['position'],
                                                 s['data']['order'])

    def encode(self):
        buf = io.BytesIO()
        self.torch.save(self.state(), buf)
        return buf.getvalue()

    def decode(self, payload):
        s = self.torch.load(io.BytesIO(payload), map_location='cpu')
        missing = {'step', 'config', 'model', 'optimizer', 'rng', 'data'} - set(s)
        if missing:
            raise ValueError('not a checkpoint of this trainer (no %s)' % ', '.join(sorted(missing)))
        return s


def save_checkpoint(ckpt_dir, trainer):
    """checkpoint.save of the trainer's state; a file system error ends the
    run with a message naming the directory (the last whole checkpoint stays)."""
    try:
        return checkpoint.save(ckpt_dir, trainer.step, trainer.encode())
    except OSError as e:
        die('could not write the checkpoint of step %d to %s (%s); the last whole checkpoint '
            'there is kept. Free space or fix the directory, then run again to resume' %
            (trainer.step, ckpt_dir, e))


def main(argv=None):
    args = parse_args(argv)
    ckpt_dir, ckpt_source = checkpoint_dir(args)
    out_dir = model_dir(args)
    # Before torch is imported (seconds): a bad directory fails at once.
    try:
        checkpoint.check_writable(ckpt_dir)
    except OSError as e:
        die('%s=%s is not a directory this trainer can write checkpoints to (%s). It '
            'needs one that exists or can be created, where files can be created and synced: '
            'point %s at such a directory (on Stoker and Vertex AI it is '
            '<baseOutputDirectory.outputUriPrefix>/checkpoints/ of the job), or fix this path '
            '(is a part of it a regular file, a read-only mount, a full disk?)' %
            (ckpt_source, ckpt_dir, e, ckpt_source))
    stop = StopSignal()
    for name in checkpoint.clean_partial_writes(ckpt_dir):
        say('removed %s: a checkpoint write that an earlier attempt did not finish' %
            os.path.join(ckpt_dir, name))

    trainer = Trainer(args)
    found = checkpoint.load_newest(ckpt_dir, trainer.decode, say)
    prefix = attempt_prefix()
    if found is None:
        say('%s: starting at step 0 of %d (no checkpoint in %s)' % (prefix, args.steps, ckpt_dir))
    else:
        step, path, state = found
        differ = ['--%s=%s (the checkpoint has %s)' % (k.replace('_', '-'), getattr(args, k),
                                                       state['config'].get(k))
                  for k in CONFIG_FLAGS if state['config'].get(k) != getattr(args, k)]
        if differ:
            die('%s is a checkpoint of another configuration: %s. Run with the checkpoint\'s '
                'values, or give this run a checkpoint directory of its own (a new job, or '
                '--checkpoint-dir)' % (path, '; '.join(differ)))
        if step > args.steps:
            die('%s is at step %d, past --steps=%d: pass --steps=%d or more to continue it, or '
                'give this run a checkpoint directory of its own' % (path, step, args.steps, step))
        trainer.restore(state)
        say('%s: resuming from step %d of %d (%s)' % (prefix, step, args.steps, path))

    saved = trainer.step if found else None
    while trainer.step < args.steps and stop.signum is None:
        loss = trainer.train_step()
        say('step %d loss %r' % (trainer.step, loss))
        if trainer.step % args.checkpoint_every == 0 or trainer.step == args.steps:
            say('checkpoint step %d -> %s' % (trainer.step, save_checkpoint(ckpt_dir, trainer)))
            saved = trainer.step
        stop.nap(args.sleep_per_step)

    if trainer.step < args.steps:  # stopped by a signal
        if saved != trainer.step:
            path = save_checkpoint(ckpt_dir, trainer)
        else:
            path = os.path.join(ckpt_dir, checkpoint.file_name(trainer.step))
        say('%s: checkpoint of step %d written to %s; stopping (the next attempt resumes there)' %
            (signal.Signals(stop.signum).name, trainer.step, path))
        stop.die()

    os.makedirs(out_dir, exist_ok=True)
    buf = io.BytesIO()
    trainer.torch.save(trainer.model.state_dict(), buf)
    write_atomically(os.path.join(out_dir, 'model.pt'), buf.getvalue())
    digest = weights_digest(trainer.model)
    write_atomically(os.path.join(out_dir, 'weights_sha256.txt'), (digest + '\n').encode())
    say('final weights sha256 %s (model %s)' % (digest, os.path.join(out_dir, 'model.pt')))
    return 0


if __name__ == '__main__':
    sys.exit(main())
