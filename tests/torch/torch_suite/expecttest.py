"""A stand-in for the `expecttest` package, which Debian 12 does not package.

torch.testing._internal.common_utils imports it for two things only: the module flag `ACCEPT`
(`--accept` rewrites expected-output files) and the base class `TestCase`, which adds
`assertExpectedInline`. torch's distributed test suite uses neither the flag nor that assertion,
so a plain unittest.TestCase is enough; `assertExpectedInline` fails loudly if anything calls it.
"""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802 (expecttest's name)
        raise NotImplementedError("expecttest stub (tests/torch/torch_suite/expecttest.py): "
                                  "assertExpectedInline is not available")
