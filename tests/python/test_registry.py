"""Issue 31: one record per op (hooks/ops/registry), read from the source tree. Importing the
registry checks that each record is in its family's file, that no declaring function has two
records and no declared name two fakes; here, what a record refers to is in it."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "python" / "helpers"))
from engine_source import engine

REGISTRY = engine("registry")


def test_a_result_fake_named_by_a_correction_is_its_records():
    """`Given.rest_fake` names a fake of the same record (the fresh tensors after the caller's
    buffer: cutlass_fused_moe's scratch)."""
    for op in REGISTRY.OPS:
        for correction in [op.correction, *op.by_release.values()]:
            given = correction and correction.result_is_given
            if given and given.rest_fake:
                assert given.rest_fake in op.fakes, op.key


def test_the_engine_reads_the_registrys_tables():
    """The engine's tables are the registry's, not copies: a test that empties the corrections
    (--without-corrections) empties what the engine reads."""
    assert engine("engine.corrections").CORRECTIONS is REGISTRY.CORRECTIONS
    assert engine("engine.fakes").BY_NAME is REGISTRY.BY_NAME
    assert engine("engine.wake").EXTRA_DECLARATIONS is REGISTRY.EXTRA_DECLARATIONS
