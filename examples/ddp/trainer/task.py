"""Data-parallel regression with PyTorch DistributedDataParallel.

  python -m trainer.task [--epochs=10] [--global_batch_size=96]
      [--learning_rate=0.05] [--train_size=3072] [--val_size=768] [--seed=0]

The same code runs as one replica or as 1 chief + N workers and reaches the
same result, because every run uses the same data, the same initial weights
and the same *global* batch: each of the W replicas takes global/W rows of
every step's batch (DistributedSampler: rank r takes rows r, r+W, ... of the
epoch's permutation, so the W shards of step k are exactly the rows of the
single replica's batch k), and DDP averages the gradients. Only the order of
float additions differs, so losses agree to about 1e-6 relative.

Reads RANK, WORLD_SIZE, MASTER_ADDR/PORT (see cluster.py); backend gloo on
CPU, nccl with CUDA. Prints its environment ("ddp env: {...}"), the time from
process start to process group formed ("ddp timing: {...}"), one line per
epoch with the loss averaged over all replicas, and "final val_loss=...". The
chief writes model.pt and metrics.json to $AIP_MODEL_DIR (else
--job-dir/model, else ./model).

Exit status: 0 done, 2 bad arguments or environment; --fail_rank injects a
failure (for tests of how the service stops the other replicas).
"""

import time

from trainer import cluster as cluster_lib

PROCESS_START = cluster_lib.process_start_time()
MAIN_START = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

EXIT_USAGE = 2


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog='python -m trainer.task',
                                description='Data-parallel regression with PyTorch DDP.')
    p.add_argument('--epochs', type=int, default=10)
    p.add_argument('--global_batch_size', '--global-batch-size', dest='global_batch_size',
                   type=int, default=96,
                   help='rows per optimizer step over all replicas; each replica takes '
                        'global_batch_size / WORLD_SIZE')
    p.add_argument('--learning_rate', '--learning-rate', dest='learning_rate', type=float,
                   default=0.05)
    p.add_argument('--train_size', '--train-size', dest='train_size', type=int, default=3072)
    p.add_argument('--val_size', '--val-size', dest='val_size', type=int, default=768)
    p.add_argument('--features', type=int, default=16)
    p.add_argument('--hidden_units', '--hidden-units', dest='hidden_units', type=int,
                   default=64)
    p.add_argument('--seed', type=int, default=0, help='seeds the data, weights and shuffling')
    p.add_argument('--threads', type=int, default=1,
                   help='torch intra-op threads per replica (1: replicas share few cores)')
    p.add_argument('--pg_timeout_s', '--pg-timeout-s', dest='pg_timeout_s', type=float,
                   default=300, help='give up waiting for the other replicas after this long')
    p.add_argument('--job-dir', '--job_dir', dest='job_dir', default=None)
    p.add_argument('--fail_rank', '--fail-rank', dest='fail_rank', type=int, default=None,
                   help='test hook: the replica of this RANK exits with --fail_exit_code')
    p.add_argument('--fail_exit_code', '--fail-exit-code', dest='fail_exit_code', type=int,
                   default=3)
    p.add_argument('--fail_at', '--fail-at', dest='fail_at', choices=['init', 'train'],
                   default='init',
                   help='init: before joining the process group (the others wait in the '
                        'rendezvous); train: after the first epoch (the others wait in an '
                        'all-reduce)')
    args = p.parse_args(argv)
    for name in ('epochs', 'global_batch_size', 'train_size', 'val_size', 'features',
                 'hidden_units', 'threads'):
        if getattr(args, name) < 1:
            p.error('--%s must be at least 1' % name)
    if not args.learning_rate > 0:
        p.error('--learning_rate must be positive')
    if args.train_size % args.global_batch_size:
        p.error('--train_size (%d) must be a multiple of --global_batch_size (%d), so that '
                'every step sees a full global batch' % (args.train_size, args.global_batch_size))
    return args


def die(message):
    print('error: ' + message, file=sys.stderr, flush=True)
    sys.exit(EXIT_USAGE)


def model_dir(job_dir):
    """$AIP_MODEL_DIR, else JOB_DIR/model, else ./model."""
    if os.environ.get('AIP_MODEL_DIR'):
        return os.environ['AIP_MODEL_DIR']
    if job_dir:
        return os.path.join(job_dir, 'model')
    return 'model'


def make_data(n_train, n_val, features, seed):
    """A fixed regression problem: y = x.w + 0.5 tanh(x.v) + noise (numpy, seeded).

    Returns float32 arrays (x_train, y_train, x_val, y_val); identical on
    every replica and every run with the same arguments.
    """
    import numpy as np
    rng = np.random.RandomState(seed)
    w = rng.normal(size=features) / np.sqrt(features)
    v = rng.normal(size=features)
    x = rng.normal(size=(n_train + n_val, features))
    y = x @ w + 0.5 * np.tanh(x @ v) + 0.1 * rng.normal(size=n_train + n_val)
    x, y = x.astype(np.float32), y.astype(np.float32).reshape(-1, 1)
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def maybe_fail(args, cluster, stage):
    if args.fail_rank is not None and args.fail_rank == cluster.rank and args.fail_at == stage:
        print('injected failure: rank %d exits with status %d at %s' %
              (cluster.rank, args.fail_exit_code, stage), file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(args.fail_exit_code)


def main(argv=None):
    args = parse_args(argv)
    try:
        cluster = cluster_lib.Cluster()
    except ValueError as e:
        die(str(e))
    print(cluster.env_line(), flush=True)
    if args.global_batch_size % cluster.world_size:
        die('--global_batch_size (%d) must be a multiple of WORLD_SIZE (%d) so that every '
            'replica takes the same share of each step' %
            (args.global_batch_size, cluster.world_size))
    local_batch = args.global_batch_size // cluster.world_size

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    torch_imported = time.time()

    torch.set_num_threads(args.threads)
    use_cuda = torch.cuda.is_available()
    # CUDA_VISIBLE_DEVICES holds only this replica's GPUs, so its first GPU is
    # cuda:0 whatever LOCAL_RANK says (several ranks may share a node).
    device = (torch.device('cuda', cluster.local_rank % torch.cuda.device_count())
              if use_cuda else torch.device('cpu'))
    if use_cuda:
        torch.cuda.set_device(device)

    maybe_fail(args, cluster, 'init')
    backend = cluster_lib.init_process_group(cluster, use_cuda, args.pg_timeout_s)
    pg_formed = time.time()
    print('ddp timing: ' + json.dumps({
        'rank': cluster.rank,
        'world_size': cluster.world_size,
        'backend': backend,
        'process_start': round(PROCESS_START, 4),
        'torch_imported': round(torch_imported, 4),
        'pg_formed': round(pg_formed, 4),
        'import_s': round(torch_imported - MAIN_START, 3),
        'start_to_pg_s': round(pg_formed - PROCESS_START, 3),
    }), flush=True)

    x_tr, y_tr, x_val, y_val = make_data(args.train_size, args.val_size, args.features, args.seed)
    train = TensorDataset(torch.from_numpy(x_tr), torch.from_numpy(y_tr))
    # The same permutation on every replica (seed + epoch); rank r takes every
    # W-th row, so one global step covers the rows of one single-replica batch.
    sampler = DistributedSampler(train, num_replicas=cluster.world_size, rank=cluster.rank,
                                 shuffle=True, seed=args.seed, drop_last=False)
    loader = DataLoader(train, batch_size=local_batch, sampler=sampler)
    # Validation: rank r takes rows r, r+W, ...; losses are summed over ranks.
    x_val_t = torch.from_numpy(x_val[cluster.rank::cluster.world_size]).to(device)
    y_val_t = torch.from_numpy(y_val[cluster.rank::cluster.world_size]).to(device)

    torch.manual_seed(args.seed)  # same initial weights everywhere (DDP also broadcasts rank 0's)
    model = nn.Sequential(nn.Linear(args.features, args.hidden_units), nn.Tanh(),
                          nn.Linear(args.hidden_units, 1)).to(device)
    net = nn.parallel.DistributedDataParallel(model) if cluster.distributed else model
    optimizer = torch.optim.SGD(net.parameters(), lr=args.learning_rate, momentum=0.9)
    loss_fn = nn.MSELoss()

    def global_mean(total, count):
        """Sum of (total, count) over all replicas -> mean."""
        t = torch.tensor([total, count], dtype=torch.float64, device=device)
        if cluster.distributed:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return (t[0] / t[1]).item()

    print('training: world size %d, %s, batch %d per replica (%d global), %d steps per epoch' %
          (cluster.world_size, backend or 'no process group', local_batch,
           args.global_batch_size, len(loader)), flush=True)
    train_start = time.time()
    history = []
    for epoch in range(1, args.epochs + 1):
        sampler.set_epoch(epoch)
        net.train()
        total, count = 0.0, 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = loss_fn(net(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(xb)
            count += len(xb)
        train_loss = global_mean(total, count)
        net.eval()
        with torch.no_grad():
            val_sum = nn.functional.mse_loss(model(x_val_t), y_val_t, reduction='sum').item()
        val_loss = global_mean(val_sum, len(x_val_t))
        history.append({'epoch': epoch, 'train_loss': train_loss, 'val_loss': val_loss})
        print('epoch %d/%d train_loss=%.6f val_loss=%.6f' %
              (epoch, args.epochs, train_loss, val_loss), flush=True)
        if epoch == 1:
            maybe_fail(args, cluster, 'train')
    train_s = time.time() - train_start

    final = history[-1]['val_loss']
    print('final val_loss=%.8f' % final, flush=True)
    if cluster.is_chief:
        out = model_dir(args.job_dir)
        os.makedirs(out, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(out, 'model.pt'))
        metrics = {
            'final_val_loss': final,
            'final_train_loss': history[-1]['train_loss'],
            'world_size': cluster.world_size,
            'backend': backend,
            'global_batch_size': args.global_batch_size,
            'local_batch_size': local_batch,
            'epochs': args.epochs,
            'seed': args.seed,
            'train_seconds': round(train_s, 3),
            'start_to_pg_s': round(pg_formed - PROCESS_START, 3),
            'history': history,
        }
        with open(os.path.join(out, 'metrics.json'), 'w') as f:
            json.dump(metrics, f, indent=2)
        report_metric(final, args.epochs)
        print('model saved to %s' % out, flush=True)
    if cluster.distributed:
        # Every rank finishes before any tears the group down, and the DDP
        # wrapper goes first: torch 1.13's gloo teardown sometimes hung for
        # good on rank 0 when rank 1 had already exited (2 runs in 5 here).
        dist.barrier()
        del net
        dist.destroy_process_group()


def report_metric(val_loss, step):
    """Reports val_loss through hypertune when Stoker's module is on PYTHONPATH."""
    try:
        import hypertune
    except ImportError:
        return
    hypertune.HyperTune().report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag='val_loss', metric_value=val_loss, global_step=step)


if __name__ == '__main__':
    main()
