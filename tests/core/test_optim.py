"""DeviceAdam: agrees with torch.optim.Adam, never syncs, and skips bit-exactly on device."""

import copy

import pytest
import torch

from zg.audit import SyncAudit
from zg.optim import DeviceAdam


def model_and_data(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    return model, torch.randn(16, 6), torch.randint(0, 3, (16,))


def run(model, opt, x, y, steps, apply=None):
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step(apply=apply) if apply is not None else opt.step()


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_matches_torch_adam(weight_decay):
    # float64, so that the comparison tests the formula, not float32 rounding order.
    a, x, y = model_and_data()
    a, x = a.double(), x.double()
    b = copy.deepcopy(a)
    run(a, DeviceAdam(a.parameters(), lr=1e-2, weight_decay=weight_decay), x, y, 25)
    run(b, torch.optim.Adam(b.parameters(), lr=1e-2, weight_decay=weight_decay), x, y, 25)
    for p, q in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-12)


def test_step_has_no_host_syncs():
    model, x, y = model_and_data()
    opt = DeviceAdam(model.parameters())
    run(model, opt, x, y, 1)
    with SyncAudit() as audit:
        run(model, opt, x, y, 2, apply=torch.tensor(True))
    assert audit.host_syncs == 0, audit.report()


def test_skipped_steps_change_nothing_bitwise():
    model, x, y = model_and_data()
    opt = DeviceAdam(model.parameters(), lr=1e-2)
    run(model, opt, x, y, 3)
    params = [p.detach().clone() for p in model.parameters()]
    state = copy.deepcopy(opt.state_dict())
    run(model, opt, x, y, 4, apply=torch.tensor(False))
    for p, q in zip(model.parameters(), params):
        assert torch.equal(p, q)
    for k, s in opt.state_dict()["state"].items():
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(s[name], state["state"][k][name])
    # And applying again continues exactly as a run that never skipped.
    ref, _, _ = model_and_data()
    ref_opt = DeviceAdam(ref.parameters(), lr=1e-2)
    run(ref, ref_opt, x, y, 4)
    run(model, opt, x, y, 1, apply=torch.tensor(True))
    for p, q in zip(model.parameters(), ref.parameters()):
        assert torch.equal(p, q)


def test_bad_hyperparameters():
    model, _, _ = model_and_data()
    with pytest.raises(ValueError, match="lr"):
        DeviceAdam(model.parameters(), lr=0)
    with pytest.raises(ValueError, match="betas"):
        DeviceAdam(model.parameters(), betas=(1.0, 0.9))


def _loop_copy(model):
    """The same model and a DeviceAdam forced onto its per-parameter loop (no flat buffers)."""
    twin = copy.deepcopy(model)
    opt = DeviceAdam(twin.parameters(), lr=1e-2, weight_decay=0.01)
    opt._flat = [None] * len(opt.param_groups)
    for group in opt.param_groups:
        opt._bind(group, None, fresh=True)
    return twin, opt


def test_the_flat_step_gives_the_loops_bits():
    """One cat per group and the update on flat buffers: element for element the loop's arithmetic."""
    model, x, y = model_and_data()
    twin, loop = _loop_copy(model)
    flat = DeviceAdam(model.parameters(), lr=1e-2, weight_decay=0.01)
    gates = [None, torch.tensor(True), torch.tensor(False), torch.tensor(True), None]
    for gate in gates:
        run(model, flat, x, y, 1, apply=gate)
        run(twin, loop, x, y, 1, apply=gate)
        for p, q in zip(model.parameters(), twin.parameters()):
            assert torch.equal(p, q)
    for (k, s), (_, t) in zip(
        flat.state_dict()["state"].items(), loop.state_dict()["state"].items()
    ):
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(s[name], t[name]), (k, name)


def test_a_flat_step_launches_a_fixed_number_of_ops_whatever_the_parameter_count():
    from zg.audit import LaunchCount

    counts = []
    for layers in (1, 4, 16):
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(5, 5) for _ in range(layers)])
        opt = DeviceAdam(model.parameters())
        model(torch.randn(3, 5)).sum().backward()
        with LaunchCount() as count:
            opt.step(apply=torch.tensor(True))
            opt.zero_grad(set_to_none=False)
        counts.append(count.launches)
    assert counts[0] == counts[1] == counts[2] <= 40, counts
    # The loop launches about 29 per parameter tensor (32 tensors here).
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(5, 5) for _ in range(16)])
    model(torch.randn(3, 5)).sum().backward()
    _, loop = _loop_copy(model)
    for p, q in zip(loop.param_groups[0]["params"], model.parameters()):
        p.grad = q.grad.clone()
    with LaunchCount() as count:
        loop.step(apply=torch.tensor(True))
    assert count.launches >= 20 * 32


def test_loading_state_keeps_the_flat_buffers():
    model, x, y = model_and_data()
    opt = DeviceAdam(model.parameters(), lr=1e-2)
    run(model, opt, x, y, 3)
    saved = copy.deepcopy(opt.state_dict())
    fresh_model, _, _ = model_and_data()
    fresh_model.load_state_dict(model.state_dict())
    fresh = DeviceAdam(fresh_model.parameters(), lr=1e-2)
    fresh.load_state_dict(saved)
    flat = fresh._flat[0]
    for p in fresh_model.parameters():
        assert fresh.state[p]["exp_avg"].data_ptr() >= flat["exp_avg"].data_ptr()
        assert (
            fresh.state[p]["exp_avg"].untyped_storage().data_ptr()
            == flat["exp_avg"].untyped_storage().data_ptr()
        )
        assert fresh.state[p]["step"] is flat["step"]
    run(model, opt, x, y, 2)
    run(fresh_model, fresh, x, y, 2)
    for p, q in zip(model.parameters(), fresh_model.parameters()):
        assert torch.equal(p, q)
    saved["state"][0]["step"] = saved["state"][0]["step"] + 1
    with pytest.raises(ValueError, match="different step counts"):
        DeviceAdam(fresh_model.parameters()).load_state_dict(saved)
