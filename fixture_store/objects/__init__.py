"""The bottom layer: content-addressed objects and what names them (DESIGN 1, 4, 8 and 11).

``digests`` (a SHA-256 and a size, parsed and printed), ``trees`` (a manifest of member paths to
digests), ``store`` (the content-addressed folders, atomic writes, shard locks) and ``statecache``
(the verified-state cache). ``fsutil`` holds the file-system helpers the store is built from.
Nothing here imports from a layer above.
"""

__all__ = ["digests", "fsutil", "statecache", "store", "trees"]
