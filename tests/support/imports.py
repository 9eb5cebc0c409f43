"""What a fresh interpreter imports: start-up cost is what a new process pays, so only a new
one tells."""

from __future__ import annotations

import subprocess
import sys


def modules_loaded_by(statement: str) -> set[str]:
    """Every module a new interpreter has loaded once it has run ``statement``."""
    code = f"import sys; {statement}; print(chr(10).join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return set(done.stdout.split())
