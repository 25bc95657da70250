#!/usr/bin/python3
"""Rina's §III-A (its Equation 1): a ring's ScatterReduce with a barrier after every step.

Each of the ring's M members takes one step per chunk (M steps); step s of member n costs a fixed
overhead O plus C, drawn from a normal distribution N(k / M, sigma^2) (its chunk is 1/M of the
gradient), clipped at zero. With the barriers of NCCL and Open MPI, a step ends when its slowest
member's does, so the phase takes the sum over steps of the maximum over members. The paper's
approximation: T = M O + k + M sigma sqrt(2 ln M).

A ring of N workers has M = N members, each one worker. Rina's ring of N workers in racks of L
whose ToRs aggregate has M = N / L members; each step's time is then the slowest of the N workers
(a rack's switch waits for every one of its L workers), so T = M O + k + M sigma sqrt(2 ln N).

Writes one row per (N, sigma): the Monte Carlo means and the closed forms, ring and Rina.
Usage: model.py [--smoke] OUT.tsv
"""
import math
import sys

import numpy as np

K = 1.0  # the whole gradient's transfer time (the unit)
OVERHEAD = 0.001  # O: a step's fixed cost, in units of K


def simulate(members, workers_per_member, sigma, trials, rng):
    """Mean over trials of sum over the members' steps of the slowest worker's time."""
    mean = K / members
    draws = rng.normal(mean, sigma, size=(trials, members, members * workers_per_member))
    step = OVERHEAD + np.clip(draws, 0, None).max(axis=2)
    return float(step.sum(axis=1).mean())


def closed_form(members, samples, sigma):
    return members * OVERHEAD + K + members * sigma * math.sqrt(2 * math.log(samples))


def main():
    args = sys.argv[1:]
    smoke = bool(args) and args[0] == "--smoke"
    if smoke:
        args = args[1:]
    if len(args) != 1:
        sys.exit("usage: model.py [--smoke] OUT.tsv")
    rng = np.random.default_rng(1)
    sizes = [8, 16, 32] if smoke else [8, 16, 32, 64, 128, 256]
    sigmas = [0.002, 0.01] if smoke else [0.0, 0.002, 0.005, 0.01]
    trials = 50 if smoke else 400
    rack = 4
    with open(args[0], "w") as out:
        out.write("workers\tsigma\tring_sim\tring_eq1\trina_sim\trina_eq1\trina_over_ring\n")
        for n in sizes:
            for sigma in sigmas:
                ring = simulate(n, 1, sigma, trials, rng)
                rina = simulate(n // rack, rack, sigma, trials, rng)
                out.write(f"{n}\t{sigma}\t{ring:.4f}\t{closed_form(n, n, sigma):.4f}\t"
                          f"{rina:.4f}\t{closed_form(n // rack, n, sigma):.4f}\t{rina / ring:.3f}\n")


if __name__ == "__main__":
    main()
