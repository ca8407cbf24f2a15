# lab: 09_replicate_a_claim
# cell: interval
# why: the normal quantile 1.96 instead of Student's t with n - 1 degrees of freedom: over 3 seeds the interval comes out less than half as wide, and gaps look real that are not
def paired_interval(summary):
    """The 95 % t interval of the mean gap: {"low", "high", "half_width", "excludes_zero"}."""
    half = 1.96 * summary["std"] / math.sqrt(summary["n"])
    low, high = summary["mean"] - half, summary["mean"] + half
    return {"low": low, "high": high, "half_width": half, "excludes_zero": low > 0 or high < 0}
