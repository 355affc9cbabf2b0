"""Start-to-process-group times of DDP jobs that ran under one stokerd.

  report.py DATA_DIR JOB_ID:LABEL [JOB_ID:LABEL ...] [--json OUT.json]

For every job it reads, per replica, trainer.json (start_time_us: the
supervisor's clock just before it forks the trainer) and the trainer's
"ddp timing: {...}" log line (process_start, torch_imported, pg_formed, Unix
seconds, same host clock), and computes

  start_to_pg   pg formed (latest rank) - first replica's trainer start
  spread        last replica's trainer start - first one's
  import        slowest `import torch` (+ numpy) of the ranks
  rendezvous    pg formed - last rank done importing torch (the CUDA probe
                and init_process_group, once every rank is there)

then prints p50 and max of each per label as a markdown table. Percentiles are
nearest-rank.
"""

import json
import math
import os
import re
import sys


def job_times(data_dir, job_id):
    job_dir = os.path.join(data_dir, 'jobs', job_id)
    starts, timings = [], []
    for replica in sorted(os.listdir(job_dir)):
        rdir = os.path.join(job_dir, replica)
        with open(os.path.join(rdir, 'trainer.json')) as f:
            starts.append(json.load(f)['start_time_us'] / 1e6)
        with open(os.path.join(rdir, 'output.log')) as f:
            m = re.search(r'^ddp timing: (.*)$', f.read(), re.M)
        if not m:
            raise SystemExit('job %s replica %s logged no "ddp timing:" line' % (job_id, replica))
        timings.append(json.loads(m.group(1)))
    pg = max(t['pg_formed'] for t in timings)
    return {
        'job': job_id,
        'replicas': len(starts),
        'start_to_pg': pg - min(starts),
        'spread': max(starts) - min(starts),
        'import': max(t['torch_imported'] - t['process_start'] for t in timings),
        'rendezvous': pg - max(t['torch_imported'] for t in timings),
    }


def pct(values, p):
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def main(argv):
    out_json = None
    if '--json' in argv:
        i = argv.index('--json')
        out_json = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    data_dir, pairs = argv[0], argv[1:]
    rows = {}
    for pair in pairs:
        job_id, label = pair.split(':', 1)
        rows.setdefault(label, []).append(job_times(data_dir, job_id))
    cols = ('start_to_pg', 'spread', 'import', 'rendezvous')
    print('| replicas | runs | ' + ' | '.join('%s p50 / max (s)' % c for c in cols) + ' |')
    print('|---|---|' + '---|' * len(cols))
    for label, runs in rows.items():
        cells = ['%.2f / %.2f' % (pct([r[c] for r in runs], 50), max(r[c] for r in runs))
                 for c in cols]
        print('| %s | %d | %s |' % (label, len(runs), ' | '.join(cells)))
    if out_json:
        with open(out_json, 'w') as f:
            json.dump(rows, f, indent=2)


if __name__ == '__main__':
    main(sys.argv[1:])
