"""Reviewing a registry change, without the store: the registry at a git revision
(:mod:`.revisions`), each tolerance change classed by what it does to verdicts
(:mod:`.tolerances`), a change's page for a reviewer (:mod:`.changes`, ``fixture-store diff``)
and the records judged on their own (:mod:`.checking`, ``fixture-store check``)."""
