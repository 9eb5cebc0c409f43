"""Self-contained HTML pages: a shell with a contents bar and filters, and lineage graphs as SVG.

Nothing here fetches anything: styles and the few lines of script are inline, so a page opens
offline from disk (``file://``), and the same input gives the same bytes.
"""
