"""Trains a small MLP on the Titanic-style dataset written by make_data.py.

Runs unchanged on Vertex AI custom training and on Stoker:

  python -m trainer.task --train=PATH/train.npz --val=PATH/val.npz \\
      --epochs=20 --learning_rate=0.01 [--batch_size=64] [--hidden_units=32] \\
      [--optimizer=adam|sgd] [--weight_decay=0.01] [--seed=0] [--job-dir=DIR]

* The model (state_dict, model.pt) and model.json (feature names,
  normalization, architecture, final metrics) go to $AIP_MODEL_DIR when set,
  else to --job-dir/model, else to ./model.
* The validation accuracy is reported after every epoch through the
  cloudml-hypertune API (tag 'accuracy', global_step = epoch), which is what a
  hyperparameter-tuning study with metricId 'accuracy' reads.
* Uses CUDA when available. Seeded, so a run on the same device repeats.

Stoker resolves gs:// paths to local buckets before the trainer starts. A path
that still starts with gs:// maps to /gcs/BUCKET/... where the bucket is
mounted there (Vertex AI, and Stoker's jobs) and is otherwise rejected with an
explanation (exit status 2).
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

EXIT_USAGE = 2


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog='python -m trainer.task',
        description='Train an MLP on the Titanic-style dataset.')
    p.add_argument('--train', required=True, help='training .npz (X, y)')
    p.add_argument('--val', required=True, help='validation .npz (X, y)')
    p.add_argument('--epochs', type=int, default=20)
    p.add_argument('--learning_rate', '--learning-rate', dest='learning_rate',
                   type=float, default=0.01)
    p.add_argument('--batch_size', '--batch-size', dest='batch_size',
                   type=int, default=64)
    p.add_argument('--hidden_units', '--hidden-units', dest='hidden_units',
                   type=int, default=32)
    p.add_argument('--optimizer', choices=['adam', 'sgd'], default='adam')
    p.add_argument('--weight_decay', '--weight-decay', dest='weight_decay',
                   type=float, default=0.01,
                   help='L2 penalty; with 800 rows the MLP overfits without '
                        'it (0.01 keeps the validation accuracy steadier '
                        'across seeds)')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--job-dir', '--job_dir', dest='job_dir', default=None,
                   help='output directory (AI Platform passes it); the model '
                        'goes to JOB_DIR/model unless AIP_MODEL_DIR is set')
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error('--epochs must be at least 1')
    if args.batch_size < 1:
        p.error('--batch_size must be at least 1')
    if args.hidden_units < 2:
        p.error('--hidden_units must be at least 2')
    if not args.learning_rate > 0:
        p.error('--learning_rate must be positive')
    if args.weight_decay < 0:
        p.error('--weight_decay must not be negative')
    return args


def die(message):
    print('error: ' + message, file=sys.stderr, flush=True)
    sys.exit(EXIT_USAGE)


def local_path(path, what):
    """Returns a local filesystem path for PATH, refusing unresolved gs://.

    Stoker hands trainers local paths. On Vertex AI, Cloud Storage is
    FUSE-mounted at /gcs/<bucket>/... (Stoker's jobs see their buckets there
    too), so gs:// maps there when the bucket is at /gcs. Anywhere else (an
    empty /gcs on a host is only a mount point) a gs:// path is an error
    (exit status 2).
    """
    if path.startswith('gs://'):
        bucket = path[len('gs://'):].split('/', 1)[0]
        if bucket and os.path.isdir(os.path.join('/gcs', bucket)):
            return '/gcs/' + path[len('gs://'):]
        die('%s is %s, a Cloud Storage URI that was not mapped to a local '
            'path. Run the trainer through Stoker (which resolves gs://BUCKET '
            'to its local bucket), or pass a local path.' % (what, path))
    return path


def role_description():
    """Describes this replica's place in the job from CLUSTER_SPEC / RANK."""
    parts = []
    spec = os.environ.get('CLUSTER_SPEC')
    if spec:
        try:
            task = json.loads(spec).get('task', {})
            parts.append('%s replica %s' % (task.get('type', '?'),
                                            task.get('index', '?')))
            if task.get('trial'):
                parts.append('trial %s' % task['trial'])
        except (ValueError, AttributeError):
            parts.append('unparseable CLUSTER_SPEC')
    if os.environ.get('RANK') is not None:
        parts.append('rank %s of %s' % (os.environ['RANK'],
                                        os.environ.get('WORLD_SIZE', '?')))
    return ', '.join(parts) if parts else None


def is_chief():
    """True unless CLUSTER_SPEC or RANK says this is a secondary replica.

    Only the chief saves the model, so replicas never write the same files.
    """
    spec = os.environ.get('CLUSTER_SPEC')
    if spec:
        try:
            task = json.loads(spec).get('task', {})
            if task.get('type') not in (None, 'workerpool0', 'chief',
                                        'master'):
                return False
        except (ValueError, AttributeError):
            pass
    return os.environ.get('RANK', '0') == '0'


def model_dir(args):
    """$AIP_MODEL_DIR, else --job-dir/model, else ./model (local paths)."""
    aip = os.environ.get('AIP_MODEL_DIR')
    if aip:
        return local_path(aip, 'AIP_MODEL_DIR')
    if args.job_dir:
        return os.path.join(local_path(args.job_dir, '--job-dir'), 'model')
    return 'model'


def load_npz(path, what):
    path = local_path(path, what)
    if not os.path.isfile(path):
        die('%s file %s does not exist (generate it with make_data.py)'
            % (what, path))
    with np.load(path) as data:
        if 'X' not in data or 'y' not in data:
            die('%s file %s has no X and y arrays' % (what, path))
        x = np.asarray(data['X'], dtype=np.float32)
        y = np.asarray(data['y'], dtype=np.float32).reshape(-1)
        meta = {}
        for key in ('feature_names', 'feature_mean', 'feature_std'):
            if key in data:
                meta[key] = data[key].tolist()
        if 'transforms' in data:
            meta['transforms'] = json.loads(str(data['transforms']))
    if x.ndim != 2 or x.shape[0] != y.shape[0] or x.shape[0] == 0:
        die('%s file %s: X must be [n, d] and y [n], got %s and %s'
            % (what, path, x.shape, y.shape))
    return x, y, meta


class MLP(nn.Module):
    """d -> hidden -> hidden/2 -> 1 logit."""

    def __init__(self, input_dim, hidden_units):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(input_dim, hidden_units), nn.ReLU(),
            nn.Linear(hidden_units, hidden_units // 2), nn.ReLU(),
            nn.Linear(hidden_units // 2, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def evaluate(model, loss_fn, x, y):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = loss_fn(logits, y).item()
        acc = int(((logits > 0).float() == y).sum().item()) / len(y)
    return loss, acc


def make_reporter():
    try:
        import hypertune  # Stoker puts its own module on PYTHONPATH.
    except ImportError:
        print('warning: the hypertune module is not importable; metrics will '
              'not be reported', flush=True)
        return None
    return hypertune.HyperTune()


def main(argv=None):
    args = parse_args(argv)
    started = time.time()

    role = role_description()
    if role:
        print('role: ' + role, flush=True)

    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if torch.cuda.is_available():
        device = torch.device('cuda')
        torch.cuda.manual_seed_all(args.seed)
        print('device: cuda (%s)' % torch.cuda.get_device_name(0), flush=True)
    else:
        device = torch.device('cpu')
        print('device: cpu', flush=True)

    out_dir = model_dir(args)
    x_train, y_train, meta = load_npz(args.train, '--train')
    x_val, y_val, _ = load_npz(args.val, '--val')
    if x_val.shape[1] != x_train.shape[1]:
        die('--train has %d features but --val has %d'
            % (x_train.shape[1], x_val.shape[1]))
    n, d = x_train.shape
    print('data: %d train, %d val, %d features; epochs=%d learning_rate=%g '
          'batch_size=%d hidden_units=%d optimizer=%s weight_decay=%g seed=%d'
          % (n, x_val.shape[0], d, args.epochs, args.learning_rate,
             args.batch_size, args.hidden_units, args.optimizer,
             args.weight_decay, args.seed),
          flush=True)

    xt = torch.from_numpy(x_train).to(device)
    yt = torch.from_numpy(y_train).to(device)
    xv = torch.from_numpy(x_val).to(device)
    yv = torch.from_numpy(y_val).to(device)

    model = MLP(d, args.hidden_units).to(device)
    loss_fn = nn.BCEWithLogitsLoss()
    if args.optimizer == 'adam':
        opt = torch.optim.Adam(model.parameters(), lr=args.learning_rate,
                               weight_decay=args.weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.learning_rate,
                              momentum=0.9, weight_decay=args.weight_decay)
    shuffle_gen = torch.Generator().manual_seed(args.seed)
    hpt = make_reporter()

    val_loss = val_acc = float('nan')
    for epoch in range(1, args.epochs + 1):
        model.train()
        perm = torch.randperm(n, generator=shuffle_gen).to(device)
        total_loss = 0.0
        correct = 0
        for start in range(0, n, args.batch_size):
            idx = perm[start:start + args.batch_size]
            xb, yb = xt[idx], yt[idx]
            logits = model(xb)
            loss = loss_fn(logits, yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total_loss += loss.item() * len(idx)
            correct += int(((logits.detach() > 0).float() == yb).sum().item())
        train_loss, train_acc = total_loss / n, correct / n
        val_loss, val_acc = evaluate(model, loss_fn, xv, yv)
        if not np.isfinite(train_loss):
            die('training diverged at epoch %d (loss %s); lower '
                '--learning_rate' % (epoch, train_loss))
        print('epoch %d/%d loss=%.4f train_acc=%.4f val_loss=%.4f '
              'val_acc=%.4f' % (epoch, args.epochs, train_loss, train_acc,
                                val_loss, val_acc), flush=True)
        if hpt is not None:
            hpt.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag='accuracy', metric_value=val_acc,
                global_step=epoch)

    if is_chief():
        os.makedirs(out_dir, exist_ok=True)
        torch.save({k: v.cpu() for k, v in model.state_dict().items()},
                   os.path.join(out_dir, 'model.pt'))
        info = {
            'framework': 'pytorch',
            'torch_version': torch.__version__,
            'architecture': {'type': 'mlp', 'input_dim': d,
                             'hidden_units': args.hidden_units,
                             'layers': [d, args.hidden_units,
                                        args.hidden_units // 2, 1],
                             'output': 'logit of P(survived)'},
            'feature_names': meta.get('feature_names'),
            'normalization': {
                'transforms': meta.get('transforms', {}),
                'feature_mean': meta.get('feature_mean'),
                'feature_std': meta.get('feature_std'),
                'formula': '(transform(x) - feature_mean) / feature_std',
            },
            'hyperparameters': {'epochs': args.epochs,
                                'learning_rate': args.learning_rate,
                                'batch_size': args.batch_size,
                                'hidden_units': args.hidden_units,
                                'optimizer': args.optimizer,
                                'weight_decay': args.weight_decay,
                                'seed': args.seed},
            'metrics': {'val_loss': val_loss, 'val_acc': val_acc},
        }
        with open(os.path.join(out_dir, 'model.json'), 'w') as f:
            json.dump(info, f, indent=2)
            f.write('\n')
        print('model saved to %s' % os.path.abspath(out_dir), flush=True)
    else:
        print('not the chief replica; model not saved', flush=True)
    print('final val_acc=%.4f' % val_acc, flush=True)
    print('training took %.1f s' % (time.time() - started), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
