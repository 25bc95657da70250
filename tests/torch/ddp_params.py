"""The check the PyTorch tests over a network make of a DDP run's parameters, as testbed_rank.py
saves them (OUT/BACKEND-rankR.pt)."""
import torch


def expect_equal_and_near_gloo(out, ranks, gloo_out=None):
    """atp-rank{r}.pt hold the same parameters for every r in `ranks`, and they are within 1e-5 of
    gloo-rank0.pt (in `gloo_out`, default `out`): 5 steps of fixed-point sums (4 x 0.5/2^26 per
    value and step), or of float sums in another order, through SGD."""
    atp = [torch.load(out / f"atp-rank{r}.pt") for r in ranks]
    gloo = torch.load((gloo_out or out) / "gloo-rank0.pt")
    for name, value in atp[0].items():
        for other in atp[1:]:
            assert torch.equal(value, other[name]), name  # every rank holds the same parameters
        assert torch.allclose(value, gloo[name], atol=1e-5, rtol=0), name
