"""GPT-2's BPE ranks file, taken from the openai-whisper sdist that ``python -m common.data.fetch`` keeps.

Whisper ships GPT-2's vocabulary in tiktoken's format (``whisper/assets/gpt2.tiktoken``: one
``base64-bytes rank`` line per token). We copy that one member out of the archive into
``cache_dir()/tokenizers`` the first time it is asked for, and read the copy from then on.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

from ..data.fetch import require_download
from ..data.files import cache_dir

MEMBER = "whisper/assets/gpt2.tiktoken"  # under the sdist's top folder, openai_whisper-<version>/


def gpt2_ranks_path() -> Path:
    """The local path of GPT-2's ranks file, extracting it from the whisper sdist once."""
    path = cache_dir() / "tokenizers" / "gpt2.tiktoken"
    if path.is_file():
        return path
    sdist = require_download("whisper")
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.endswith("/" + MEMBER) and m.isfile()]
        if len(members) != 1:
            raise RuntimeError(f"gpt2_ranks_path: expected one {MEMBER} in {sdist}, found {len(members)}")
        data = tar.extractfile(members[0]).read()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".gpt2.", suffix=".tmp", delete=False) as tmp:
        tmp.write(data)
    os.replace(tmp.name, path)
    return path
