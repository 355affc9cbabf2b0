#!/usr/bin/env python3
"""Writes a synthetic, Titanic-style passenger dataset for the example trainer.

The passengers are drawn deterministically (seeded numpy) so every run writes
the same files. Survival follows a logistic model with the well-known effects
of the real disaster: women and children first, first class far ahead of third,
third-class women much worse off than other women, large families and old age
hurting, Cherbourg embarkation (richer passengers) helping a little.

Features (9 columns of X, in this order):
  pclass, sex_male, age, sibsp, parch, fare, embarked_C, embarked_Q, embarked_S
pclass, age, sibsp, parch and log1p(fare) are standardized with the training
split's mean and std; sex_male and embarked_* are 0/1.

Writes to --out:
  train.npz, val.npz   X float32 [n, 9], y float32 [n] (1 = survived),
                       feature_names, feature_mean, feature_std (the
                       standardization applied; mean 0, std 1 for 0/1
                       columns), transforms (JSON string {"fare": "log1p"})
  stats.json           the same normalization, readable

Usage:
  /usr/bin/python3 make_data.py --out /tmp/titanic-data [--n 1000] [--seed N]
"""

import argparse
import json
import os
import sys

import numpy as np

FEATURES = ['pclass', 'sex_male', 'age', 'sibsp', 'parch', 'fare',
            'embarked_C', 'embarked_Q', 'embarked_S']
STANDARDIZED = ['pclass', 'age', 'sibsp', 'parch', 'fare']
# Applied before standardization.
TRANSFORMS = {'fare': 'log1p'}


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def generate(n, rng):
    """Draws n passengers.

    Returns (raw features [n, 9] in FEATURES order, before any transform or
    standardization; survived [n] as 0/1 float32; the true P(survived) [n]).
    """
    pclass = rng.choice([1, 2, 3], size=n, p=[0.24, 0.21, 0.55])
    p_male = np.select([pclass == 1, pclass == 2], [0.56, 0.59], 0.71)
    male = (rng.random(n) < p_male).astype(np.float64)

    # Adults: older in first class. About 9% children, more in third class.
    age_mean = np.select([pclass == 1, pclass == 2], [38.0, 30.0], 26.0)
    age = rng.normal(age_mean, 12.0)
    p_child = np.select([pclass == 1, pclass == 2], [0.04, 0.09], 0.12)
    child = rng.random(n) < p_child
    age = np.clip(np.round(age), 15.0, 80.0)
    age = np.where(child, np.round(rng.uniform(0.4, 14.0, size=n), 1), age)

    # Family: children travel with parents (parch) and siblings (sibsp);
    # third-class families are larger.
    fam_scale = np.select([pclass == 1, pclass == 2], [0.5, 0.6], 0.9)
    sibsp = rng.poisson(np.where(child, 1.2 * fam_scale * 2, 0.35 * fam_scale))
    parch = np.where(child, 1 + rng.binomial(1, 0.6, size=n),
                     rng.poisson(0.25 * fam_scale + 0.4 * (sibsp > 1)))
    sibsp = np.minimum(sibsp, 8)
    parch = np.minimum(parch, 6)

    # Fare (pounds): log-normal by class, group tickets cost more.
    base = np.select([pclass == 1, pclass == 2], [60.0, 17.0], 9.0)
    fare = base * np.exp(rng.normal(0.0, 0.45, size=n)) \
        * (1.0 + 0.35 * (sibsp + parch))
    fare = np.round(fare, 2)

    p_emb = np.where(pclass[:, None] == 1, [0.40, 0.02, 0.58],
                     np.where(pclass[:, None] == 2, [0.09, 0.02, 0.89],
                              [0.13, 0.15, 0.72]))
    u = rng.random(n)
    emb = (u[:, None] > np.cumsum(p_emb, axis=1)).sum(axis=1)  # 0=C 1=Q 2=S
    emb = np.minimum(emb, 2)  # a cumsum that rounds to just under 1
    embarked = np.eye(3)[emb]

    female = 1.0 - male
    third = (pclass == 3).astype(np.float64)
    logit = (-0.95
             + 4.25 * female
             - 0.95 * (pclass - 1)
             - 2.1 * female * third          # third-class women fared worse
             + 2.5 * (age < 13) * male       # boys: "women and children first"
             + 0.75 * (age < 13) * female
             - 0.03 * (age - 30.0)
             - 0.55 * np.maximum(sibsp + parch - 3, 0)   # large families
             + 0.45 * embarked[:, 0])
    survived = (rng.random(n) < sigmoid(logit)).astype(np.float32)

    raw = np.column_stack([pclass, male, age, sibsp, parch, fare,
                           embarked]).astype(np.float64)
    return raw, survived, sigmoid(logit)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--n', type=int, default=1000, help='passengers')
    parser.add_argument('--seed', type=int, default=1912)
    parser.add_argument('--val_fraction', '--val-fraction', type=float,
                        default=0.2)
    args = parser.parse_args(argv)
    if args.out.startswith('gs://'):
        sys.exit('make_data.py writes local files; generate locally, then '
                 '`stoker storage cp DIR gs://...`')

    rng = np.random.default_rng(args.seed)
    raw, y, p_true = generate(args.n, rng)

    perm = rng.permutation(args.n)
    n_val = int(round(args.n * args.val_fraction))
    val_idx, train_idx = perm[:n_val], perm[n_val:]

    x = raw.copy()
    for name, fn in TRANSFORMS.items():
        j = FEATURES.index(name)
        x[:, j] = getattr(np, fn)(x[:, j])
    mean = np.zeros(len(FEATURES))
    std = np.ones(len(FEATURES))
    for name in STANDARDIZED:
        j = FEATURES.index(name)
        mean[j] = x[train_idx, j].mean()
        std[j] = x[train_idx, j].std() or 1.0
    x = (x - mean) / std

    os.makedirs(args.out, exist_ok=True)
    names = np.array(FEATURES)
    for split, idx in (('train', train_idx), ('val', val_idx)):
        np.savez(os.path.join(args.out, split + '.npz'),
                 X=x[idx].astype(np.float32), y=y[idx],
                 feature_names=names,
                 feature_mean=mean.astype(np.float32),
                 feature_std=std.astype(np.float32),
                 transforms=np.array(json.dumps(TRANSFORMS, sort_keys=True)))
    stats = {
        'feature_names': FEATURES,
        'transforms': TRANSFORMS,
        'feature_mean': [float(v) for v in mean],
        'feature_std': [float(v) for v in std],
        'n_train': int(len(train_idx)),
        'n_val': int(len(val_idx)),
        'seed': args.seed,
    }
    with open(os.path.join(args.out, 'stats.json'), 'w') as f:
        json.dump(stats, f, indent=2)
        f.write('\n')

    bayes = float(((p_true[val_idx] > 0.5) == (y[val_idx] > 0.5)).mean())
    print('wrote %d train / %d val passengers to %s '
          '(survival rate %.3f; val accuracy of the true model %.3f)'
          % (len(train_idx), len(val_idx), args.out, float(y.mean()), bayes))


if __name__ == '__main__':
    main()
