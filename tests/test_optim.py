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
