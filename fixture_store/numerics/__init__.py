"""The arithmetic of comparing arrays under a tolerance: one definition every comparison uses.

``arrays`` (bit-identical / within tolerance / drift, with max and mean errors per array, each
metric judged by one entry of its ``JUDGES``), ``ulp`` (distances in units in the last place)
and ``integers`` (exact integer distances, never through float64). The parity assertion, the
ONNX comparators, regeneration's drift and a video's frames all judge through
:func:`arrays.judge_arrays`; the layer sits just above the registry (whose tolerance it reads)
so that readers and verbs below ``parity`` use it too.
"""

__all__ = ["arrays", "integers", "ulp"]
