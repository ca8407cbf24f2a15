# lab: 09_replicate_a_claim
# cell: interval
# why: treats the interval as open: an end exactly at 0 "excludes" zero; every end and width is right and so is every interval away from that boundary (a rounding boundary the generated gaps never hit)
def paired_interval(summary):
    """The 95 % t interval of the mean gap: {"low", "high", "half_width", "excludes_zero"}."""
    n = summary["n"]
    half = t975(n - 1) * summary["std"] / math.sqrt(n)
    low, high = summary["mean"] - half, summary["mean"] + half
    return {"low": low, "high": high, "half_width": half, "excludes_zero": low >= 0 or high <= 0}
