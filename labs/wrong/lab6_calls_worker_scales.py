# lab: 06_estimator_weights
# cell: scales
# why: imports the kit's estimators and asks them for the statistics and scales instead of computing them
from zg.grappa.estimators import batch_stats, worker_scales


def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    return batch_stats(weights)


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    return worker_scales(Estimator("batch"), stats)[0]


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p, W_p = stats[:, 0], stats[:, 1]
    return (1 - lam) * W_p / W_p.sum() + lam * n_p / n_p.sum()
