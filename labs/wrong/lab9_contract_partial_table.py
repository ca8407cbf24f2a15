# lab: 09_replicate_a_claim
# cell: interval
# why: its own t table, exact but only for 2 to 31 seeds, with a silent fallback to the normal 1.96 beyond: right for every number of seeds the lab's own runs use, too narrow for 32 seeds and more (a statistics table that covers part of the range)
T_TABLE = {
    1: 12.706204736174694,
    2: 4.302652729749462,
    3: 3.1824463052837078,
    4: 2.7764451051977934,
    5: 2.5705818356363146,
    6: 2.4469118511449786,
    7: 2.364624251592784,
    8: 2.306004135204166,
    9: 2.262157162798205,
    10: 2.228138851986274,
    11: 2.200985160091639,
    12: 2.1788128296672284,
    13: 2.1603686564627913,
    14: 2.144786687917804,
    15: 2.131449545559776,
    16: 2.1199052992212546,
    17: 2.1098155778333156,
    18: 2.1009220402410382,
    19: 2.0930240544083087,
    20: 2.085963447265864,
    21: 2.0796138447276795,
    22: 2.0738730679040254,
    23: 2.0686576104190486,
    24: 2.0638985616280245,
    25: 2.0595385527532972,
    26: 2.0555294386428735,
    27: 2.0518305164802846,
    28: 2.0484071417952454,
    29: 2.045229642132703,
    30: 2.0422724563012378,
}


def paired_interval(summary):
    """The 95 % t interval of the mean gap: {"low", "high", "half_width", "excludes_zero"}."""
    n = summary["n"]
    t = T_TABLE.get(n - 1, 1.959963984540054)  # past the table, the normal quantile is close
    half = t * summary["std"] / math.sqrt(n)
    low, high = summary["mean"] - half, summary["mean"] + half
    return {"low": low, "high": high, "half_width": half, "excludes_zero": low > 0 or high < 0}
