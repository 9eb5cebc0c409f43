"""Parity: ONNX cases run by real runtimes, their arrays compared under a tolerance
(:mod:`fixture_store.numerics.arrays`).

``cases`` (a compare run over verified cases with its known failures), ``results`` (the outcome of
one case and runtime), ``runtimes`` (ONNX Runtime and the onnx ReferenceEvaluator, in worker
processes) and the reports (``report_html``, ``report_metrics``), whose values split into what
is the same on every machine and what is not (``parts``).
"""

__all__ = ["arrays", "cases", "parts", "report_html", "report_metrics", "results", "runtimes"]
