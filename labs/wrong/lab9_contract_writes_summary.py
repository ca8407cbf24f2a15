# lab: 09_replicate_a_claim
# cell: interval
# why: stores the interval into the summary it was given (for the table printed later) and returns it: the interval is right, but the caller's summary gains keys (an argument changed in place)
def paired_interval(summary):
    """The 95 % t interval of the mean gap: {"low", "high", "half_width", "excludes_zero"}."""
    n = summary["n"]
    half = t975(n - 1) * summary["std"] / math.sqrt(n)
    low, high = summary["mean"] - half, summary["mean"] + half
    summary.update(low=low, high=high, half_width=half, excludes_zero=low > 0 or high < 0)
    return summary
